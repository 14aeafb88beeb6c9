"""Recall and precision of the sensitivity detectors on a seeded, generated labelled set.

Positives: valid TCKNs, TR IBANs, phones, cards and e-mails in many written forms (spaced,
dashed, full-width and Arabic-Indic digits, split across chat messages) inside Turkish and
English sentences. Hard negatives: bad-checksum TCKNs and IBANs, order numbers, dates, amounts,
IP addresses, Luhn-invalid card-shaped numbers. Prints a table, then one JSON line.

    python bench/sensitivity_quality.py [--n 5000] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.pii_corpus import make_corpus  # noqa: E402
from tests.helpers.pii_quality import score  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000, help="samples (1-3 sentences each)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    scores = score(make_corpus(args.seed, args.n))
    print(f"{'kind':<8}{'labelled':>10}{'found':>8}{'findings':>10}{'recall':>9}{'precision':>11}")
    for kind, s in scores.items():
        print(f"{kind:<8}{s.labelled:>10}{s.found:>8}{s.findings:>10}{s.recall:>9.4f}{s.precision:>11.4f}")
    total = scores["all"]
    print(json.dumps({
        "bench": "sensitivity_quality", "samples": args.n, "seed": args.seed,
        "recall": round(total.recall, 4), "precision": round(total.precision, 4),
        "per_kind": {k: {"recall": round(s.recall, 4), "precision": round(s.precision, 4)}
                     for k, s in scores.items() if k != "all"},
        "ok": total.recall >= 0.99 and total.precision >= 0.97,
    }))


if __name__ == "__main__":
    main()
