"""Names that are no private person's: a firm's ("Tuzcuoğlu Elektrik", "Marmara Yapı Denetim
A.Ş."), a quarter's ("Sultan Orhan'daki"), a public or historical figure's (`data/names/public.txt`,
also in part: "Adnan" of "Adnan Menderes"), one with life dates ("Sabahattin Ali (1907-1948)"),
a place's, or a union's ("Eğitim-Sen'e"). Read by `names` on each name it has joined.
"""

from __future__ import annotations

import re
from functools import lru_cache

from fairgate.policies.detection.gazetteer import fold_key, provinces
from fairgate.policies.detection.person_links import person_word
from fairgate.policies.detection.persons.cues import HONORIFICS
from fairgate.policies.detection.persons.features import CUES, Doc
from fairgate.policies.detection.persons.lexicon import (
    TITLES,
    TRADE_WORDS,
    lexicon_flags,
    public_name_parts,
    public_names,
    public_words,
)
from fairgate.policies.detection.special_categories_terms import starts_with_term

_COMPASS = frozenset(("orta", "kuzey", "guney", "dogu", "bati", "uzak", "yakin"))
_PET = ("kedi", "kopeg", "kopek", "kusum", "kusu", "atim", "atimiz")
_JOIN = re.compile(r"[ \t]{1,3}|[ \t]?-[ \t]?")
_SPACES = re.compile(r"[ \t]{1,3}")
_LEGAL_KEYS = frozenset(("ltd", "sti", "san", "tic", "gmbh", "inc"))  # the words `_LEGAL_FORM` starts with
_LEGAL_FORM = re.compile(r"[ \t,]*(?:A\.[ \t]?[ŞS]\.|Ltd\b|LTD\b|[ŞS]ti\b|ŞTİ\b|San\.|SAN\.|Tic\.|TİC\.|GmbH\b|Inc\b)")
UNION_NAME = re.compile(r"-(?:sen|iş|is)(?![^\W\d_])", re.IGNORECASE)
# "(1490–1588)", "(d. 1923)", "(?-1622)", "(1807, Develi – 1866)", "(d. 8 Eylül 1946, Savur)": not
# "(0532 ...)" nor "(2012 hırsızlık, ...)"
_YEAR, _AT = r"(?:1[0-9]{3}|20[0-2][0-9]|\?)", r"(?:,[ \t]*[^\W\d_]+(?:[ \t][^\W\d_]+)?)?"  # a year, ", a place"
_LIFE_DATES = re.compile(rf"[ \t]*\((?:d\.[ \t]*(?:[0-9]{{1,2}}[ \t.]+[^\W\d_]+[ \t.]+)?{_YEAR}{_AT}[ \t]*[-–—)]"
                         rf"|{_YEAR}{_AT}[ \t]*[-–—]|{_YEAR}[ \t]*\))")
# a numbered arithmetic word problem ("Problem 3: Ayşe'nin 24 bilyesi vardır. ... kaç bilyesi
# kalır?"): its people are made up
# or, opening an entry, the year its figure died alone ("Ali Kuşçu (ö. 1474, İstanbul)"; after a
# relative's name, "Dedem Hüseyin Kaya (ö. 2019)", it opens no entry: `life_dated_entry`)
_DIED = re.compile(rf"[ \t]*\(ö\.[ \t]*(?:[0-9]{{1,2}}[ \t.]+[^\W\d_]+[ \t.]+)?{_YEAR}{_AT}[ \t]*\)")
_PROBLEM_WORDS = ("Problem", "Soru", "Alıştırma", "PROBLEM", "SORU")
_PROBLEM_HEADER = re.compile(rf"(?<!\w)(?:{'|'.join(_PROBLEM_WORDS)})[ \t]*[0-9]{{1,3}}[ \t]*[:.)]")
_HOW_MANY = re.compile(r"(?<!\w)ka[çc](?:[ıi]nc[ıi]|tır|tir|ar)?(?!\w)", re.IGNORECASE)


def word_problem(text: str) -> bool:
    """A worksheet of numbered word problems asking "how many": single given names in it are
    made-up people."""
    if not any(word in text for word in _PROBLEM_WORDS):
        return False  # (one of the header's words, found by `in` before the header's regex reads every position)
    return _PROBLEM_HEADER.search(text) is not None and _HOW_MANY.search(text) is not None


def firm(doc: Doc, first: int, last: int) -> bool:
    """A firm's or a place's name, not a person: a trade's word right after it ("Tuzcuoğlu
    Elektrik"), a run of capitalised words ending in a legal form or an organisation's word
    ("Karadag Dagcilik ve Doga Sporlari Kulubu Dernegi", "Marmara Yapı Denetim A.Ş."), the "Ş."
    of an "A.Ş." before it, or a locative "-daki" after it ("Sultan Orhan'daki": a quarter's)."""
    text, spans, n = doc.text, doc.spans, len(doc.spans)
    start = spans[first][0]
    if doc.info(first).shape == "I" and text[max(0, start - 2) : start].upper() == "A.":
        return True
    suffix = doc.info(last).suffix
    if suffix:  # "Tarık Esen'in Rumeli Türkleri Derneği'ne": the name ends at its case ending
        return suffix[:4] in ("daki", "deki", "taki", "teki")
    j = last + 1
    while j < n and j - last <= 6 and _SPACES.fullmatch(text, spans[j - 1][1], spans[j][0]):
        info = doc.info(j)
        if j == last + 1 and _separate_body(doc, first, last, j):
            return False  # "Kızım Ayşegül Tunalı TEMA Vakfı'nın ...": a person, then the body they joined
        if (j == last + 1 == first + 1 and info.key in TRADE_WORDS and info.shape != "L") or "o" in info.flags \
                or ((info.shape == "I" or info.key in _LEGAL_KEYS) and _LEGAL_FORM.match(text, spans[j][0])):
            return True
        if info.shape not in "CU" and info.key != "ve":
            return False
        j += 1
    return j < n and j - last <= 6 and _LEGAL_FORM.match(text, spans[j - 1][1]) is not None


def _separate_body(doc: Doc, first: int, last: int, j: int) -> bool:
    """A given name and a surname, then a body's name that opens with an acronym in a mixed-case
    line or with a place ("Ayşegül Tunalı TEMA Vakfı", "Vahap Kocaman Kuşadası ... Derneği"), or
    after a relation or role word ("Komşumuz Bülent Arıkök İnsan Hakları Derneği'nin"): two names
    side by side, not one body named after a person."""
    after, surname = doc.info(j), doc.info(last).flags
    if last == first or "g" not in doc.info(first).flags:
        return False
    if first > 0 and person_word(doc.info(first - 1).key) and not any(c in surname for c in "cot") \
            and ("p" not in surname or "s" in surname):
        return True  # (a surname no list holds too, or a village's: "Komşumuz Bülent Arıkök İnsan Hakları Derneği")
    return "s" in surname and ((after.shape == "U" and doc.mode(j) == "mixed") or "p" in after.flags)


# an encyclopaedia entry's opening: one to four capitalised words, then life dates ("Yaşar Kemal
# (1923–2015), ...", "Aziz Sancar (d. 8 Eylül 1946, Savur), ...")
_ENTRY = re.compile(r"[ \t\"“']*(?:[A-ZÇĞİÖŞÜ][^\W\d_]*\.?[ \t]+){0,3}[A-ZÇĞİÖŞÜ][^\W\d_]+(?=[ \t]*\()")


def life_dated_entry(text: str, start: int) -> bool:
    """The paragraph around `start` opens with a name and its life dates: an encyclopaedia's
    entry on a public or historical figure, whose parents, origin, beliefs and trials it tells
    ("Annesi Ermeni asıllı ...", "1950'de siyasi nedenlerle tutuklanmış"), not a private
    person's data. Not where a relation or role word opens it ("Dedem ...")."""
    para = text.rfind("\n\n", 0, start)
    lo = 0 if para == -1 else para + 2
    name = _ENTRY.match(text, lo, min(len(text), lo + 80))
    dates = (_LIFE_DATES.match(text, name.end()) or _DIED.match(text, name.end())) if name is not None else None
    if name is None or dates is None or not any(c in dates.group() for c in "-–—dö"):
        return False  # (a year alone, "Hasan Kaya (1931)", is an age, not a life's span)
    # not a relative's, a role's or a title's ("Dedem Hasan Kaya ...", "Sayın Hasan Kaya ...")
    keys = [fold_key(w.rstrip(".")) for w in name.group().split()]
    return not any(person_word(k) or k in TITLES or k in CUES for k in keys)


def dated(doc: Doc, last: int) -> bool:
    """A life-date parenthesis right after the name, or after one or two more of its words the
    tagger left out ("Sabahattin Ali (1907-1948)"): encyclopaedic text about a public figure."""
    end = doc.spans[last][1]
    if "(" not in doc.text[end : end + 60]:
        return False
    for i in range(last, min(last + 3, len(doc.spans))):
        if i > last and not joined(doc, i - 1):
            return False
        if _LIFE_DATES.match(doc.text, doc.spans[i][1]):
            return True
    return False


def only_places(doc: Doc, first: int, last: int) -> bool:
    """Every word is a place the lexicons know and none a given name or surname ("Kayseri'nin",
    "Anadolu'ya", "Sivas Zara"), with no honorific after it: a place, not a person."""
    if last + 1 < len(doc.spans) and doc.info(last + 1).key in HONORIFICS:
        return False
    if first == last and doc.info(first).key in _cities():
        return True  # "Rize'nin", "Erzurum'un", "Kars": a province's name alone
    if first > 0:
        before = doc.info(first - 1)
        if before.key in _COMPASS and before.shape in "CU" and joined(doc, first - 1):
            return True  # "Orta Asya'ya", "Kuzey Afrika", "Doğu Karadeniz": a region
        if before.key.startswith(_PET):
            return True  # "kedimiz Pamuk'u", "köpeğim Karamel": an animal's name
    infos = doc.infos()
    if first == last and infos[first].suffix in _AT_FROM and "p" in infos[first].flags \
            and not (first > 0 and (infos[first - 1].key in CUES or infos[first - 1].key in TITLES)):
        return True  # "Alsancak'ta", "Aydın'dan": a place's locative or ablative
    if first == last and infos[first].suffix in _GENITIVE and _region_after(doc, last):
        return True  # "Karadeniz'in doğusunda", "Fırat'ın kıyısındaki", "Aydın'ın Efeler ilçesine": a place's part
    if first == last and "p" in infos[first].flags and _route_stop(doc, first):
        return True  # "Menemen – Aydın – Nazilli": a stop between two places
    if last > first and all("p" in infos[i].flags for i in range(first, last + 1)) \
            and all(_DASH.search(doc.text, doc.spans[i][1], doc.spans[i + 1][0]) for i in range(first, last)):
        return True  # "Selçuk – Aydın – Nazilli", "Erzincan-Kemah": a route
    return all((f := infos[i].flags) and ("p" in f or "v" in f) and "g" not in f and "s" not in f
               for i in range(first, last + 1))


_GENITIVE = frozenset(("in", "nin", "un", "nun"))  # folded, after an apostrophe
# a part of a land, a sea or a river, folded: what a place has and a person has not
_REGION_PARTS = ("dogusu", "batisi", "kuzeyi", "guneyi", "kiyisi", "kiyilari", "kesimi", "kesimleri", "sahili",
                 "sahilleri", "ovasi", "vadisi", "havzasi", "deltasi", "ilcesi", "ilceleri", "nufusu")


def _region_after(doc: Doc, i: int) -> bool:
    """One of the two words after token i is a part of a region ("doğusunda", "dağlık kesimlerinde")."""
    return any(doc.info(j).key.startswith(_REGION_PARTS) for j in range(i + 1, min(i + 3, len(doc.spans))))


def _route_stop(doc: Doc, i: int) -> bool:
    """Token i stands between two places with a dash on either side."""
    if not 0 < i < len(doc.spans) - 1:
        return False
    text, spans, infos = doc.text, doc.spans, doc.infos()
    return all("p" in infos[j].flags or "v" in infos[j].flags for j in (i - 1, i + 1)) \
        and _DASH.search(text, spans[i - 1][1], spans[i][0]) is not None \
        and _DASH.search(text, spans[i][1], spans[i + 1][0]) is not None


# "-li" of origin after a place's name, and the copulas that may follow it ("Rizeliyim", "Mardinliymiş")
_I_AM = re.compile(r"(?:[iu]|y[iu])m\Z")  # folded "-(y)Im" ("türkmenim", "turkuyum")
_ORIGIN_END = re.compile(r"(?:li|lu)(?:yim|yiz|yum|yuz|dir|dur|ymis|ymus|ler|lar)?\Z")


def origin_word(doc: Doc, first: int, last: int) -> bool:
    """One word that says where someone is from, a place's name + "-li" ("mardinli", "Rizeli",
    "Kosovalı"; "annem mardinli": a relation's origin), with no honorific after it: an origin,
    not a name (the lexicons list such words as rare given names and surnames). Or a last word
    that says "I am" of a people or a belief ("Iraklı Türkmenim", "Ahıska Türküyüm"): no surname
    takes the first person's copula."""
    own = doc.info(last)
    if "g" not in own.flags and _I_AM.search(own.key) and starts_with_term(own.key):
        return True
    if first != last or (last + 1 < len(doc.spans) and doc.info(last + 1).key in HONORIFICS):
        return False
    key = doc.info(first).key
    end = _ORIGIN_END.search(key)
    return end is not None and "p" in lexicon_flags().get(key[: end.start()], "")


# a word the lexicons list as a name that opens a verb idiom with the word after it ("sona er-":
# "SÜRESİ 2022'DE SONA ERMİŞ", "KAMPANYA 28.02'DE SONA ERER"): folded word -> the verb stems
_IDIOMS = {"sona": ("er",)}


# what a quoted name after which names a product or a series ("'Nevra' serisi havlular")
_PRODUCT_WORDS = frozenset(("serisi", "modeli", "markasi", "koleksiyonu", "urunu", "paketi", "kampanyasi", "projesi"))
_QUOTE_MARKS = "'\"‘’“”«»"


def quoted_product(doc: Doc, first: int, last: int) -> bool:
    """The name stands in quotes right before a product's or series' word ("'Nevra' serisi")."""
    s, e = doc.spans[first][0], doc.spans[last][1]
    text = doc.text
    if s == 0 or text[s - 1] not in _QUOTE_MARKS or text[e : e + 1] not in tuple(_QUOTE_MARKS) or last + 1 >= len(doc.spans):
        return False
    return doc.info(last + 1).key in _PRODUCT_WORDS


# a folded word's verb endings that no listed given name or surname has: a present tense ("duruyor",
# "alamıyoruz", chat's "diyolar"), a participle with a person ending ("ettiğim", "anlaştığımız"; not
# "-tiğin" of "Kültigin") and an ability form ("iletebilirsiniz")
_VERB_FORM = re.compile(r"(?:[iu]yo(?:r(?:um|sun|uz|sunuz|lar|du|dum|duk|mus|sa)?|m|z|lar|mus|du)"
                        r"|(?:di|ti|du|tu)g(?:im|imiz|iniz|i|u|um|umuz|unuz)"
                        r"|[ae]bil(?:ir|irim|irsin|iriz|irsiniz|irler|ecek|di))$")


def verb_form(key: str) -> bool:
    """The folded word `key` is a verb's form ("duruyor", "ettigim"), never a name."""
    return _VERB_FORM.search(key) is not None


def verb_idiom(doc: Doc, first: int) -> bool:
    """The name found from token `first` opens a verb idiom ("SONA ERMİŞTİR"), not a name; or
    it is a case ending after a number's apostrophe ("14.20'DEN SONRAKİ", "2022'DE")."""
    s = doc.spans[first][0]
    if s >= 2 and doc.text[s - 1] in "'’" and doc.text[s - 2].isdigit():
        return True
    stems = _IDIOMS.get(doc.info(first).key)
    return stems is not None and first + 1 < len(doc.spans) and doc.info(first + 1).key.startswith(stems)


# folded locative and ablative endings after an apostrophe (and "-daki", "the one at")
_AT_FROM = frozenset(("da", "de", "ta", "te", "dan", "den", "tan", "ten", "daki", "deki", "taki", "teki"))
_DASH = re.compile(r"[-–—]")


@lru_cache(maxsize=1)
def _cities() -> frozenset[str]:
    """Provinces whose name is no common given name (Aydın is), and the names people use for
    some of them (Urfa, Antep, Maraş, İzmit)."""
    return (provinces() - {"aydin"}) | {"urfa", "antep", "maras", "izmit"}


def public_figure(doc: Doc, first: int, last: int) -> bool:
    """A public or historical figure, or a test fixture's name ("Ali Veli"), whole or in part,
    also where the tagger took only part of it ("Adnan" of "Adnan Menderes", "Kemal Paşa'ya" of
    "Mustafa Kemal Paşa'ya"): the span with up to two joined words either side."""
    words = public_words()
    if any(doc.info(i).key not in words for i in range(first, last + 1)):
        return False  # a word no public name holds: no public name contains the span
    lo, hi, n = first, last, len(doc.spans)
    while lo > 0 and first - lo < 2 and joined(doc, lo - 1):
        lo -= 1
    while hi + 1 < n and hi - last < 2 and joined(doc, hi):
        hi += 1
    keys = [doc.info(i).key for i in range(lo, hi + 1)]
    whole, parts = public_names(), public_name_parts()
    for a in range(first - lo + 1):
        for b in range(last - lo + 1, len(keys) + 1):
            name = " ".join(keys[a:b])
            if name in whole or name in parts:
                return True
    return False


# a public figure's trade right before the name in the news ("Milli okçu Mete Gazoz", "Astronot Alper
# Gezeravcı", "Solist Kaan Tangöze", "milli güreşçimiz Taha Akgül"): an athlete's, artist's or
# politician's name in public life, not a private person's data
_PUBLIC_ROLES = frozenset(fold_key(w) for w in (
    "astronot astronotu solist vokalist şarkıcı futbolcu futbolcumuz güreşçi güreşçimiz okçu okçumuz atlet "
    "atletimiz yüzücü yüzücümüz boksör boksörümüz halterci haltercimiz voleybolcu voleybolcumuz basketbolcu "
    "tenisçi başantrenör milletvekili cumhurbaşkanı büyükelçi yönetmen aktör aktris").split())


def public_role(doc: Doc, first: int) -> bool:
    """A public figure's trade stands right before the name (see `_PUBLIC_ROLES`), or the text
    reports a match (see `_MATCH_REPORT`): its players, goalkeepers and referees."""
    prev = first - 1
    if prev >= 0 and doc.info(prev).key in _PUBLIC_ROLES \
            and _SPACES.fullmatch(doc.text, doc.spans[prev][1], doc.spans[first][0]) is not None:
        return True
    return not (prev >= 0 and doc.info(prev).key in CUES) and _match_report(doc.text)  # (not "oğlum Deniz")


# a match report's words ("derbiden 2-1 galip", "golleri", "kurtarışlarıyla", "deplasmandan",
# "en skorer", "penaltı"): two of them make the text sports news, whose players, goalkeepers and
# referees are public figures (a private player's injury at "halı saha maçında" has none of them)
_MATCH_REPORT = re.compile(r"(?<![\w-])[0-9]{1,2}-[0-9]{1,2}(?![\w-])[^\n.]{0,40}?(?:galip|mağlup|yen|galibiyet|berabere)|"
                           r"(?<!\w)(?:gol(?:leri|ü|u|ler)|kurtarış|skorer|deplasman|derbi|penaltı)", re.IGNORECASE)


@lru_cache(maxsize=8)  # (asked of each name a tagger pass keeps: the text's answer once)
def _match_report(text: str) -> bool:
    hits = _MATCH_REPORT.finditer(text)
    return next(hits, None) is not None and next(hits, None) is not None


def joined(doc: Doc, i: int) -> bool:
    """Tokens i and i+1 belong to one name: only a space or hyphen between them."""
    end, nxt = doc.spans[i][1], doc.spans[i + 1][0]
    if nxt - end == 1:  # most gaps: one character, which `_JOIN` takes when a space, tab or hyphen
        return doc.text[end] in " \t-"
    return bool(_JOIN.fullmatch(doc.text, end, nxt)) or (end == nxt)
