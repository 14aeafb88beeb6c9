"""Extract given names and surnames for Türkiye and its neighbours from the `names-dataset`
package (MIT; aggregated name counts per country, no records) into `lexicons/*.txt`.

Run once (loads ~3 GB into memory for a minute); the output is committed so training is
reproducible without the package:

    python -m tools.name_tagger.extract_lexicons
"""

from __future__ import annotations

import re
from pathlib import Path

OUT = Path(__file__).with_name("lexicons")
# Türkiye first (most rows), then neighbours and the largest resident groups; given names are
# written male and female interleaved by rank, so the first N of a file are the N most common
COUNTRIES = {"TR": 6000, "SY": 800, "IQ": 800, "IR": 600, "AZ": 600, "GR": 600, "GE": 300,
             "BG": 300, "RU": 300, "AF": 300, "TM": 200, "EG": 300, "LB": 200,
             "JO": 200, "PS": 200, "CY": 300, "DE": 200, "GB": 200}


_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]{2,15}")


def _clean(names: list[str]) -> list[str]:
    """Latin-script names only: the text we scan writes names in Latin letters."""
    return [n for n in names if _LATIN.fullmatch(n)]


def main() -> None:
    from names_dataset import NameDataset  # training-time only

    nd = NameDataset()
    OUT.mkdir(exist_ok=True)
    for country, n in COUNTRIES.items():
        first = nd.get_top_names(n=n, country_alpha2=country).get(country, {})
        male, female = first.get("M", []), first.get("F", [])
        given = _clean([n for pair in zip(male, female, strict=False) for n in pair] + male[len(female):] + female[len(male):])
        last = _clean(nd.get_top_names(n=n * 2, use_first_names=False, country_alpha2=country).get(country, []))
        (OUT / f"given_{country}.txt").write_text("\n".join(given) + "\n", encoding="utf-8")
        (OUT / f"surname_{country}.txt").write_text("\n".join(last) + "\n", encoding="utf-8")
        print(country, len(given), len(last))


if __name__ == "__main__":
    main()
