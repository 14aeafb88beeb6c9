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
    TokenInfo,
    neighbour_features,
    own_features,
)

_FOLDER = Path(__file__).resolve().parents[1] / "data" / "name_tagger"


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
        self._own_rows: dict[tuple[str, ...], list[int]] = {}  # a word's own features -> table rows
        # a piece of `context_features` (a gap's mark, a neighbour at distance d) -> table rows
        self._context_rows: dict[tuple[object, ...], list[int]] = {}

    def scores(self, doc: Doc, tokens: list[int]) -> list[float]:
        """The probability that each of `tokens` is part of a person's name."""
        if not tokens:
            return []
        vocab = self.vocab
        rows: list[int] = []
        starts: list[int] = []
        cache = self._own_rows
        if len(cache) > 1 << 16:
            cache.clear()
        for i in tokens:
            starts.append(len(rows))
            own = own_features(doc, i)
            own_rows = cache.get(own)
            if own_rows is None:
                own_rows = cache[own] = [r for r in map(vocab.get, own) if r is not None]
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
        """The table rows of `features.context_features(doc, i)`, in its order, from cached
        pieces (a gap's mark, a neighbour's features): building every feature string of every
        candidate cost more than the numpy pass."""
        cache = self._context_rows
        if len(cache) > 1 << 16:
            cache.clear()
        n, mode = len(doc.spans), doc.mode(i)[0]
        keys: list[tuple[object, ...]] = [("gap", doc.gap(i)), ("gapn", doc.gap(i + 1) if i + 1 < n else "$")]
        keys += [(d, mode, doc.info(i + d)) if 0 <= i + d < n else (d,) for d in (-2, -1, 1, 2)]
        out: list[int] = []
        for key in keys:
            got = cache.get(key)
            if got is None:
                got = cache[key] = [r for r in map(self.vocab.get, _context_piece(key)) if r is not None]
            out += got
        return out


def _context_piece(key: tuple[object, ...]) -> list[str]:
    """The feature strings of one piece of `context_features` (see `NameTagger.context_rows`)."""
    if key[0] in ("gap", "gapn"):
        return [f"{key[0]}:{key[1]}"]
    if len(key) == 1:
        return [f"c{key[0]}:<none>"]
    d, mode, info = key
    assert isinstance(d, int) and isinstance(mode, str) and isinstance(info, TokenInfo)
    return neighbour_features(d, mode, info)


@lru_cache(maxsize=1)
def default_tagger() -> NameTagger:
    return NameTagger()
