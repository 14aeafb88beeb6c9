"""Distillation data for the demo draft: the target's own continuations, with its top-k labels.

    python -m tools.demo_model.distill_data            # writes build/demo_model/distill.pt

Prompts are passages of the training split (never the held-out one: build_corpus.py's split,
and any passage that also occurs in the held-out text is skipped): paragraphs of Python code
and docstrings, runs of lines of the Turkish catalogs, each encoded like a request (BOS first)
and cut to at most --max-prompt tokens. fairgate's own engine (EngineCore, continuous batching,
no speculation) continues each for --continuation tokens, greedily for most prompts and
sampled (temperature --temperature, a seed per prompt) for one in --sampled-one-in, past EOS
as the speculative-decoding bench does (ignore_eos). Then the target, as stored (bfloat16
weights computed in float32, through transformers), scores every whole sequence once: its
top --top-k next-token ids and log-probabilities at every position are the labels the draft
learns (distill.py): its argmax (what greedy verification accepts) and its soft distribution.
Everything is seeded; one torch thread.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")

import torch

from tools.demo_model import build_corpus

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "models" / "fairgate-demo"
MAX_PASSAGE_LINES = 12


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def passages(train_text: str, held_text: str, count: int, seed: int) -> list[str]:
    """`count` training passages in a seeded order: paragraphs of 1..12 lines, longer ones cut
    into runs of 12 lines (the Turkish catalogs have no blank lines)."""
    held = set(held_text.split("\n\n"))
    out: list[str] = []
    for doc in train_text.split(build_corpus.SEP):
        for para in doc.split("\n\n"):
            lines = para.split("\n")
            for i in range(0, len(lines), MAX_PASSAGE_LINES):
                chunk = "\n".join(lines[i: i + MAX_PASSAGE_LINES])
                if 40 <= len(chunk) <= 1600 and chunk not in held:
                    out.append(chunk)
    random.Random(seed).shuffle(out)
    return out[:count]


def generate(prompts: list[list[int]], args) -> list[list[int]]:
    """Each prompt's continuation from fairgate's engine (plain decoding, batched)."""
    from fairgate.backends.local.engine.config import EngineConfig
    from fairgate.backends.local.engine.core import EngineCore
    from fairgate.backends.local.engine.factory import build_engine_parts
    from fairgate.backends.local.engine.output import OutputTracker
    from fairgate.backends.local.engine.types import SamplingParams
    from fairgate.scheduler.queue import FCFSQueue
    from fairgate.scheduler.request import SchedRequest

    config = EngineConfig(str(args.target), speculative="off", enable_prefix_caching=False,
                          max_num_seqs=64, max_num_batched_tokens=2048, num_kv_blocks=2400,
                          stats_interval_s=0)
    core = EngineCore(build_engine_parts(config, wait_queue=FCFSQueue()))
    n = args.continuation
    for i, p in enumerate(prompts):
        sampled = i % args.sampled_one_in == args.sampled_one_in - 1
        sampling = SamplingParams(max_tokens=n, temperature=args.temperature if sampled else 0.0,
                                  seed=args.seed + i if sampled else None, ignore_eos=True)
        rid = f"d{i}"
        core.add(SchedRequest(rid, list(p), n), OutputTracker(rid, sampling, len(p), n, frozenset(), None))
    outs: dict[str, list[int]] = {f"d{i}": [] for i in range(len(prompts))}
    done, started = 0, time.process_time()
    while core.has_unfinished:
        for out in core.step().outputs:
            outs[out.request_id] += out.token_ids
            if out.finished:
                done += 1
                if done % 256 == 0:
                    log(f"generated {done}/{len(prompts)} ({time.process_time() - started:.0f} s CPU)")
    return [outs[f"d{i}"] for i in range(len(prompts))]


@torch.inference_mode()
def teacher_labels(seqs: list[list[int]], args) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(top-k ids int16 [L, k], top-k log-probs float16 [L, k]) of the target at every position."""
    from transformers import LlamaForCausalLM

    target = LlamaForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    pad = int(target.config.pad_token_id)
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    labels: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(seqs)
    for b in range(0, len(order), args.label_batch):
        idx = order[b: b + args.label_batch]
        width = max(len(seqs[i]) for i in idx)
        # Right padding: a causal model's real positions never see the pads after them.
        ids = torch.tensor([seqs[i] + [pad] * (width - len(seqs[i])) for i in idx])
        logp = torch.log_softmax(target(input_ids=ids, use_cache=False).logits.float(), dim=-1)  # [B, W, V]
        top_lp, top_ids = logp.topk(args.top_k, dim=-1)  # [B, W, k]
        for row, i in enumerate(idx):
            n = len(seqs[i])
            labels[i] = (top_ids[row, :n].to(torch.int16), top_lp[row, :n].to(torch.float16))
    return [lab for lab in labels if lab is not None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("build/demo_model"))
    ap.add_argument("--target", type=Path, default=TARGET)
    ap.add_argument("--out", type=Path, default=None, help="default: WORK/distill.pt")
    ap.add_argument("--sequences", type=int, default=2304)
    ap.add_argument("--max-prompt", type=int, default=320)
    ap.add_argument("--continuation", type=int, default=96)
    ap.add_argument("--sampled-one-in", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--label-batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=4321)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    if not (args.work / "train.txt").exists():
        log(f"corpus: {build_corpus.build(args.work)}")
    held_text = (args.work / "heldout.txt").read_text(encoding="utf-8")
    shipped = args.target / "eval" / "heldout.txt"
    if shipped.exists() and shipped.read_text(encoding="utf-8") != held_text:
        log("warning: this machine's held-out split differs from the one shipped with the target")
        held_text += "\n\n" + shipped.read_text(encoding="utf-8")  # keep both out of the prompts
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(args.target / "tokenizer.json"))
    texts = passages((args.work / "train.txt").read_text(encoding="utf-8"), held_text, args.sequences, args.seed)
    prompts = [enc.ids[-args.max_prompt:] for enc in tok.encode_batch(texts)]
    log(f"{len(prompts)} prompts, {sum(map(len, prompts))} tokens; generating {args.continuation} tokens each")
    t0 = time.process_time()
    continuations = generate(prompts, args)
    gen_cpu = time.process_time() - t0
    seqs = [p + c for p, c in zip(prompts, continuations, strict=True)]
    log(f"generated in {gen_cpu:.0f} s CPU; scoring {sum(map(len, seqs))} tokens with the target")
    labels = teacher_labels(seqs, args)
    label_cpu = time.process_time() - t0 - gen_cpu
    out = args.out or args.work / "distill.pt"
    torch.save({
        "tokens": [torch.tensor(s, dtype=torch.int32) for s in seqs],
        "num_prompt": [len(p) for p in prompts],
        "top_ids": [lab[0] for lab in labels], "top_logprobs": [lab[1] for lab in labels],
        "args": {k: str(v) for k, v in vars(args).items()},
        "cpu_seconds": {"generate": gen_cpu, "label": label_cpu},
    }, out)
    log(f"wrote {out}: generate {gen_cpu:.0f} s, label {label_cpu:.0f} s CPU")


if __name__ == "__main__":
    main()
