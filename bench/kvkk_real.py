"""Scoring on the hand-written realistic KVKK set (`bench/data/kvkk_real/{dev,test}.jsonl`).

Each row: {"id", "genre", "style", "text", "spans": [{"kind", "text", "occurrence"?}],
"sensitive"}. A labelled span is found when a finding of its kind overlaps it; a finding is
correct when it overlaps a labelled span of its kind (at any occurrence of that span's text:
the set labels a repeated name once). Rows count too: a row is flagged when it has any
finding, and should be exactly when it is labelled sensitive. Scores are kept per kind, per
genre, per style and per group (structured identifiers vs. people and special categories).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from tests.helpers.pii_quality import KindScore

STRUCTURED = frozenset({"tckn", "iban", "phone", "card", "email", "vkn", "passport", "plate", "sgk"})
Findings = list[tuple[str, int, int]]


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def locate(text: str, span: dict) -> list[tuple[int, int]]:
    """Every occurrence of the span's text; the labelled one first."""
    needle, spots, pos = span["text"], [], text.find(span["text"])
    while pos != -1:
        spots.append((pos, pos + len(needle)))
        pos = text.find(needle, pos + 1)
    k = span.get("occurrence", 1) - 1
    return spots[k : k + 1] + spots[:k] + spots[k + 1 :]


def _keys(row: dict, kind: str) -> tuple[tuple[str, str], ...]:
    """The tallies one span or finding counts in."""
    return (("kind", kind), ("genre", row["genre"]), ("style", row["style"]),
            ("group", "structured" if kind in STRUCTURED else "soft"), ("group", "all"))


def score_rows(rows: list[dict], detect: Callable[[str], Findings]) -> dict[str, dict]:
    """Tallies per kind / genre / style / group, plus row-level tallies ("rows")."""
    tallies: dict[str, dict[str, KindScore]] = defaultdict(lambda: defaultdict(KindScore))
    for row in rows:
        text, found = row["text"], detect(row["text"])
        gold = [(s["kind"], locate(text, s)) for s in row["spans"]]
        for kind, spots in gold:
            hit = any(k == kind and s < spots[0][1] and spots[0][0] < e for k, s, e in found)
            for table, key in _keys(row, kind):
                tallies[table][key].labelled += 1
                tallies[table][key].found += hit
        for kind, s, e in found:
            ok = any(k == kind and any(a < e and s < b for a, b in spots) for k, spots in gold)
            for table, key in _keys(row, kind):
                tallies[table][key].findings += 1
                tallies[table][key].correct += ok
        rows_t = tallies["rows"]["all"]
        rows_t.labelled += row["sensitive"]
        rows_t.found += row["sensitive"] and bool(found)
        rows_t.findings += bool(found)
        rows_t.correct += bool(found) and row["sensitive"]
    return {table: {k: t.as_dict() for k, t in sorted(v.items())} for table, v in tallies.items()}
