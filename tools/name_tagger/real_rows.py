"""Training tokens from the hand-labelled realistic set (`bench/data/kvkk_real/<part>.jsonl`).

Every candidate token of a row (`features.candidates` of `Doc.of(text)`) is labelled 1 when it
overlaps a labelled person_name span, else 0. A span is given by its text (and `occurrence`);
the set labels a repeated name once, so every occurrence of the span's text counts as the name
(as `bench/kvkk_real.py` scores a finding there correct). Only the parts named are read: a
blind part must never be passed here.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.kvkk_real import locate
from fairgate.policies.detection.persons.features import Doc, candidates, token_features

REAL_DIR = Path(__file__).resolve().parents[2] / "bench" / "data" / "kvkk_real"


def load_parts(parts: list[str], folder: Path = REAL_DIR) -> list[dict]:
    """The rows of the named parts (`["dev", "test2"]`), in order."""
    rows: list[dict] = []
    for part in parts:
        lines = (folder / f"{part}.jsonl").read_text(encoding="utf-8").splitlines()
        rows += [json.loads(line) for line in lines if line.strip()]
    return rows


def name_spots(row: dict) -> list[tuple[int, int]]:
    """(start, end) of every occurrence of every labelled person_name span's text, located as the
    scorer locates them (`bench/kvkk_real.locate`)."""
    return [spot for span in row["spans"] if span["kind"] == "person_name" for spot in locate(row["text"], span)]


def row_examples(rows: list[dict]) -> tuple[list[list[str]], list[int]]:
    """(features, label) of every candidate token of `rows`."""
    feats: list[list[str]] = []
    labels: list[int] = []
    for row in rows:
        doc, spots = Doc.of(row["text"]), name_spots(row)
        for i in candidates(doc):
            s, e = doc.spans[i]
            feats.append(token_features(doc, i))
            labels.append(int(any(s < pe and ps < e for ps, pe in spots)))
    return feats, labels
