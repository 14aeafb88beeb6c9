"""Recall and precision of the sensitivity detectors on a seeded, generated labelled set.

The set (`tests.helpers.pii_corpus_kvkk.make_full_corpus`) has every detector kind: TCKNs,
IBANs, phones, cards and e-mails in plain and evasive layouts (invisible characters and odd
separators between groups, 4-4-3 / 5-6 / one-digit groupings, superscript and mathematical
digits, bare mobiles, mixed card separators, IBANs across lines, obfuscated e-mails, base64 /
hex / URL / HTML-entity encodings, Turkish number words, TCKNs split across turns), tax
numbers, passports, plates, birth dates, names with addresses, and KVKK special categories tied
to a person; and hard negatives (order and invoice numbers, bad-checksum numbers in odd
layouts, versions, amounts, dates, IBAN-validating code, street names and public figures,
general health and religion questions). Recall is also measured per listed layout.

Thresholds: structured identifiers recall >= 0.99 (and in every layout), names with
addresses, special categories and other identifiers >= 0.95, precision >= 0.97 for every kind.
The generated sets do not label person names, so `person_name` findings are left out of
their precision (they are scored on the realistic set instead).

Realistic set (`bench/kvkk_real.py`): the hand-written rows of `--real-dir` (default
`bench/data/kvkk_real`), part `--part dev` (tuning), any other part file's name (`dev2`), several
joined with '+' (`dev+dev2`), or `test` (read only when asked: scored once, at the end); recall
and precision per kind, genre, style and group, and per row.
Peers (`bench/kvkk_peers.py`): other offline Turkish PII detectors, each in its own venv, in the
same run; skipped with the reason when absent.
Prints tables, then one JSON line.

    python bench/sensitivity_quality.py [--n 5000] [--seed 1] [--part dev] [--real-dir DIR] [--peers]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from bench.kvkk_peers import run_peers  # noqa: E402
from bench.kvkk_real import load, score_rows  # noqa: E402
from fairgate.policies.sensitivity import classify  # noqa: E402
from tests.helpers.pii_corpus_kvkk import NEW_KINDS, make_full_corpus  # noqa: E402
from tests.helpers.pii_layouts import LAYOUTS, evasive  # noqa: E402
from tests.helpers.pii_quality import score  # noqa: E402

STRUCTURED = ("tckn", "iban", "phone", "card", "email")


def layout_recall(seed: int, per_layout: int) -> dict[str, float]:
    """Recall of each structured kind in each of its listed layouts."""
    r = random.Random(seed)
    out: dict[str, float] = {}
    for kind, layouts in LAYOUTS.items():
        for layout in layouts:
            found = 0
            for _ in range(per_layout):
                value, _ = evasive(r, kind, layout)
                text = f"Bilgi: {value} tamam."
                found += any(f.kind == kind and f.start < 7 + len(value) and 7 < f.end
                             for f in classify(text).findings)
            out[f"{kind}/{layout}"] = found / per_layout
    return out


def ours(text: str) -> list[tuple[str, int, int]]:
    return [(f.kind, f.start, f.end) for f in classify(text).findings]


def realistic(args: argparse.Namespace) -> dict:
    """Scores on the realistic set's part (ours, then each peer), or the reason it was skipped."""
    paths = [Path(args.real_dir) / f"{part}.jsonl" for part in args.part.split("+")]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        return {"skipped": f"{', '.join(missing)} not found"}
    rows = [row for path in paths for row in load(path)]
    out = {"part": args.part, "rows": len(rows), "fairgate": score_rows(rows, ours)}
    if args.peers:
        out["peers"] = run_peers(rows)
    for name in ("fairgate", *out.get("peers", {})):
        res = out["fairgate"] if name == "fairgate" else out["peers"][name]
        if "skipped" in res:
            print(f"{name}: skipped ({res['skipped']})")
            continue
        print(f"--- {name} on {args.part} ({len(rows)} rows)")
        for table in ("group", "rows", "kind", "style", "genre"):
            for key, t in res.get(table, {}).items():
                print(f"{table + ':' + key:<34}{t['labelled']:>6}{t['recall']:>9.4f}{t['findings']:>7}{t['precision']:>10.4f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000, help="samples (1-3 sentences each)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-layout", type=int, default=200)
    ap.add_argument("--part", default="dev",
                    help="the part file(s) under --real-dir, '+'-joined: dev, dev2, dev+dev2, test (scored once)")
    ap.add_argument("--real-dir", default=str(Path(__file__).resolve().parent / "data" / "kvkk_real"))
    ap.add_argument("--peers", action="store_true", help="also run the peer detectors found in their venvs")
    ap.add_argument("--no-generated", action="store_true", help="only the realistic set")
    args = ap.parse_args()
    real = realistic(args)
    if args.no_generated:
        print(json.dumps({"bench": "sensitivity_quality", "realistic": real}))
        return
    scores = score(make_full_corpus(args.seed, args.n), ignore=("person_name",))
    layouts = layout_recall(args.seed, args.per_layout)
    print(f"{'kind':<16}{'labelled':>10}{'found':>8}{'findings':>10}{'recall':>9}{'precision':>11}{'target':>8}")
    ok = True
    for kind in (*STRUCTURED, *NEW_KINDS, "all"):
        s = scores[kind]
        target = 0.99 if kind in STRUCTURED or kind == "all" else 0.95
        ok &= s.recall >= target and s.precision >= 0.97
        print(f"{kind:<16}{s.labelled:>10}{s.found:>8}{s.findings:>10}{s.recall:>9.4f}{s.precision:>11.4f}{target:>8.2f}")
    print(f"{'layout':<34}{'recall':>9}")
    for name, rec in layouts.items():
        ok &= rec >= 0.99
        print(f"{name:<34}{rec:>9.4f}")
    total = scores["all"]
    print(json.dumps({
        "bench": "sensitivity_quality", "samples": args.n, "seed": args.seed,
        "recall": round(total.recall, 4), "precision": round(total.precision, 4),
        "per_kind": {k: {"labelled": s.labelled, "recall": round(s.recall, 4), "precision": round(s.precision, 4)}
                     for k, s in scores.items() if k != "all"},
        "per_layout_recall": {k: round(v, 4) for k, v in layouts.items()},
        "min_layout_recall": round(min(layouts.values()), 4),
        "realistic": real,
        "ok": bool(ok),
    }))


if __name__ == "__main__":
    main()
