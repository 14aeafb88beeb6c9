"""The learned person-name tagger, run in numpy (trained by `tools/name_tagger/train.py`).

Each token's feature strings (`features.token_features`) index rows of one table that are
summed (a sparse linear layer), then ReLU and one output unit: P(token belongs to a person's
name). Unknown features are skipped. Weights: `data/name_tagger/` (model card:
`models/name-tagger/README.md`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np

from fairgate.policies.detection.persons.features import (
    Doc,
    neighbour_features,
    own_features,
)

_FOLDER = Path(__file__).resolve().parents[1] / "data" / "name_tagger"
_NEAR = (-2, -1, 1, 2)  # the neighbours `features.context_features` reads


class NameTagger:
    """P(name) for tokens of a `Doc`; one vectorised pass per call."""

    def __init__(self, folder: Path = _FOLDER) -> None:
        names = (folder / "features.txt").read_text(encoding="utf-8").split("\n")
        self.vocab = {name: i for i, name in enumerate(names) if name}
        with np.load(folder / "weights.npz") as w:
            self.table = w["table"].astype(np.float32)  # [features, dim]
            self.bias = w["bias"]  # [dim]
            self.out_w = w["out_w"]  # [dim]
            self.out_b = float(w["out_b"][0])
        self._own_rows: dict[tuple[str, ...], list[int]] = {}  # a word's details and line casing -> table rows
        # a neighbour's details and distance -> the table rows of its `context_features`
        self._context_rows: dict[tuple[int | str, ...], list[int]] = {}
        # a gap's mark ("n" + mark for the gap after the token) -> its feature's table row, if any
        self._gap_rows: dict[str, list[int]] = {}
        self._none_rows = {d: [r] if (r := self.vocab.get(f"c{d}:<none>")) is not None else [] for d in _NEAR}

    def scores(self, doc: Doc, tokens: list[int]) -> list[float]:
        """The probability that each of `tokens` is part of a person's name."""
        if not tokens:
            return []
        vocab, infos, modes = self.vocab, doc.infos(), doc.modes()
        rows: list[int] = []
        starts: list[int] = []
        cache = self._own_rows
        if len(cache) > 1 << 16:
            cache.clear()
        for i in tokens:
            starts.append(len(rows))
            t = infos[i]
            key = (t.key, t.suffix, t.shape, t.flags, modes[i][0])  # what `own_features` reads
            own_rows = cache.get(key)
            if own_rows is None:
                own_rows = cache[key] = [r for r in map(vocab.get, own_features(doc, i)) if r is not None]
            rows += own_rows
            rows += self.context_rows(doc, i)
        hidden = np.add.reduceat(self.table.take(rows, axis=0), starts, axis=0)  # [tokens, dim]
        hidden += self.bias
        np.maximum(hidden, 0.0, out=hidden)
        out_b = self.out_b
        # the sigmoid in Python: a prompt has a handful of candidates, where each numpy call
        # costs more than the math (a 512-token chunk: ~50 µs against ~4 ms of features)
        return [1.0 / (1.0 + math.exp(min(700.0, -(x + out_b)))) for x in (hidden @ self.out_w).tolist()]


    def context_rows(self, doc: Doc, i: int) -> list[int]:
        """The table rows of `features.context_features(doc, i)`, in its order: a neighbour's
        rows cached by its details and distance (building every feature string of every
        candidate cost more than the numpy pass)."""
        cache, vocab, gaps = self._context_rows, self.vocab, self._gap_rows
        if len(cache) > 1 << 16:
            cache.clear()
        n, mode, infos = len(doc.spans), doc.mode(i)[0], doc.infos()
        mark = doc.gap(i)
        out = gaps.get(mark)  # (a dict lookup per gap, not a feature string and a vocabulary lookup)
        if out is None:
            out = gaps[mark] = [r for r in (vocab.get(f"gap:{mark}"),) if r is not None]
        mark = "n" + (doc.gap(i + 1) if i + 1 < n else "$")
        got = gaps.get(mark)
        if got is None:
            got = gaps[mark] = [r for r in (vocab.get(f"gapn:{mark[1:]}"),) if r is not None]
        out = out + got
        for d in _NEAR:
            if not 0 <= i + d < n:
                out += self._none_rows[d]
                continue
            t = infos[i + d]
            key = (d, mode, t.key, t.suffix, t.shape, t.flags)  # (strings hash in C; a dataclass in Python)
            got = cache.get(key)
            if got is None:
                got = cache[key] = [r for r in map(vocab.get, neighbour_features(d, mode, t)) if r is not None]
            out += got
        return out


@lru_cache(maxsize=1)
def default_tagger() -> NameTagger:
    return NameTagger()
