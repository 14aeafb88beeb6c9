"""Re-measure saved demo models and rewrite eval/metrics.json, eval/heldout.txt and the cards.

For a run cut short: the target folder then holds the last checkpoint, and this computes the
same numbers train.py computes at its end (held-out perplexity of both, the unigram baseline,
draft/target greedy agreement), from the folders as saved.

    python -m tools.demo_model.measure --target-steps-done 600
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tools.demo_model import model_card, train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("build/demo_model"))
    ap.add_argument("--target", type=Path, default=Path("models/fairgate-demo"))
    ap.add_argument("--draft", type=Path, default=Path("models/fairgate-demo-draft"))
    ap.add_argument("--target-steps-done", type=int, required=True)
    ap.add_argument("--target-steps", type=int, default=800, help="the schedule's length")
    ap.add_argument("--draft-steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--target-lr", type=float, default=2e-3)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--train-minutes", type=float, required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    tok = Tokenizer.from_file(str(args.target / "tokenizer.json"))
    train_text = (args.work / "train.txt").read_text(encoding="utf-8")
    held_text = (args.work / "heldout.txt").read_text(encoding="utf-8")
    train_ids, held_ids = train.encode_split(tok, train_text), train.encode_split(tok, held_text)
    target = LlamaForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    draft = LlamaForCausalLM.from_pretrained(args.draft, dtype=torch.float32).eval()
    ctx = target.config.max_position_embeddings
    vocab = tok.get_vocab_size()
    m = {
        "unigram_ppl": train.unigram_perplexity(train_ids, held_ids, vocab), "vocab_size": vocab,
        "ctx": ctx, "seed": args.seed, "train_tokens_corpus": int(len(train_ids)),
        "heldout_tokens": int(len(held_ids)),
        "corpus": json.loads((args.work / "stats.json").read_text()),
        "target_params": sum(p.numel() for p in target.parameters()),
        "draft_params": sum(p.numel() for p in draft.parameters()),
        "target_train_tokens": args.target_steps_done * args.batch * ctx,
        "draft_train_tokens": args.draft_steps * args.batch * ctx,
        "target_ppl": train.perplexity(target, held_ids, ctx),
        "draft_ppl": train.perplexity(draft, held_ids, ctx),
        "greedy_agreement": train.greedy_agreement(target, draft, held_ids, ctx, 65536),
        "train_minutes": args.train_minutes, "target_arch": train.TARGET, "draft_arch": train.DRAFT,
        "target_steps": args.target_steps_done, "target_schedule_steps": args.target_steps,
        "draft_steps": args.draft_steps, "batch": args.batch, "target_lr": args.target_lr,
        "draft_lr": args.draft_lr, "agreement_tokens": min(65536, len(held_ids)),
    }
    eval_dir = args.target / "eval"
    eval_dir.mkdir(exist_ok=True)
    before = json.loads((eval_dir / "metrics.json").read_text()) if (eval_dir / "metrics.json").exists() else {}
    if "draft_distill" in before:  # a distilled draft (distill.py) keeps its own record
        m["draft_distill"] = before["draft_distill"]
        m["draft_arch"] = before["draft_distill"]["arch"]
    print(json.dumps(m))
    (eval_dir / "heldout.txt").write_text(held_text, encoding="utf-8")
    (eval_dir / "metrics.json").write_text(json.dumps(m, indent=2) + "\n")
    model_card.write_cards(args.target, args.draft, m)


if __name__ == "__main__":
    main()
