"""tools/name_tagger/real_rows.py: a hand-labelled row becomes the tagger's training tokens, every
occurrence of a labelled name's text a positive (the set labels a repeated name once)."""

from __future__ import annotations

import json
from pathlib import Path

from fairgate.policies.detection.persons.features import Doc, candidates
from tools.name_tagger.real_rows import load_parts, name_spots, row_examples

ROW = {"text": "Gülsüm Aksoy aradı. Yarın Gülsüm gelecek, Ankara'dan.",
       "spans": [{"kind": "person_name", "text": "Gülsüm Aksoy"}, {"kind": "person_name", "text": "Gülsüm", "occurrence": 2},
                 {"kind": "health", "text": "aradı"}]}


def test_every_occurrence_of_a_labelled_names_text_counts() -> None:
    text = ROW["text"]
    assert [text[s:e] for s, e in name_spots(ROW)] == ["Gülsüm Aksoy", "Gülsüm", "Gülsüm"]


def test_candidate_tokens_inside_a_name_are_positive_and_the_rest_negative() -> None:
    doc = Doc.of(ROW["text"])
    words = [ROW["text"][slice(*doc.spans[i])] for i in candidates(doc)]
    assert {"Gülsüm", "Aksoy"} <= set(words)
    feats, labels = row_examples([ROW])
    assert len(feats) == len(labels) == len(words)
    assert {w: y for w, y in zip(words, labels, strict=True) if w != "Gülsüm"} == \
        {w: int(w == "Aksoy") for w in words if w != "Gülsüm"}
    assert all(y == 1 for w, y in zip(words, labels, strict=True) if w == "Gülsüm")


def test_only_the_named_parts_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(ROW) + "\n\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("not json", encoding="utf-8")  # never opened
    assert load_parts(["a"], tmp_path) == [ROW]
