"""How fast `policies.sensitivity.classify` runs: microseconds per KB of prompt text.

Texts: clean Turkish and English prose (no PII); "dirty" prose with one item of personal data
(plus one hard negative) per KB; a stress case with four per KB; a numbers-heavy table; and a
chat of 1 KB messages with one item each. CPU time, best of N; a calibration loop
(`sum(range(1000))`, ~10 µs on an idle modern core) is printed to judge how loaded the shared
machine was.
Prints a table, then one JSON line. Target: <= 50 µs per KB on this machine.

    python bench/sensitivity_speed.py [--kb 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policies.sensitivity import classify, classify_parts  # noqa: E402
from tests.helpers.pii_corpus import make_negative, make_positive  # noqa: E402

PROSE = [
    "Geçen haftaki toplantıda ürün yol haritasını ve üçüncü çeyrek hedeflerini konuştuk.",
    "Müşteri destek ekibi, iade süreçlerinin hızlandırılması gerektiğini belirtti.",
    "Please summarise the attached quarterly report and list the three biggest risks.",
    "Yeni sürümde önbellek isabet oranı yüzde on iki arttı; gecikme ise belirgin şekilde düştü.",
    "The migration to the new cluster is planned for next Tuesday, after the freeze ends.",
    "Lütfen aşağıdaki metni resmi bir dille yeniden yaz ve yazım hatalarını düzelt.",
    "Şirketin 2024 yılı gelirleri 12,5 milyon TL olarak gerçekleşti ve hedefin üzerinde kaldı.",
    "Can you explain why the p99 latency doubled when we enabled chunked prefill?",
]


def make_text(r: random.Random, kb: int, pii_per_kb: float) -> str:
    """Prose with about `pii_per_kb` items of personal data (each with a hard negative) per KB."""
    parts: list[str] = []
    size = 0
    p = pii_per_kb * 95 / 1024  # sentences average ~95 bytes
    while size < kb * 1024:
        s = r.choice(PROSE)
        if r.random() < p:
            kind = r.choice(["tckn", "iban", "phone", "card", "email"])
            s += f" Bilgi: {make_positive(r, kind)}; ref {make_negative(r)}."
        parts.append(s)
        size += len(s.encode())
    return " ".join(parts)


def make_table(r: random.Random, kb: int) -> str:
    rows: list[str] = []
    size = 0
    while size < kb * 1024:
        row = (f"| {r.randint(1, 99999):05d} | {r.randint(1, 28):02d}.{r.randint(1, 12):02d}.2024 | "
               f"{r.randint(100, 999_999):,} TL | SIP-{r.randint(10**9, 10**10 - 1)} | {r.random():.4f} |")
        rows.append(row)
        size += len(row.encode())
    return "\n".join(rows)


def measure(fn, text: str, repeat: int) -> float:
    """Best of `repeat` runs, in CPU µs per KB of UTF-8 text. CPU time (not wall time) because
    the 2 cores are shared: time spent descheduled is not the detector's cost."""
    kb = len(text.encode()) / 1024
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn(text)
        best = min(best, time.thread_time() - t0)
    return best * 1e6 / kb


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    r = random.Random(7)
    cases = {
        "clean_prose": (classify, make_text(r, args.kb, 0)),
        "dirty_prose_1_per_kb": (classify, make_text(r, args.kb, 1)),
        "stress_4_per_kb": (classify, make_text(r, args.kb, 4)),
        "numbers_table": (classify, make_table(r, args.kb)),
    }
    chat = [make_text(r, 1, 1) for _ in range(args.kb)]
    results = {name: measure(fn, text, args.repeat) for name, (fn, text) in cases.items()}
    results["chat_1kb_messages"] = measure(lambda _: classify_parts(chat), " ".join(chat), args.repeat)
    calib = min(_calibrate() for _ in range(args.repeat))
    print(f"{'case':<26}{'µs/KB':>10}")
    for name, us in results.items():
        print(f"{name:<26}{us:>10.2f}")
    print(f"{'calibration sum(range(1000)) µs':<34}{calib:>8.2f}")
    realistic = max(v for k, v in results.items() if not k.startswith("stress"))
    print(json.dumps({"bench": "sensitivity_speed", "kb": args.kb,
                      "us_per_kb": {k: round(v, 2) for k, v in results.items()},
                      "worst_realistic_us_per_kb": round(realistic, 2), "target_us_per_kb": 50,
                      "ok": realistic <= 50, "calibration_us": round(calib, 2)}))


def _calibrate() -> float:
    t0 = time.thread_time()
    for _ in range(100):
        sum(range(1000))
    return (time.thread_time() - t0) * 1e6 / 100


if __name__ == "__main__":
    main()
