"""How well a draft matches the target: the numbers distill.py puts on the draft's card.

- held-out perplexity of the draft (train.py's measure, weights as stored);
- greedy next-token agreement with the target on held-out text (train.py's measure, the
  figure the first draft's card gave);
- agreement on the target's own greedy continuations of held-out passages: the draft's argmax
  against the token the target chose, at each generated position. This is the per-token
  acceptance greedy speculative decoding sees (bench/spec_decode.py's free-chat workload).
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import torch

from tools.demo_model import distill_data, train

PASSAGES = 64
CONTINUATION = 64


def measure(target, draft, tok, target_dir: Path, ctx: int) -> dict:
    held_text = (target_dir / "eval" / "heldout.txt").read_text(encoding="utf-8")
    held_ids = train.encode_split(tok, held_text)
    return {
        "heldout_ppl": train.perplexity(draft, held_ids, ctx),
        "heldout_agreement": train.greedy_agreement(target, draft, held_ids, ctx, 65536),
        "agreement_tokens": min(65536, len(held_ids)),
        "continuation_agreement": continuation_agreement(draft, tok, target_dir, held_text),
        "continuation_passages": PASSAGES, "continuation_tokens": CONTINUATION,
    }


@torch.inference_mode()
def continuation_agreement(draft, tok, target_dir: Path, held_text: str) -> float:
    """Held-out paragraphs of 6..20 lines (as the bench picks them), continued greedily by the
    target through fairgate's engine; the share of continuation tokens the draft's argmax
    names, given the same prefix."""
    paras = [p for p in held_text.split("\n\n") if 6 <= p.count("\n") + 1 <= 20 and len(p) < 900]
    random.Random(7).shuffle(paras)
    prompts = [enc.ids[-320:] for enc in tok.encode_batch(paras[:PASSAGES])]
    args = SimpleNamespace(target=target_dir, continuation=CONTINUATION, sampled_one_in=10**9,
                           temperature=0.0, seed=0)
    outs = distill_data.generate(prompts, args)
    same = total = 0
    for prompt, out in zip(prompts, outs, strict=True):
        seq = torch.tensor([prompt + out])
        guess = draft(input_ids=seq).logits[0, len(prompt) - 1: -1].argmax(-1)  # [len(out)]
        same += int((guess == torch.tensor(out)).sum())
        total += len(out)
    return same / total
