"""Train the person-name tagger and write it where `policies/detection/persons/tagger.py` loads it.

Model: each candidate token's sparse features (`policies.detection.persons.features.token_features`)
index rows of one embedding table that are summed (an embedding bag, i.e. a sparse linear
layer), then ReLU and one output unit: P(token is part of a person's name). Trained with torch
(training only; inference is numpy), Adam, binary cross-entropy, on synthesised samples
(`synth.py`). Writes `policies/detection/data/name_tagger/{features.txt,weights.npz}` (float16).

    python -m tools.name_tagger.train [--samples 60000] [--epochs 3] [--dim 32]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import time
from pathlib import Path

import numpy as np
import torch

from fairgate.policies.detection.persons.features import Doc, candidates, token_features
from tools.name_tagger.synth import Pools, sample

OUT = Path(__file__).resolve().parents[2] / "policies" / "detection" / "data" / "name_tagger"


def examples(n: int, seed: int) -> tuple[list[list[str]], list[int]]:
    """(features, label) of every candidate token of `n` synthesised samples."""
    pools = Pools(random.Random(seed))
    feats: list[list[str]] = []
    labels: list[int] = []
    for _ in range(n):
        text, spans = sample(pools)
        doc = Doc.of(text)
        for i in candidates(doc):
            s, e = doc.spans[i]
            feats.append(token_features(doc, i))
            labels.append(int(any(s < pe and ps < e for ps, pe in spans)))
    return feats, labels


def encode(feats: list[list[str]], vocab: dict[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
    idx: list[int] = []
    offsets: list[int] = []
    for f in feats:
        offsets.append(len(idx))
        idx += [vocab[x] for x in f if x in vocab]
    return torch.tensor(idx), torch.tensor(offsets)


class Tagger(torch.nn.Module):
    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.bag = torch.nn.EmbeddingBag(vocab, dim, mode="sum")
        torch.nn.init.normal_(self.bag.weight, std=0.05)
        self.bias = torch.nn.Parameter(torch.zeros(dim))
        self.out = torch.nn.Linear(dim, 1)

    def forward(self, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bag(idx, offsets) + self.bias)  # [tokens, dim]
        return self.out(h).squeeze(-1)  # [tokens]


def train(args: argparse.Namespace) -> dict[str, float]:
    torch.manual_seed(args.seed)
    feats, labels = examples(args.samples, args.seed)
    counts = collections.Counter(x for f in feats for x in f)
    vocab = {x: i for i, (x, c) in enumerate(counts.most_common(args.max_features)) if c >= args.min_count}
    print(f"{len(feats)} tokens, {sum(labels)} name tokens, {len(vocab)} features")
    model = Tagger(len(vocab), args.dim)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    y_all = torch.tensor(labels, dtype=torch.float32)
    order = list(range(len(feats)))
    for epoch in range(args.epochs):
        random.Random(epoch).shuffle(order)
        total, t0 = 0.0, time.time()
        for b in range(0, len(order), args.batch):
            batch = order[b : b + args.batch]
            idx, off = encode([feats[i] for i in batch], vocab)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(idx, off), y_all[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(batch)
        print(f"epoch {epoch}: loss {total / len(order):.4f} ({time.time() - t0:.0f} s)")
    return export(model, vocab, held_out(model, vocab, args))


def held_out(model: Tagger, vocab: dict[str, int], args: argparse.Namespace) -> dict[str, float]:
    """Token precision and recall on fresh synthesised samples (another seed)."""
    feats, labels = examples(args.samples // 10, args.seed + 1)
    with torch.no_grad():
        p = torch.sigmoid(model(*encode(feats, vocab))) >= 0.5
    y = torch.tensor(labels, dtype=torch.bool)
    tp = int((p & y).sum())
    return {"synthetic_token_precision": round(tp / max(1, int(p.sum())), 4),
            "synthetic_token_recall": round(tp / max(1, int(y.sum())), 4)}


def export(model: Tagger, vocab: dict[str, int], scores: dict[str, float]) -> dict[str, float]:
    OUT.mkdir(parents=True, exist_ok=True)
    names = sorted(vocab, key=vocab.__getitem__)
    (OUT / "features.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    np.savez_compressed(OUT / "weights.npz",
                        table=model.bag.weight.detach().numpy().astype(np.float16),
                        bias=model.bias.detach().numpy().astype(np.float32),
                        out_w=model.out.weight.detach().numpy()[0].astype(np.float32),
                        out_b=model.out.bias.detach().numpy().astype(np.float32))
    print(json.dumps(scores))
    return scores


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=60000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--min-count", type=int, default=3)
    ap.add_argument("--max-features", type=int, default=40000)
    ap.add_argument("--seed", type=int, default=0)
    train(ap.parse_args())


if __name__ == "__main__":
    main()
