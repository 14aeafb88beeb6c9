"""Distil the demo draft from the target's own outputs (data: distill_data.py).

    python -m tools.demo_model.distill_data        # the target's continuations and labels
    python -m tools.demo_model.distill             # train, save models/fairgate-demo-draft, measure

Sequence-level knowledge distillation: the draft is trained on the target's own continuations
of training passages (the text greedy speculative decoding will ask it to predict), at every
position against the target's labels: cross-entropy on the target's argmax (the token greedy
verification accepts) plus, weighted by --soft-weight, cross-entropy on the target's top-k
distribution renormalised (the soft labels). The draft's tied embedding starts as the target's
projected on its first principal directions (an SVD of the target's table), so the draft
begins in the target's token geometry; everything else starts at random (seeded).
Batches group sequences of similar length (right padding, masked); AdamW with warmup and
cosine decay to 10%, fp32, one torch thread. At the end: held-out perplexity, greedy
agreement with the target on held-out text (train.py's measure) and on the target's own
greedy continuations of held-out passages; the draft's card and the target's metrics.json
are rewritten (model_card.py).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import time
from pathlib import Path

import torch

from tools.demo_model import distill_eval, model_card, train
from tools.demo_model.tokenizer import PAD

ROOT = Path(__file__).resolve().parents[2]
DRAFT = dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=1)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def length_batches(lengths: list[int], batch: int, seed: int, epoch: int) -> list[list[int]]:
    """Sequences of similar length together (little padding), the batches in a seeded order."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups = [order[i: i + batch] for i in range(0, len(order), batch)]
    random.Random(seed * 1000 + epoch).shuffle(groups)
    return groups


def collate(data: dict, idx: list[int], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """ids [B, W], argmax labels [B, W] (-100 where none), top-k ids [B, W, k], top-k probs [B, W, k]."""
    width = max(len(data["tokens"][i]) for i in idx)
    k = data["top_ids"][0].shape[1]
    ids = torch.full((len(idx), width), pad, dtype=torch.int64)
    hard = torch.full((len(idx), width), -100, dtype=torch.int64)
    soft_ids = torch.zeros((len(idx), width, k), dtype=torch.int64)
    soft_p = torch.zeros((len(idx), width, k), dtype=torch.float32)
    for row, i in enumerate(idx):
        n = len(data["tokens"][i])
        ids[row, :n] = data["tokens"][i].long()
        top = data["top_ids"][i].long()  # [n, k]
        hard[row, :n] = top[:, 0]
        soft_ids[row, :n] = top
        soft_p[row, :n] = torch.softmax(data["top_logprobs"][i].float(), dim=-1)  # renormalised top-k
    return ids, hard, soft_ids, soft_p


def distill_loss(model, batch, soft_weight: float) -> tuple[torch.Tensor, float]:
    ids, hard, soft_ids, soft_p = batch
    logits = model(input_ids=ids).logits.float()  # [B, W, V]
    logp = torch.log_softmax(logits, dim=-1)
    mask = hard >= 0  # [B, W]
    hard_loss = torch.nn.functional.nll_loss(logp.flatten(0, 1), hard.flatten(), ignore_index=-100)
    soft = -(soft_p * logp.gather(-1, soft_ids)).sum(-1)  # [B, W]
    soft_loss = (soft * mask).sum() / mask.sum()
    with torch.no_grad():
        agree = float(((logits.argmax(-1) == hard) & mask).sum() / mask.sum())
    return hard_loss + soft_weight * soft_loss, agree


def init_embedding(draft, target) -> None:
    """The draft's tied table = the target's, on its first principal directions (scaled to the
    target's element spread)."""
    table = target.model.embed_tokens.weight.detach().float()  # [V, H_target]
    u, s, _ = torch.linalg.svd(table, full_matrices=False)
    width = draft.config.hidden_size
    proj = u[:, :width] * s[:width]  # [V, H_draft]
    proj *= table.std() / proj.std()
    with torch.no_grad():
        draft.model.embed_tokens.weight.copy_(proj)


def train_draft(draft, data: dict, args, pad: int, on_checkpoint) -> dict:
    opt = torch.optim.AdamW(draft.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    lengths = [len(t) for t in data["tokens"]]
    per_epoch = math.ceil(len(lengths) / args.batch)
    steps = args.epochs * per_epoch
    warmup = min(50, steps // 10)

    def lr_at(step: int) -> float:
        if step < warmup:
            return args.lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return args.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))

    draft.train()
    step, started, loss_avg, agree_avg, tokens = 0, time.process_time(), None, None, 0
    for epoch in range(args.epochs):
        for idx in length_batches(lengths, args.batch, args.seed, epoch):
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            batch = collate(data, idx, pad)
            loss, agree = distill_loss(draft, batch, args.soft_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
            opt.step()
            tokens += int((batch[1] >= 0).sum())
            loss_avg = loss.item() if loss_avg is None else 0.95 * loss_avg + 0.05 * loss.item()
            agree_avg = agree if agree_avg is None else 0.95 * agree_avg + 0.05 * agree
            step += 1
            if step % args.log_every == 0 or step == steps:
                cpu = time.process_time() - started
                log(f"step {step}/{steps} loss {loss_avg:.3f} train agreement {agree_avg:.3f} "
                    f"lr {lr_at(step - 1):.2e} {tokens / cpu:.0f} tok/s CPU")
            if step % args.save_every == 0 and step < steps:
                on_checkpoint(step)
    draft.eval()
    return {"steps": steps, "epochs": args.epochs, "train_tokens": tokens,
            "train_cpu_minutes": (time.process_time() - started) / 60}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("build/demo_model"))
    ap.add_argument("--data", type=Path, default=None, help="default: WORK/distill.pt")
    ap.add_argument("--target", type=Path, default=ROOT / "models" / "fairgate-demo")
    ap.add_argument("--draft-out", type=Path, default=ROOT / "models" / "fairgate-demo-draft")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--soft-weight", type=float, default=1.0)
    ap.add_argument("--save-every", type=int, default=100)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=2468)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    from tokenizers import Tokenizer
    from transformers import LlamaForCausalLM

    data = torch.load(args.data or args.work / "distill.pt")
    tok = Tokenizer.from_file(str(args.target / "tokenizer.json"))
    target = LlamaForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    ctx = int(target.config.max_position_embeddings)
    draft = train.make_model(DRAFT, tok.get_vocab_size(), ctx, tok, args.seed)
    init_embedding(draft, target)
    n_params = sum(p.numel() for p in draft.parameters())
    log(f"draft {DRAFT}: {n_params} parameters; {len(data['tokens'])} sequences")

    def save() -> None:
        train.save_folder(draft, tok, args.draft_out, ctx)
        # The pair must share the tokenizer byte for byte (the loader and the tests compare it).
        shutil.copyfile(args.target / "tokenizer.json", args.draft_out / "tokenizer.json")

    def checkpoint(step: int) -> None:
        save()
        log(f"checkpoint at step {step} saved to {args.draft_out}")

    run = train_draft(draft, data, args, tok.token_to_id(PAD), checkpoint)
    save()
    served = train.as_saved(draft)
    measured = distill_eval.measure(target, served, tok, args.target, ctx)
    data_cpu = data.get("cpu_seconds", {})
    info = {
        "method": "sequence-level KD on the target's continuations, argmax + top-k soft labels",
        "arch": DRAFT, "params": n_params, "sequences": len(data["tokens"]),
        "data_tokens": sum(len(t) for t in data["tokens"]), "data_args": data.get("args", {}),
        "data_cpu_minutes": sum(data_cpu.values()) / 60, **run, "batch": args.batch, "lr": args.lr,
        "soft_weight": args.soft_weight, "seed": args.seed, **measured,
    }
    log(json.dumps(info))
    model_card.record_distilled_draft(args.target, args.draft_out, info)
    log("done")


if __name__ == "__main__":
    main()
