"""Names the words around them announce, whatever the tagger makes of the word itself.

Turkish marks a person's name by its neighbours: a relation or role right before it (`eşim
Fatma`, `kızım elif`, `stajyer Dilnaz`, `müdürümüz Hakan`), a greeting before a name that ends
its clause (`Merhaba Kutay,`), an honorific after it in any inflection (`Fadime teyzem`,
`Kudret abinin`, `Ayşe Hanım'la`), or its place as a message's sign-off (`Saygılarımla,\\nFiliz`,
`... teşekkürler. — Gözde`). A word there that the lexicons know as a given name (or, in a
mixed-case line, a capitalised word no lexicon knows: `eşim Aron`) is a name; a common, place,
organisation or title word alone is not.

These rules read only the tagger's candidates, so a plain prompt costs next to nothing here.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key, given_names
from fairgate.policies.detection.person_links import person_word
from fairgate.policies.detection.persons.alone import announced_given_name
from fairgate.policies.detection.persons.features import Doc
from fairgate.policies.detection.persons.inflected import mentioned
from fairgate.policies.detection.persons.lexicon import (
    AFTER_NAME,
    NOT_NAMES,
    all_places,
    common_words,
    plain_words,
)
from fairgate.policies.detection.special_categories_terms import starts_with_term

GREETINGS = frozenset(fold_key(w) for w in (
    "merhaba merhabalar selam selamlar sevgili değerli dear hi hello hey günaydın tebrikler canım").split())
# words that announce a name right after them ("adım Eftimya", "soyadım Paraskevopulu")
NAMING = frozenset(fold_key(w) for w in "adım ismim soyadım adı ismi soyadı".split())
_MY_NAME = frozenset(fold_key(w) for w in "adım ismim soyadım".split())
# a person word that is about someone without naming them next ("o adam", "bu kadın", "olduğu")
_NOT_CUES = frozenset(fold_key(w) for w in (
    "adam adamın adamı kadın kadının kadını bey beyin hanım hanımın olduğunu olduğu olduğundan olmadığını "
    "olduğumu kendisi kendisinin bana bende beni").split())
# case and possessive endings an honorific takes after a name ("teyzem", "abinin", "hanıma"), folded
_HONORIFIC_ENDINGS = (
    "", "m", "miz", "n", "niz", "nin", "in", "un", "a", "e", "ya", "ye", "i", "u", "yi", "yu", "yla", "yle",
    "la", "le", "da", "de", "dan", "den", "si", "sinin", "sine", "ler", "lar", "cim", "cigim", "min", "ma",
    "me", "mi", "mla", "mle", "mdan", "mden", "mizin", "mize", "nize", "yi")
# chat words that fold to a name ("sen" / "Şen", "tam" / "Tam"): never a name in lower case
LOWER_NOT_NAMES = frozenset(("sen", "ben", "biz", "siz", "onu", "ona", "seni", "sana", "beni", "bana", "bende",
                             "tam", "tanis", "hadi", "abi", "abla"))
_SPACE = re.compile(r"[ \t]{1,3}")
# what ends the sentence before a sign-off: a line end, a full stop, a dash, a comma
_BREAKS = frozenset("\n.!?,—–-")
_SENTENCE_END = re.compile(r"[.!?:][ \t]")
_DASH_GAP = re.compile(r"(?:\s|\A)[-—–][ \t]*\Z")  # a dash before a signature (normalised from "—", "–")
# "kasadaki emre", "grubumuzdaki yaren", "Resepsiyondaki Cansu": the one at a place, a team
_AT_PLACE = ("daki", "deki", "taki", "teki")
_QUOTES = frozenset("'\"‘’“”«")
_SENTENCE_GAPS = frozenset("^.N!?:~\"")  # `Doc.gap` marks before a sentence's first word
# after a sign-off: quotes and stops, or a comma and a number or class ("Meftun Kara, 0538 112
# 90 47", "Özge, 11-B"), or a surname's initial in lower case ("— sebahat k.": no token)
_TAIL = re.compile(r"(?:[ \t]+[a-zçğıöşü]\.)?[\s\"'“”‘’.!?]*(?:,[ \t]*[+0-9(][0-9A-Za-z ()+\-/.]{0,24})?[\s.]*\Z")


# every inflected form of an honorific that follows a name, folded
HONORIFICS = frozenset(stem + end for stem in AFTER_NAME for end in _HONORIFIC_ENDINGS)


def _nameish(doc: Doc, i: int, strong: bool) -> bool:
    """Token i may be a given name where the context announces one: a lexicon given name, or
    with `strong` context in a mixed-case line a capitalised word no lexicon knows (or knows as
    a surname only) that is no inflected common word or place ("Listesi", "Arhavili"). Never an
    organisation, title, greeting or category word ("eşim Sırp", "babası Alzheimer"), a place
    with a locative ending ("Sivas'taki"), a lower-case word in a mixed-case line, or in a line
    of capitals or lower case a common word ("PERSONEL BİLGİ FORMU")."""
    info = doc.info(i)
    key, flags, mode = info.key, info.flags, doc.mode(i)
    if key in NOT_NAMES or key in GREETINGS or len(key) < 3 or (mode == "mixed" and info.shape not in "CU"):
        return False
    if info.shape == "L" and key in LOWER_NOT_NAMES:
        return False  # "abi sen de gel" (capitalised, "Şen" is a surname)
    if "g" in flags:
        if "o" in flags or "t" in flags or (mode != "mixed" and "c" in flags and key not in given_names()):
            return False
        if "p" in flags and info.suffix[:1] in ("d", "t"):
            return False
    elif not (strong and mode == "mixed" and info.shape == "C" and flags in ("", "s") and not _inflected(key)):
        return False
    return not starts_with_term(key)


def _named_word(doc: Doc, i: int, mine: bool) -> bool:
    """After "adım" / "soyadım" (`mine`) any word is the name it announces, but a common word,
    place, organisation or title word ("adım atmak", "adı Kadıköy'de"); after "adı" / "ismi" a
    given name only ("ismi oldu")."""
    if mine and announced_given_name(doc, i):
        return True  # a given name that is a common word too, after "adım" opening its clause
    info = doc.info(i)
    if info.key in NOT_NAMES or info.key in GREETINGS or len(info.key) < 3 or any(c in info.flags for c in "cotpv"):
        return False
    # (or a word no lexicon knows, no inflected word either, that ends the sentence: "adı eliya.",
    # "ismi Nareh,"; not a thing's: "şirketin adı değişti", "ilacın adı X.")
    alone = not info.flags and not _inflected(info.key) and not things_name(doc, i) \
        and _SENTENCE_AFTER.match(doc.text, doc.spans[i][1]) is not None
    return (mine or "g" in info.flags or alone) and not starts_with_term(info.key)


# a title that a surname follows in any case, a foreign one too ("bay cohen", "mr smith")
_MISTER = frozenset(fold_key(w) for w in "bay bayan mr mrs ms".split())


def _mister_named(doc: Doc, i: int) -> bool:
    """Token i after "bay" / "bayan" is a surname or a word no lexicon knows, not a common
    word inflected ("bay tuvaleti", "bayan terzisi"), nor a place, organisation or title."""
    info = doc.info(i)
    return len(info.key) >= 3 and not any(c in info.flags for c in "cotpv") and info.key not in NOT_NAMES \
        and not info.suffix and not _inflected(info.key) and not starts_with_term(info.key)


_SENTENCE_AFTER = re.compile(r"[ \t]*(?:[.,!?\n]|\Z)")
_GENITIVE = re.compile(r"(?:n?[ıiuü]n)\Z")


def things_name(doc: Doc, i: int) -> bool:
    """The naming word at i-1 ("adı") has an owner before it in the genitive that is no person
    ("şirketin adı", "köpeğin adı"; not "kızımın adı", "çocuğun adı")."""
    if i < 2 or doc.info(i - 1).key not in NAMING or not _spaced(doc, i - 2):
        return False
    owner = doc.info(i - 2).key
    return _GENITIVE.search(owner) is not None and not person_word(owner) and not owner.startswith("cocu")


_VALUE_AFTER_LABEL = re.compile(r":[ \t]*[0-9]")


def label_or_things_name(doc: Doc, i: int) -> bool:
    """Token i is a field's label, not a name: it opens its line, a colon and a number follow
    ("Dönüş: 21.03.2025", "Varış: 14:30"; a chat's speakers are found by `proper_given_names`);
    or a thing's name after its owner's "adı" ("projenin adı zephyr", `things_name`)."""
    end = doc.spans[i][1]
    if doc.text.startswith(":", end) and _VALUE_AFTER_LABEL.match(doc.text, end):  # (most words: no colon, no regex call)
        return doc.gap(i)[:1] in ("^", "N")
    return things_name(doc, i)


def _inflected(key: str) -> bool:
    """An unknown word that is a common word or place with a suffix ("partisi", "ankaralilar")."""
    common, places = common_words(), all_places()
    return any(key[:n] in common or key[:n] in places for n in range(max(3, len(key) - 6), len(key)))


def _spaced(doc: Doc, i: int) -> bool:
    """Only spaces between token i and token i+1."""
    return bool(_SPACE.fullmatch(doc.text, doc.spans[i][1], doc.spans[i + 1][0]))


def _before_surname(doc: Doc, i: int) -> bool:
    """Token i is a capitalised word no lexicon knows, in a mixed-case line, before a lexicon
    surname capitalised like it ("Kiracı Olena Shevchenko": "Olena" reads as "ole" + a suffix)."""
    info = doc.info(i)
    return doc.mode(i) == "mixed" and info.shape == "C" and not info.flags and not info.suffix \
        and len(info.key) >= 3 and _surname_after(doc, i) and "s" in doc.info(i + 1).flags


def _surname_after(doc: Doc, i: int, lower: bool = False) -> bool:
    """Token i+1 goes on the name at token i: a surname or a word no lexicon knows, capitalised
    like it ("Yurii Melnyk", "ZİYA KORKMAZER"); with `lower` (a sign-off), in a line of lower
    case a lexicon surname ("— nurhayat ekşi")."""
    if i + 1 >= len(doc.spans) or not _spaced(doc, i):
        return False
    a, b = doc.info(i), doc.info(i + 1)
    if b.key in NOT_NAMES or any(c in b.flags for c in "otp") or a.shape != b.shape:
        return False
    if b.shape == "L":
        return lower and doc.mode(i + 1) == "lower" and "s" in b.flags
    return "s" in b.flags or "g" in b.flags or not b.flags


def cued_names(doc: Doc, cands: list[int]) -> list[int]:
    """Tokens among the tagger's candidates `cands` that are names by what stands around them
    (see the module docstring)."""
    if not cands or cands[-1] == 0:
        return []  # "Say hello in five words": only the first word may be a name
    infos = doc.infos()
    out: list[int] = mentioned(doc, cands) if "@" in doc.text else []
    for i in cands:
        if _absent_subject(doc, i):
            out.append(i)
            continue
        if i == 0:
            continue
        prev = infos[i - 1].key
        if prev in GREETINGS:
            if _nameish(doc, i, True) and _ends_clause(doc, i + _surname_after(doc, i)):
                out.append(i)
        elif prev not in _NOT_CUES and ((relation := person_word(prev)) or (len(prev) > 6 and prev.endswith(_AT_PLACE))) \
                and _spaced(doc, i - 1) and (_nameish(doc, i, relation) or (relation and _before_surname(doc, i))):
            out.append(i)
        elif prev in NAMING and _spaced(doc, i - 1) and _named_word(doc, i, prev in _MY_NAME):
            out.append(i)  # "adım eftimya", "soyadım paraskevopulu", "adı sebahattin" (not "ismi oldu")
        elif prev in _MISTER and _spaced(doc, i - 1) and _mister_named(doc, i):
            out.append(i)  # "bay rosenberg", "misafirimiz bay cohen" (not "bay tuvaleti", "bayan kuaförü")
        elif prev in ("da", "de") and i > 1 and infos[i - 2].key in NAMING and _named_word(doc, i, False):
            out.append(i)  # "ADI DA NERİMAN", "adı da zeynep"
    if cands and cands[-1] >= len(infos) - 3:
        out += _sign_off(doc)
    # a surname after a cued given name ("eşim Yurii Melnyk")
    out += [i + 1 for i in out if _surname_after(doc, i)]
    return out


# an absence note's subject ("bercem bugün kreşe gelmiyo", "YAĞMUR YARIN OKULA GELEMEYECEK"): a
# day word, at most one word, then a negated coming or going (gel-, git-, katıl- with -mA/-mI); or
# a lateness note's ("berivan yine geç kaldı"), after a place's or time's word maybe ("toplantıda")
_ABSENT = re.compile(r"[ \t]+(?:(?:bug[üu]n|yar[ıi]n|d[üu]n|bu[ \t]+(?:sabah|hafta))[ \t]+(?:[^\W\d_]+[ \t]+)?"
                     r"(?:gel|git|gid|kat[ıi]l)[ae]?m[ıiuüae]|(?:(?:yine|gene|hep|bug[üu]n)[ \t]+)?ge[çc][ \t]+kal)", re.IGNORECASE)
_LATE_BEFORE = re.compile(r"[ \t]*(?:[^\W\d_]+(?:[dt][ae]|[dt][ae]ki)[ \t]+)?\Z")


def _absent_subject(doc: Doc, i: int) -> bool:
    """Token i opens its line (after a place's or time's word maybe) as a given name that an
    absence or lateness note's words follow."""
    start, end = doc.spans[i]
    text = doc.text
    if _ABSENT.match(text, end) is None:  # (first: it fails at once after almost every word)
        return False
    return _LATE_BEFORE.match(text[text.rfind("\n", 0, start) + 1 : start]) is not None and _nameish(doc, i, False)


def proper_given_names(doc: Doc, cands: list[int]) -> list[int]:
    """Given names written as proper nouns: among the candidates `cands`, a capitalised word in
    a mixed-case line that the lexicons know as a given name and as nothing ordinary (no common
    word, place, village, organisation, title or people), mid-sentence, where Turkish
    capitalises only a proper noun ("Onboarding'i Bilgehan yapsın"), or a chat's speaker: after
    a time stamp ("[09:12] Suat: ...") or one of two or more such speakers' labels at lines'
    starts ("Ayşe: ...", "Rojbin: ...", also in lower case or capitals: "rozerin: ..."). Not quoted ("'Zeynep' serisi"), nor right after a
    capitalised word that is no given name ("İnce Memed", "Tur Abdin")."""
    infos, text = doc.infos(), doc.text
    plain = plain_words()
    out: list[int] = []
    speakers: dict[str, int] = {}
    for i in cands:
        info = infos[i]
        if text[doc.spans[i][1] : doc.spans[i][1] + 1] == ":" and _bracketed_speaker(doc, i):
            out.append(i)
            continue
        if "g" not in info.flags or any(c in info.flags for c in "cpotv") or len(info.key) < 3 \
                or info.key in NOT_NAMES or info.key in plain or starts_with_term(info.key):
            continue
        start, end = doc.spans[i]
        before = text[text.rfind("\n", 0, start) + 1 : start]
        if info.shape != "C" or doc.mode(i) != "mixed":
            # in a line of lower case or capitals, a speaker's label ("rozerin: ...", "ZELAL: ...")
            if doc.mode(i) != "mixed" and text[end : end + 1] == ":" and not any(c.isalpha() for c in before):
                speakers.setdefault(info.key, i)
            continue
        if text[end : end + 1] == ":" and not any(c.isalpha() for c in before):
            if "]" in before:
                out.append(i)
            else:
                speakers.setdefault(info.key, i)
            continue  # a label: a field's ("Dönüş: 21.03") unless a chat's speaker
        if i == 0 or doc.gap(i)[:1] in _SENTENCE_GAPS or text[start - 1] in _QUOTES:
            continue
        prev = infos[i - 1]
        if prev.shape == "C" and "g" not in prev.flags and _spaced(doc, i - 1) \
                and ("c" in prev.flags or (i > 1 and doc.gap(i - 1)[:1] not in _SENTENCE_GAPS)):
            continue
        out.append(i)
    return out + (list(speakers.values()) if len(speakers) >= 2 else [])


def _bracketed_speaker(doc: Doc, i: int) -> bool:
    """Token i is a chat's speaker after a bracketed time stamp or group at its line's start
    ("[09:14] Ceren: ...", "[Mahalle Kadınları] Mahpeyker: ...", "[köy derneği] cemşit: ..."):
    a given name there even where it is a common word too, or a capitalised word no lexicon knows."""
    start, end = doc.spans[i]
    text, info = doc.text, doc.info(i)
    if text[start - 2 : start] != "] ":
        return False
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start : line_start + 1] != "[" or "]" in text[line_start : start - 2]:
        return False
    if len(info.key) < 3 or info.key in NOT_NAMES or any(c in info.flags for c in "pot") or starts_with_term(info.key):
        return False
    return "g" in info.flags or (not info.flags and info.shape == "C")


def _ends_clause(doc: Doc, i: int) -> bool:
    end = doc.spans[i][1]
    rest = doc.text[end : end + 2]
    return not rest or rest[0] in ",!\n:" or rest[:2] in (" ,", " !")


def _sign_off(doc: Doc) -> list[int]:
    """The name a message ends with: one to three name words after the last sentence, dash or
    comma of the text (or of a quoted message in it: `... "`), the first a given name."""
    text, n = doc.text, len(doc.spans)
    if n < 3:
        return []  # a prompt of a word or two is no signed message
    last = n - 1
    if _TAIL.match(text, doc.spans[last][1]) is None or _table_line(text, doc.spans[last][0]):
        return []
    first = last
    while first > 0 and last - first < 2 and _spaced(doc, first - 1) and doc.info(first - 1).shape == doc.info(last).shape:
        first -= 1
    for start in range(first, last + 1):
        gap = text[doc.spans[start - 1][1] : doc.spans[start][0]] if start else ""
        if not _sign_gap(gap) or "p" in doc.info(start).flags:
            continue
        dash = _DASH_GAP.search(gap) is not None and (doc.mode(start) == "lower" or doc.info(start).shape == "C")
        if not _nameish(doc, start, False):
            if dash and last == start + 1 and _word_and_surname(doc, start):
                return [start, last]  # "— ırmak sukaya": a given name that is a word too, and a surname
            continue
        rest = range(start + 1, last + 1)
        if all(_surname_after(doc, k - 1, True) for k in rest):
            return [start, *rest]
        cased = doc.mode(start) == "mixed" and len(rest) > 0 and all(doc.info(k).shape == "C" for k in rest)
        if dash and ("c" not in doc.info(start).flags or cased):  # "— berfin zeytinkoparan", "— Sevda Kılavuz":
            return [start, *rest] if cased else [start]  # a surname no lexicon lists, a word or a place
    return []


def _word_and_surname(doc: Doc, i: int) -> bool:
    """Token i is a lexicon given name that is a common word too ("ırmak", "umut") and token i+1
    a word no lexicon knows, nor an inflected one ("sukaya"; not "ederim")."""
    given, surname = doc.info(i), doc.info(i + 1)
    return "g" in given.flags and not surname.flags and not _inflected(surname.key) and _spaced(doc, i)


def _sign_gap(gap: str) -> bool:
    """A sentence ends in `gap`: a line end, a full stop, a dash, a comma, or a symbol such as
    an emoji. Letters in it are words that are no tokens (glued to digits or '/': "48600
    Ortaca/Muğla. Irmak"): what stands after the last of them decides."""
    if any(c.isalpha() for c in gap):
        gap = gap[max(i for i, c in enumerate(gap) if c.isalnum()) + 1 :]
    return any(c in _BREAKS or not (c.isascii() or c.isspace()) for c in gap)


def _table_line(text: str, pos: int) -> bool:
    """The line before `pos` is a table's row (`;`, `|`, tab or comma separated), so the word
    at `pos` is its last field, not a signature; a line of prose has commas too, but sentence
    ends and fields of many words."""
    line = text[text.rfind("\n", 0, pos) + 1 : pos]
    if any(line.count(c) >= 2 for c in ";|\t"):
        return True
    commas = line.count(",")
    return commas >= 2 and _SENTENCE_END.search(line) is None and len(line.split()) <= 3 * (commas + 1)


_AND = frozenset(("ve", "ile", "veya", "yahut"))


def coordinated(doc: Doc, found: set[int]) -> list[int]:
    """Given names joined by "ve" / "ile" to a name already found ("Hevin ve Armağan", "Kâzım
    Hopalı ve Nadiye Hanım"), and pairs of given names so joined in a line of lower case or
    capitals ("ismet ile jale"): the other side of a conjunction is a name too."""
    infos, n = doc.infos(), len(doc.spans)
    out: list[int] = []
    for k in [k for k, info in enumerate(infos) if info.key in _AND]:
        if not (0 < k < n - 1 and _spaced(doc, k - 1) and _spaced(doc, k)):
            continue
        left, right = k - 1, k + 1
        if left in found and right not in found and _nameish(doc, right, False):
            out += [right, *([right + 1] if _surname_after(doc, right) else [])]
        elif right in found and left not in found:
            first = left - 1 if left > 0 and _spaced(doc, left - 1) and _nameish(doc, left - 1, False) \
                and _surname_after(doc, left - 1) else left
            if _nameish(doc, first, False):
                out += list(range(first, left + 1))
        elif left not in found and right not in found and doc.mode(left) != "mixed" \
                and _nameish(doc, left, False) and _nameish(doc, right, False):
            out += [left, right]
    return out


def repeated(doc: Doc, found: set[int]) -> list[int]:
    """Words of a name found elsewhere in the text, standing alone ("Katılımcılar: Ozan
    Çetinkaya ... - Ozan önümüzdeki hafta izinde"): the same person again, written as a proper
    noun (capitalised in a mixed-case line)."""
    infos = doc.infos()
    keys = {infos[i].key for i in found if len(infos[i].key) >= 3 and infos[i].shape != "I"}
    same = [i for i, info in enumerate(infos) if info.key in keys and i not in found and info.shape in "CU"]
    if not same:
        return []
    # the same letters, accents included ("Kurt" is a surname, "Kürt" an ethnic origin)
    words = {_stem(doc, i) for i in found}
    return [i for i in same if _stem(doc, i) in words and infos[i].key not in NOT_NAMES
            and not any(c in infos[i].flags for c in "pot")]


def _stem(doc: Doc, i: int) -> str:
    s, e = doc.spans[i]
    return re.split("['’]", doc.text[s:e], maxsplit=1)[0].replace("I", "ı").replace("İ", "i").lower()
