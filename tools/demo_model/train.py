"""Train fairgate's demo model pair on one CPU core: a small Llama target and a tiny draft.

    python -m tools.demo_model.train --probe          # tokens/s of each model, then exit
    nohup python -m tools.demo_model.train &     # defaults: 400 draft + 800 target steps
    python -m tools.demo_model.model_card --samples   # add greedy samples to the model card

Steps: build the corpus (build_corpus.py), train a byte-level BPE (tokenizer.py), train the
draft, then the target, saving the target every --save-every steps so a usable model exists
even if the run is cut short; finally measure held-out perplexity of both, a unigram baseline
and draft/target greedy agreement, and write both folders with their model cards.
Everything is seeded: the same corpus and arguments give the same weights.
The committed draft is not this one: distill_data.py and distill.py distil a better one from
the target's own outputs (its card says how).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # tokenizers: stay on one core too

import numpy as np
import torch

from tools.demo_model import build_corpus, model_card
from tools.demo_model.tokenizer import BOS, EOS, PAD, train_tokenizer, write_tokenizer_files

TARGET = dict(hidden_size=256, intermediate_size=640, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2)
DRAFT = dict(hidden_size=96, intermediate_size=256, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=1)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def encode_split(tok, text: str) -> np.ndarray:
    """Each document becomes BOS doc EOS; documents are concatenated into one stream."""
    docs = text.split(build_corpus.SEP)
    eos = tok.token_to_id(EOS)
    ids: list[int] = []
    for enc in tok.encode_batch(docs):
        ids.extend(enc.ids)  # the post-processor already put BOS in front
        ids.append(eos)
    return np.asarray(ids, dtype=np.int32)


def make_model(arch: dict, vocab_size: int, ctx: int, tok, seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, max_position_embeddings=ctx, rms_norm_eps=1e-5,
        rope_theta=10000.0, tie_word_embeddings=True, attention_bias=False,
        bos_token_id=tok.token_to_id(BOS), eos_token_id=tok.token_to_id(EOS),
        pad_token_id=tok.token_to_id(PAD), **arch,
    )
    return LlamaForCausalLM(config).float()


def batches(data: np.ndarray, batch: int, ctx: int, seed: int):
    """Endless random windows of ctx+1 tokens: input is [:-1], label [1:]."""
    g = np.random.default_rng(seed)
    while True:
        starts = g.integers(0, len(data) - ctx - 1, size=batch)
        yield torch.from_numpy(np.stack([data[s: s + ctx + 1] for s in starts]).astype(np.int64))


@torch.no_grad()
def heldout_logits(model, data: np.ndarray, ctx: int, max_tokens: int | None = None):
    """Yield (logits [ctx, vocab], labels [ctx]) over non-overlapping held-out windows."""
    model.eval()
    n = len(data) if max_tokens is None else min(len(data), max_tokens)
    for s in range(0, n - 1, ctx):
        window = torch.from_numpy(data[s: min(s + ctx + 1, n)].astype(np.int64))
        if len(window) < 2:
            break
        logits = model(window[None, :-1]).logits[0].float()
        yield logits, window[1:]
    model.train()


def perplexity(model, data: np.ndarray, ctx: int, max_tokens: int | None = None) -> float:
    nll, count = 0.0, 0
    for logits, labels in heldout_logits(model, data, ctx, max_tokens):
        nll += torch.nn.functional.cross_entropy(logits, labels, reduction="sum").item()
        count += len(labels)
    return math.exp(nll / count)


def unigram_perplexity(train: np.ndarray, held: np.ndarray, vocab_size: int) -> float:
    """Add-one smoothed token frequencies from the training split, scored on held-out."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(math.exp(-logp[held[1:]].mean()))


@torch.no_grad()
def greedy_agreement(target, draft, data: np.ndarray, ctx: int, max_tokens: int) -> float:
    agree, total = 0, 0
    for (t_logits, _), (d_logits, _) in zip(heldout_logits(target, data, ctx, max_tokens),
                                            heldout_logits(draft, data, ctx, max_tokens), strict=True):
        agree += int((t_logits.argmax(-1) == d_logits.argmax(-1)).sum())
        total += t_logits.shape[0]
    return agree / total


def as_saved(model):
    """The weights as they will be served: rounded to bfloat16, computed in float32."""
    return copy.deepcopy(model).to(torch.bfloat16).float().eval()


def save_folder(model, tok, folder: Path, ctx: int) -> None:
    from transformers import GenerationConfig

    folder.mkdir(parents=True, exist_ok=True)
    # bfloat16 halves the size; both folders together stay well under the 25 MB budget.
    saved = copy.deepcopy(model).to(torch.bfloat16)
    saved.generation_config = GenerationConfig(
        bos_token_id=tok.token_to_id(BOS), eos_token_id=tok.token_to_id(EOS),
        pad_token_id=tok.token_to_id(PAD), do_sample=False,
    )
    saved.save_pretrained(folder, safe_serialization=True)
    write_tokenizer_files(tok, folder, model_max_length=ctx)


def train_model(name: str, model, data: np.ndarray, args, steps: int, lr: float,
                data_seed: int, on_checkpoint=None) -> float:
    """AdamW with linear warmup and cosine decay to 10%; returns tokens/s."""
    torch.manual_seed(args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = min(100, steps // 10)

    def lr_at(step: int) -> float:
        if step < warmup:
            return lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))

    model.train()
    started, loss_avg = time.time(), None
    stream = batches(data, args.batch, args.ctx, data_seed)
    stop_after = min(steps, getattr(args, "stop_after", None) or steps)
    for step, xy in zip(range(stop_after), stream, strict=False):
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = _loss(model, xy)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_avg = loss.item() if loss_avg is None else 0.98 * loss_avg + 0.02 * loss.item()
        if (step + 1) % args.log_every == 0 or step + 1 == steps:
            tps = (step + 1) * args.batch * args.ctx / (time.time() - started)
            log(f"{name} step {step + 1}/{steps} loss {loss_avg:.3f} lr {lr_at(step):.2e} tok/s {tps:.0f}")
        if on_checkpoint and (step + 1) % args.save_every == 0 and step + 1 < steps:
            on_checkpoint(step + 1)
    return steps * args.batch * args.ctx / (time.time() - started)


def _loss(model, xy: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=xy[:, :-1]).logits  # [batch, ctx, vocab]
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), xy[:, 1:].flatten())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("build/demo_model"))
    ap.add_argument("--target-out", type=Path, default=Path("models/fairgate-demo"))
    ap.add_argument("--draft-out", type=Path, default=Path("models/fairgate-demo-draft"))
    ap.add_argument("--vocab-size", type=int, default=6144)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--target-steps", type=int, default=800)
    ap.add_argument("--draft-steps", type=int, default=400)
    ap.add_argument("--target-lr", type=float, default=2e-3)
    ap.add_argument("--draft-lr", type=float, default=3e-3)
    ap.add_argument("--save-every", type=int, default=200)
    ap.add_argument("--stop-after", type=int, default=None,
                    help="end the target early at this step, keeping the --target-steps schedule")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--probe", action="store_true", help="measure tokens/s for ~20 steps each")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    if not (args.work / "train.txt").exists():
        log(f"corpus: {build_corpus.build(args.work)}")
    train_text = (args.work / "train.txt").read_text(encoding="utf-8")
    held_text = (args.work / "heldout.txt").read_text(encoding="utf-8")
    tok_path = args.work / f"tokenizer-{args.vocab_size}.json"
    if tok_path.exists():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tok_path))
    else:
        tok = train_tokenizer(train_text, args.vocab_size)
        tok.save(str(tok_path))
    train_ids, held_ids = encode_split(tok, train_text), encode_split(tok, held_text)
    vocab = tok.get_vocab_size()
    unigram = unigram_perplexity(train_ids, held_ids, vocab)
    log(f"tokens: train {len(train_ids)}, held-out {len(held_ids)}; vocab {vocab}; unigram ppl {unigram:.1f}")

    target = make_model(TARGET, vocab, args.ctx, tok, args.seed)
    draft = make_model(DRAFT, vocab, args.ctx, tok, args.seed + 1)
    n_target = sum(p.numel() for p in target.parameters())
    n_draft = sum(p.numel() for p in draft.parameters())
    log(f"params: target {n_target}, draft {n_draft}")
    if args.probe:
        args.log_every = 10
        for name, model in (("draft", draft), ("target", target)):
            tps = train_model(name, model, train_ids, args, 20, 1e-3, args.seed)
            log(f"probe {name}: {tps:.0f} tokens/s")
        return

    metrics: dict = {"unigram_ppl": unigram, "vocab_size": vocab, "ctx": args.ctx, "seed": args.seed,
                     "train_tokens_corpus": int(len(train_ids)), "heldout_tokens": int(len(held_ids)),
                     "corpus": json.loads((args.work / "stats.json").read_text())
                     if (args.work / "stats.json").exists() else {}}
    t0 = time.time()
    train_model("draft", draft, train_ids, args, args.draft_steps, args.draft_lr, args.seed + 1)
    save_folder(draft, tok, args.draft_out, args.ctx)
    draft_ppl = perplexity(as_saved(draft), held_ids, args.ctx)
    log(f"draft saved; held-out ppl {draft_ppl:.2f} (unigram {unigram:.1f})")

    def checkpoint(step: int) -> None:
        save_folder(target, tok, args.target_out, args.ctx)
        ppl = perplexity(as_saved(target), held_ids, args.ctx, max_tokens=16384)
        log(f"target checkpoint at step {step}: held-out ppl (first 16k tokens) {ppl:.2f}")

    train_model("target", target, train_ids, args, args.target_steps, args.target_lr, args.seed + 2,
                checkpoint)
    save_folder(target, tok, args.target_out, args.ctx)
    served_target, served_draft = as_saved(target), as_saved(draft)
    metrics.update(
        target_params=n_target, draft_params=n_draft,
        target_train_tokens=args.target_steps * args.batch * args.ctx,
        draft_train_tokens=args.draft_steps * args.batch * args.ctx,
        target_ppl=perplexity(served_target, held_ids, args.ctx),
        draft_ppl=draft_ppl,
        greedy_agreement=greedy_agreement(served_target, served_draft, held_ids, args.ctx, 65536),
        train_minutes=(time.time() - t0) / 60,
        target_arch=TARGET, draft_arch=DRAFT, target_steps=args.target_steps,
        draft_steps=args.draft_steps, batch=args.batch, target_lr=args.target_lr,
        draft_lr=args.draft_lr, agreement_tokens=min(65536, len(held_ids)),
    )
    log(json.dumps(metrics))
    eval_dir = args.target_out / "eval"
    eval_dir.mkdir(exist_ok=True)
    # The held-out split travels with the model, so `fairgate eval` finds it by itself.
    (eval_dir / "heldout.txt").write_text(held_text, encoding="utf-8")
    model_card.write_cards(args.target_out, args.draft_out, metrics)
    (eval_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    log("done")


if __name__ == "__main__":
    main()
