"""Telling of no one: a supposed case ("Diyelim ki bir adayınız ..."), a work's plot ("Film, ...
hapis yatan bir adamın ..."), an encyclopaedia's definition ("Paskalya, Hristiyanlıkta ...
bayramdır"). A special-category term in such a sentence or paragraph is no person's data
(`special_categories.find_special` asks `told_of_no_one` first). And a vet's record
(`animal_patient`) tells of an animal: its patient's health, and its patient's name; so does a
sentence whose subject is an animal (`animals_sentence`): its vaccine, its litter.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.person_links import person_word, sentence
from fairgate.policies.detection.persons.lexicon import TITLES, lexicon_flags


def told_of_no_one(text: str, start: int, end: int) -> bool:
    """The term at text[start:end] stands in a supposition, a plot, a definition or a group's rate."""
    return supposed(text, start) or synopsis(text, start) or definition(text, start, end) or group_rate(text, end)


# the term, then a group's noun and its rate, count or share ("sendikalı işçi oranı", "engelli
# çalışan sayısı", "diyabetli hasta payı"; not one person's own: "şeker oranım", "annemin şeker oranı")
_GROUP_RATE = re.compile(r"\w*[ \t]+([^\W\d_]+)[ \t]+(?:oran|say[ıi]s|pay)[ıi](?:n[ıi]n|n[ıi]|nda|nd[ae]ki)?(?!\w)",
                         re.IGNORECASE)
_GROUP_NOUNS = frozenset(("hasta", "kadin", "erkek", "uye", "nufus", "genc", "cocuk", "kisi", "birey"))


def group_rate(text: str, end: int) -> bool:
    """A group's rate, count or share follows the term: a statistic of many, no one's data."""
    m = _GROUP_RATE.match(text, end)
    return m is not None and ((key := fold_key(m.group(1))) in _GROUP_NOUNS or person_word(key))


# (its first letter as a case-sensitive class, the rest case-insensitive behind it: re then tries it only
# at those letters; a pattern compiled IGNORECASE is tried at every position)
_SUPPOSE = re.compile(r"[DdVvFfTtSs](?i:(?<=d)iyelim|(?<=v)arsayal[ıi]m|(?<=f)arz[ \t]+ed(?:elim|in|iniz)|(?<=t)utal[ıi]m|"
                      r"(?<=s)ay[ \t]+ki)(?!\w)")
_SENTENCE_ENDS = ".!?:\n\"“"



def supposed(text: str, start: int) -> bool:
    """The term's sentence opens with a supposition ("Diyelim ki bir adayınız epilepsi
    hastası", "Varsayalım bir çalışanınız HIV pozitif"): a made-up case, no one's data."""
    lo = max(0, start - 160)
    if _SUPPOSE.search(text, lo, start) is None:
        return False
    opening = max(lo, *(text.rfind(c, lo, start) + 1 for c in _SENTENCE_ENDS))
    while opening < start and text[opening] in " \t":
        opening += 1
    return _SUPPOSE.match(text, opening) is not None


# a work's plot told from its paragraph's first words ("Film, ... hapis yatan bir adamın ...",
# "Dizi önerisi: Kahramanımız ... cezaevinden çıkan", "Roman, ... eşcinsel bir genç adamın", an
# episode's "Yeni bölümde: Komiser ..."); not "Roman bir aileyiz" (a people), which no comma or
# colon follows, nor a form's "Bölüm: Muhasebe" (a department)
_SYNOPSIS = re.compile(
    r"[ \t\"“'‘]*(?:(?:bu[ \t]+)?(?:film|dizi|roman|öykü|hikâye|hikaye|senaryo|kitap|oyun|belgesel|novel|movie|plot|synopsis)"
    r"(?:[ \t]+(?:önerisi|özeti|konusu|incelemesi|eleştirisi|tanıtımı|summary))?"
    r"|(?:yeni|bu|son|geçen|gelecek)[ \t]+bölüm(?:de|ünde|ün[ \t]+özeti))[ \t]*[,:]", re.IGNORECASE)


def synopsis(text: str, start: int) -> bool:
    """The term's paragraph (600 characters at most) opens with a film's, series' or novel's
    plot: its people are characters."""
    para = text.rfind("\n\n", 0, start)
    lo = 0 if para == -1 else para + 2
    return start - lo <= 600 and _SYNOPSIS.match(text, lo) is not None


# a definition: its topic, a comma, then what it is, "bir" and a noun with the copula at the sentence's end
# ("Denetimli serbestlik, ... bir infaz yöntemidir", "Mevlevilik, ... bir tarikattır"; not a
# notice's "Sayın X, ... onaylanmıştır" nor a note's "... bulunmaktadır": a verb's)
_DEFINITION = re.compile(r"[\"“]?([A-ZÇĞİÖŞÜ][^\W\d_]*(?:[ \t][^\W\d_]+){0,3}),[^\n]*?(?<!\w)bir[ \t]+(?:[^\W\d_]+[ \t]+){0,2}"
                         r"([^\W\d_]+(?:d[ıiuü]r|t[ıiuü]r))")
_STOP = re.compile(r"[.!?\n]")
_COPULA_END = re.compile(r"(?:d[ıiuü]r|t[ıiuü]r)\Z")
_VERBAL = re.compile(r"(?:m[ıiuü][şs]|ma[kz]ta|me[kz]te|[ae]ca[kğ]|[ae]ce[kğ]|yor|[ıiuü]r|ma[zs]|me[zs])(?:d[ıiuü]r|t[ıiuü]r)\Z")


def definition(text: str, start: int, end: int) -> bool:
    """The term's sentence defines its topic: no name, title or relation word in the topic
    ("Ayşe Kaya, ... hastasıdır", "Annem, ... Alevidir" tell of a person), and a noun, not a
    verb, before the closing copula."""
    stop = _STOP.search(text, end, end + 400)
    hi = stop.start() if stop else min(len(text), end + 400)
    if _COPULA_END.search(text, max(end, hi - 8), hi) is None:
        return False  # (most sentences: no copula at their end, nothing more read)
    lo = max(start - 400, *(text.rfind(c, 0, start) + 1 for c in ".!?\n"))
    while lo < hi and text[lo] in " \t":
        lo += 1
    m = _DEFINITION.fullmatch(text, lo, hi)
    if m is None or _VERBAL.search(fold_key(m.group(2))):
        return False
    return not any(person_word(k) or k in TITLES or _name_word(k) for k in map(fold_key, m.group(1).split()))


def _name_word(key: str) -> bool:
    """A given name or surname of the lexicons that is no common word."""
    flags = lexicon_flags().get(key, "")
    return ("g" in flags or "s" in flags) and "c" not in flags


# a vet's record: an owner's label ("Sahibi: Ayten Kuzu"), opening a line or a sentence of a card
# written on one line ("Hasta: Paşa (Kangal). Sahibi: ..."), and the patient's species or breed
_OWNER_LABEL = re.compile(r"(?:^|\n|[.;][ \t])[ \t]*(?:hasta[ \t]+)?sahibi[ \t]*:", re.IGNORECASE)
_SPECIES = re.compile(r"(?<!\w)(?:k[öo]pe[kğg]|kedi|retriever|terrier|[çc]oban[ \t]+k[öo]pe|tekir|kangal|"
                      r"muhabbet[ \t]+ku[şs]|tav[şs]an|pati|mama|veteriner|cins[ \t]*:|[ıi]rk[ \t]*:)", re.IGNORECASE)


def animal_patient(text: str) -> bool:
    """The text is a vet's record: an owner's label and the animal's species or breed
    ("Hasta: Paşa (golden retriever)\nSahibi: ..."), so its health words are the animal's."""
    return "ahibi" in text and _OWNER_LABEL.search(text) is not None and _SPECIES.search(text) is not None



# an animal's genitive ("kedimizin", "köpeğinin", "büyükbaş hayvanların"): what follows is the
# animal's; not animal husbandry ("hayvancılığın"), which is a person's trade
_ANIMAL_OF = re.compile(r"(?<!\w)(?:kedi|k[öo]pe[ğg]|hayvan(?!c[ıi]l))\w*?(?:[ıiuü]n|n[ıiuü]n)(?!\w)", re.IGNORECASE)
# an animal opening the sentence as its subject ("kedim dün gece 4 yavru doğurdu"; not "Köpeğimi")
_ANIMAL_FIRST = re.compile(r"[ \t]*(?:kedi|k[öo]pe[kğg])(?:m|miz|mız|n|niz|niz)?[ \t]", re.IGNORECASE)
_WORDS = re.compile(r"[^\W\d_]+")
_ME = frozenset(("ben", "bende", "bana", "beni", "benim", "biz", "bize", "bizde", "bizi", "bizim"))
_FROM_ANIMALS = ("tuy", "alerj", "isir", "tirmal")  # folded: what people get from animals ("Kedimin tüyünden astımım")


def animals_sentence(text: str, start: int) -> bool:
    """The term at `start` tells of an animal: an animal's genitive comes earlier in its
    sentence, or an animal opens the sentence with no comma before the term ("kedimizin aşı
    takvimi: karma aşı ...", "büyükbaş hayvanların şap aşısı", "kedim dün gece 4 yavru doğurdu"),
    and no person, name, "ben" or what people get from animals stands between (not "Köpek
    ısırdı, kuduz aşısı oldum", "Kedimin tüyünden astımım azdı")."""
    lo = sentence(text, start, start)[0]
    ends = [m.end() for m in _ANIMAL_OF.finditer(text, lo, start)]
    if not ends and (m := _ANIMAL_FIRST.match(text, lo)) is not None and "," not in text[m.end():start]:
        ends = [m.end()]
    return bool(ends) and not any(person_word(k) or _name_word(k) or k in _ME or k.startswith(_FROM_ANIMALS)
                                  for k in map(fold_key, _WORDS.findall(text, ends[-1], start)))
