"""Tokens of a text and the sparse features the name tagger reads for each token.

Shared by the run-time tagger (`tagger`) and the training tool (`tools/name_tagger`), so both
see exactly the same features. A token is a run of at least two letters with an optional
apostrophe suffix (`Kaya'yı`), or an initial (`Ö.`); runs glued to digits, '@', '+', '/' or
'=' (e-mail local parts, base64, identifiers) are not tokens. Features are strings: the folded
word, its affixes and character trigrams, its shape within its line's casing (a line in capitals
or in lower case says nothing by its casing), lexicon letters, the punctuation around it and the
same for two tokens either side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.lexicon import compound_given, lexicon_flags

WORD = re.compile(r"(?<![\w+/=])(?<!\w@)(?:[^\W\d_]{2,}(?:['’][^\W\d_]{1,8})?|[A-ZÇĞİÖŞÜ]\.)(?![\w@+/=])")
_SUFFIX = re.compile(r"['’]")
_GAP_KEEP = re.compile(r"[^.,;:!?()\"\n\-/|=\[\]{}<>*#0-9]")
# str.translate tables that drop the letters counted (a third of a character class's findall)
_DROP_UPPER = dict.fromkeys(map(ord, "ABCDEFGHIJKLMNOPQRSTUVWXYZÇĞİÖŞÜ"))
_DROP_LOWER = dict.fromkeys(map(ord, "abcdefghijklmnopqrstuvwxyzçğıöşü"))
_ASCII_LOWER = b"abcdefghijklmnopqrstuvwxyz"


@dataclass(slots=True, frozen=True)
class TokenInfo:
    key: str  # folded stem: "kaya" for "KAYA'YI"
    suffix: str  # folded case suffix after the apostrophe, or ""
    shape: str  # "U" all capitals, "C" capitalised, "L" lower, "I" initial
    flags: str  # lexicon letters (see `lexicon.lexicon_flags`)


def line_casing(line: str) -> str:
    if line == line.lower():
        return "lower"
    if line == line.upper():
        return "caps"
    ascii_only = line.encode("ascii", "ignore")
    if 3 * (len(ascii_only) - len(ascii_only.translate(None, _ASCII_LOWER))) >= len(line):
        return "mixed"  # enough ASCII lower-case letters alone: prose (one C pass; `_counted` settles the rest)
    return _counted(line)


def _counted(line: str) -> str:
    """The casing of a line that is neither all lower case nor all capitals, by counting its
    lower-case and capital letters (Turkish ones included)."""
    low = len(line) - len(line.translate(_DROP_LOWER))
    if 3 * low >= len(line):  # prose: capitals cannot outnumber twice the lower-case letters
        return "mixed"
    return "caps" if len(line) - len(line.translate(_DROP_UPPER)) > 2 * low else "mixed"


@lru_cache(maxsize=1 << 16)
def token_info(raw: str) -> TokenInfo:
    """A token's folded stem, suffix, shape and lexicon letters (cached by its text; callers
    must not change the value)."""
    stem, suffix = (_SUFFIX.split(raw, 1) + [""])[:2]
    key = fold_key(stem.rstrip("."))
    shape = "I" if raw.endswith(".") else "U" if raw.isupper() else "C" if raw[0].isupper() else "L"
    flags = lexicon_flags().get(key, "") or ("g" if compound_given(key) else "")
    return TokenInfo(key, fold_key(suffix), shape, flags)


class Doc:
    """A text's tokens with their details (`TokenInfo`) and their lines' casing, all found when
    the text is read: the rules read each token's neighbours, so every token's details are
    needed (one pass costs less than a lookup per call)."""

    __slots__ = ("_modes", "infos_", "modes_", "spans", "text")

    def __init__(self, text: str, spans: list[tuple[int, int]]) -> None:
        self.text = text
        self.spans = spans
        self.infos_ = [token_info(text[s:e]) for s, e in spans]
        self._modes: dict[int, str] = {}  # line index -> its casing
        self.modes_ = self._line_modes() if "\n" in text else [line_casing(text)] * len(spans) if spans else []

    @classmethod
    def of(cls, text: str) -> Doc:
        return cls(text, [m.span() for m in WORD.finditer(text)])

    def info(self, i: int) -> TokenInfo:
        return self.infos_[i]

    def infos(self) -> list[TokenInfo]:
        """Every token's details (callers must not change the list)."""
        return self.infos_

    def mode(self, i: int) -> str:
        """The casing of token i's line: "caps", "lower" or "mixed"."""
        return self.modes_[i]

    def modes(self) -> list[str]:
        """Every token's line casing (callers must not change the list)."""
        return self.modes_

    def _line_modes(self) -> list[str]:
        """Every token's line casing, found in one merge walk of tokens and line ends."""
        text = self.text
        lines = [m.start() for m in re.finditer("\n", text)]
        k, out, modes = 0, [], self._modes
        for s, _ in self.spans:
            while k < len(lines) and lines[k] < s:
                k += 1
            got = modes.get(k)
            if got is None:
                lo = lines[k - 1] + 1 if k else 0
                got = modes[k] = line_casing(text[lo : lines[k] if k < len(lines) else len(text)])
            out.append(got)
        return out

    def gap(self, i: int) -> str:
        """Punctuation between token i-1 and token i ("^" at the start, "~" when far apart)."""
        s = self.spans[i][0]
        lo = self.spans[i - 1][1] if i else max(0, s - 12)
        if s - lo > 40:
            return "~"
        return _gap_mark(self.text[lo:s], i > 0)


@lru_cache(maxsize=1 << 12)
def _gap_mark(between: str, inner: bool) -> str:
    """`Doc.gap` of the text `between` two tokens (cached: most gaps are a space or ", ")."""
    kept = _GAP_KEEP.sub("", between).replace("\n", "N")
    kept = re.sub("[0-9]+", "#", kept)
    return (kept[:3] or "_") if inner else "^" + kept[:2]


def token_features(doc: Doc, i: int) -> list[str]:
    """The feature strings of token i (their order carries no meaning: the model sums them)."""
    return [*own_features(doc, i), *context_features(doc, i)]


def own_features(doc: Doc, i: int) -> tuple[str, ...]:
    """The features of token i alone, within its line's casing (cached by word: the same word
    in another text costs one lookup)."""
    t = doc.info(i)
    return _own(t.key, t.suffix, t.shape, t.flags, doc.mode(i)[0])


@lru_cache(maxsize=1 << 16)
def _own(k: str, suffix: str, shape: str, flags: str, mode: str) -> tuple[str, ...]:
    out = ["bias", f"w:{k}", f"p3:{k[:3]}", f"s3:{k[-3:]}", f"s2:{k[-2:]}", f"sh:{mode}{shape}",
           f"len:{min(len(k), 12) // 3}"]
    padded = f"^{k}$"
    out += [f"g:{padded[j : j + 3]}" for j in range(len(padded) - 2)]
    if suffix:
        out += ["apos", f"suf:{suffix}"]
    out += [f"lx:{c}" for c in flags] or ["lx:-"]
    return tuple(out)


def context_features(doc: Doc, i: int) -> list[str]:
    """The punctuation around token i and the two tokens either side of it."""
    mode = doc.mode(i)[0]
    out = [f"gap:{doc.gap(i)}", f"gapn:{doc.gap(i + 1) if i + 1 < len(doc.spans) else '$'}"]
    for d in (-2, -1, 1, 2):
        j = i + d
        out += neighbour_features(d, mode, doc.info(j)) if 0 <= j < len(doc.spans) else [f"c{d}:<none>"]
    return out


def neighbour_features(d: int, mode: str, n: TokenInfo) -> list[str]:
    """The features of token `n` seen `d` tokens from the scored one, in a line of casing `mode`."""
    out = [f"c{d}:{n.key}", f"c{d}sh:{mode}{n.shape}"]
    out += [f"c{d}lx:{c}" for c in n.flags]
    if n.suffix:
        out.append(f"c{d}suf:{n.suffix}")
    return out


# words after which a token in a lower-case or all-capitals line is worth a look
CUES = frozenset(fold_key(w) for w in (
    "adım adim ismim benim ben hasta hastamız sanık davacı davalı alıcı gönderen sigortalı müşteri kiracı "
    "borçlu aday danışan veli öğrenci öğrencimiz çalışanımız personel komşum eşim annem babam oğlum kızım "
    "arkadaşım kardeşim abim ablam sayın dr av bey hanım hanımın beyin teyze abi abla hoca hocam soyad "
    "soyadı soyadım ismi adı ad isim adını ismini tanık şüpheli mağdur imza yetkili sahibi"
).split())


def may_name(flags: str) -> bool:
    """Not a word the lexicons know only as a common word, a title or an organisation's word
    ("Merhaba", "Sayın", "Holding"): those are context, never scored."""
    return not flags or "g" in flags or "s" in flags or not any(c in flags for c in "cto")


def candidates(doc: Doc) -> list[int]:
    """Tokens worth scoring: in mixed-case lines the capitalised ones that may be names; in lower-case or
    all-capitals lines (casing says nothing there) lexicon names, their neighbours, and the
    word after a cue ("adım", "sayın", "hasta", "eşim")."""
    out: list[int] = []
    spans, text, modes, infos = doc.spans, doc.text, doc.modes(), doc.infos()
    named: set[int] = set()
    for i, (s, _) in enumerate(spans):
        if modes[i] == "mixed":
            if text[s].isupper() and text[max(0, s - 2) : s].lower() != "e-" and may_name(infos[i].flags):
                out.append(i)
            continue
        info = infos[i]
        if ("g" in info.flags or "s" in info.flags) and len(info.key) >= 3:
            named.update((i - 1, i, i + 1))
        elif i and infos[i - 1].key in CUES:
            named.add(i)
    out += [i for i in named if 0 <= i < len(spans) and modes[i] != "mixed"]
    return sorted(set(out))
