"""Validate the hand-written kvkk_real rows: python3 bench/data/kvkk_real/check.py [--stats]
[--overlap]

Checks that every line parses, ids are unique and carry their part's prefix (`dev2-0001`), kinds
and styles are known, every span is an exact substring (at the stated occurrence), sensitive ==
bool(spans), caps/lower/ascii rows keep their style, and tckn/iban/card/vkn spans pass their
checksums (digits may be written out in Turkish words). --stats prints the count tables pasted
into DATA_CARD.md. --overlap checks each later part against the earlier ones (see `overlap`).
"""

import collections
import difflib
import json
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).parent
SPECIAL = set(
    "health religion ethnicity politics union sexual_life criminal biometric genetic appearance"
    " association".split()
)
KINDS = SPECIAL | set(
    "tckn iban phone card email vkn passport plate birth_date sgk person_name person_address".split()
)
STYLES = {"plain", "ascii", "caps", "lower", "wrapped"}
# The parts, in the order they were written; --overlap checks each part against those before it.
PARTS = ("dev", "test", "dev2", "test2", "test3", "test4", "test5", "test6", "test7", "test8", "test9", "test10", "test11", "test12", "test13", "test14", "test15", "test16", "test17", "test18", "test19", "test20", "test21", "test22", "test23", "test24", "test25", "test26", "test27", "test28", "test29", "test30", "test31", "test32")  # in the order they were written (test2 beside dev2)
# Labelled span strings a later part may share with an earlier one: short, generic wording.
SHARED_SPANS = set()
STYLE_BREAKERS = [
    ("caps", r"[a-zçğıöşü]", "a lower-case letter"),
    ("lower", r"[A-ZÇĞİÖŞÜ]", "a capital letter"),
    ("ascii", r"[çğıöşüÇĞİÖŞÜ]", "a Turkish letter"),
]
# Turkish digit words, with their ASCII spellings, for numbers read out digit by digit.
DIGIT_WORDS = {
    word: str(digit)
    for digit, words in enumerate(
        [
            "sıfır sifir",
            "bir",
            "iki",
            "üç uc",
            "dört dort",
            "beş bes",
            "altı alti",
            "yedi",
            "sekiz",
            "dokuz",
        ]
    )
    for word in words.split()
}


def digits(text: str) -> str:
    words = re.findall(r"[^\W\d_]+|\d", text.lower().replace("İ".lower(), "i"))
    if any(w in DIGIT_WORDS for w in words):
        return "".join(DIGIT_WORDS.get(w, w if w.isdigit() else "") for w in words)
    return re.sub(r"\D", "", text)


def tckn_ok(d: str) -> bool:
    if len(d) != 11 or d[0] == "0":
        return False
    n = [int(c) for c in d]
    d10 = ((n[0] + n[2] + n[4] + n[6] + n[8]) * 7 - (n[1] + n[3] + n[5] + n[7])) % 10
    return n[9] == d10 and n[10] == sum(n[:10]) % 10


def iban_ok(text: str) -> bool:
    s = re.sub(r"[\s.-]", "", text).upper()
    if not re.fullmatch(r"TR\d{24}", s):
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def luhn_ok(d: str) -> bool:
    if not 13 <= len(d) <= 19:
        return False
    total = 0
    for i, c in enumerate(reversed(d)):
        v = int(c) * (2 if i % 2 else 1)
        total += v - 9 if v > 9 else v
    return total % 10 == 0


def vkn_ok(d: str) -> bool:
    if len(d) != 10:
        return False
    check = 0
    for i, c in enumerate(reversed(d[:9]), 1):
        c1 = (int(c) + i) % 10
        if c1:
            check += (c1 * 2**i) % 9 or 9
    return int(d[9]) == (10 - check) % 10


def check_file(path: pathlib.Path) -> tuple[list[dict], list[str]]:  # noqa: C901 - one pass of checks per row, each a line
    rows, errors = [], []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.name}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"{where}: bad JSON: {e}")
            continue
        rows.append(row)
        if not re.fullmatch(rf"{re.escape(path.stem)}-\d{{4}}", str(row.get("id"))):
            errors.append(f"{where}: id {row.get('id')!r} is not {path.stem}-NNNN")
        if row.get("style") not in STYLES:
            errors.append(f"{where}: style {row.get('style')!r}")
        for style, pattern, what in STYLE_BREAKERS:
            if row.get("style") == style and re.search(pattern, row.get("text", "")):
                errors.append(f"{where}: {style} row has {what}")
        if not row.get("genre"):
            errors.append(f"{where}: no genre")
        if row.get("sensitive") is not bool(row.get("spans")):
            errors.append(f"{where}: sensitive disagrees with spans")
        text = row.get("text", "")
        for span in row.get("spans", []):
            kind, st = span.get("kind"), span.get("text", "")
            if kind not in KINDS:
                errors.append(f"{where}: kind {kind!r}")
            if not st or text.count(st) < span.get("occurrence", 1):
                errors.append(f"{where}: span not in text: {st!r}")
            d = digits(st)
            if kind == "tckn" and not tckn_ok(d):
                errors.append(f"{where}: bad tckn {st!r}")
            if kind == "iban" and not iban_ok(st):
                errors.append(f"{where}: bad iban {st!r}")
            if kind == "card" and not luhn_ok(d):
                errors.append(f"{where}: bad card {st!r}")
            if kind == "vkn" and not vkn_ok(d):
                errors.append(f"{where}: bad vkn {st!r}")
    ids = collections.Counter(r.get("id") for r in rows)
    errors += [f"{path.name}: duplicate id {i}" for i, n in ids.items() if n > 1]
    return rows, errors


def stats(parts: dict[str, list[dict]]) -> None:
    """Print the DATA_CARD.md tables: one column pair per part."""
    names = list(parts)
    print(
        "| part | rows | sensitive | negative | rows with a special category |\n|---|---|---|---|---|"
    )
    for n, rows in parts.items():
        neg = sum(not r["sensitive"] for r in rows)
        special = sum(any(s["kind"] in SPECIAL for s in r["spans"]) for r in rows)
        print(f"| {n} | {len(rows)} | {len(rows) - neg} | {neg} | {special} |")
    spans = {
        n: collections.Counter(s["kind"] for r in rows for s in r["spans"])
        for n, rows in parts.items()
    }
    rows_with = {
        n: collections.Counter(k for r in rows for k in {s["kind"] for s in r["spans"]})
        for n, rows in parts.items()
    }
    head = " | ".join(f"{n} spans | {n} rows" for n in names)
    print(f"\n| kind | {head} |\n|---|" + "---|" * (2 * len(names)))
    for k in sorted(KINDS, key=lambda k: (k in SPECIAL, -sum(spans[n][k] for n in names), k)):
        cells = " | ".join(f"{spans[n][k]} | {rows_with[n][k]}" for n in names)
        print(f"| {k} | {cells} |")
    for field in ("style", "genre"):
        total = {n: collections.Counter(r[field] for r in rows) for n, rows in parts.items()}
        pos = {
            n: collections.Counter(r[field] for r in rows if r["sensitive"])
            for n, rows in parts.items()
        }
        keys = sorted(
            set().union(*total.values()), key=lambda k: (-sum(total[n][k] for n in names), k)
        )
        head = " | ".join(f"{n} rows (sensitive)" for n in names)
        print(f"\n| {field} | {head} |\n|---|" + "---|" * len(names))
        for k in keys:
            cells = " | ".join(f"{total[n][k]} ({pos[n][k]})" for n in names)
            print(f"| {k} | {cells} |")


def overlap(parts: dict[str, list[dict]]) -> list[str]:
    """Each part against the parts written before it: no shared labelled span string
    (case-insensitive, SHARED_SPANS aside) and no text pair with a SequenceMatcher ratio above 0.6.
    Only the later part's ids and spans are printed, so a held-out earlier part stays unread."""
    errors, names = [], list(parts)
    for i, new in enumerate(names):
        for old in names[:i]:
            old_spans = {s["text"].lower() for r in parts[old] for s in r["spans"]}
            for r in parts[new]:
                for s in r["spans"]:
                    t = s["text"].lower()
                    if t in old_spans and t not in SHARED_SPANS:
                        errors.append(f"{r['id']}: span {s['text']!r} also labelled in {old}")
            for r in parts[new]:
                m = difflib.SequenceMatcher(autojunk=False)
                m.set_seq2(r["text"])
                for o in parts[old]:
                    m.set_seq1(o["text"])
                    if m.real_quick_ratio() > 0.6 and m.quick_ratio() > 0.6 and m.ratio() > 0.6:
                        errors.append(f"{r['id']}: text ratio {m.ratio():.2f} with a {old} row")
    return errors


def main() -> int:
    failed, parts = False, {}
    for name in PARTS:
        path = HERE / f"{name}.jsonl"
        if not path.exists():
            continue
        rows, errors = check_file(path)
        for e in errors:
            print(e)
        failed |= bool(errors)
        parts[name] = rows
        if "--stats" not in sys.argv:
            print(f"{path.name}: {len(rows)} rows, {len(errors)} errors")
    if "--overlap" in sys.argv:
        errors = overlap(parts)
        for e in errors:
            print(e)
        failed |= bool(errors)
        print(f"overlap: {len(errors)} errors")
    if "--stats" in sys.argv and not failed:
        stats(parts)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
