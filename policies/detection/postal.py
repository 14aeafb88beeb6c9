"""Postal addresses as people write them: village and locality forms ("Yukarıkışla köyü, Cami
yanı, No 3", "Dereboyu Mevkii"), site and block forms, postcodes, lower case and capitals, and
the usual Mah./Cad./Sk. forms -- tied to a person.

An address is found around an anchor (a street or locality word, or an "adres" label) as the
clause it stands in (to the line's end, a dash or slash between fields, or 140 characters),
when that clause has a house number, a postcode or a known place. It is a person's when a
person's name stands in the same record (three lines either side), or it is given as someone's
address ("adresim", "teslimat adresi", "kiralanan", "alıcı"); it is not when the text around
it is an institution's ("hizmet binası", "adresine yazılı olarak", "şubemiz").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fairgate.policies.detection.addresses import PLACEHOLDER, WORKPLACE
from fairgate.policies.detection.addresses_abroad import address_abroad
from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.lexicon import all_places

Span = tuple[str, int, int]
_I = "[iİıI]"
_ANCHOR = re.compile(
    rf"(?<!\w)(?:adres\w*|k[öo]y[üu]|mevk{_I}{_I}?|s{_I}tes{_I}|mahalles{_I}\w*|mahalle(?=[ \t]*[:/])|mah\.|mh\.|cad\w*|"
    rf"cd\.|sokak\w*|sok\.|"
    rf"sk\.|bulvar\w*|blv\.|blok)(?!\w)", re.IGNORECASE)
# (not an address's own abbreviation's dot: "Hacı Bayram Mah. Posta Cad. No:40", "ÇAMLIK MAH. MERAL SK.";
# nor an ordinal's: "Bahçelievler 7. Cadde 41/5", "2. Kat")
_CLAUSE_END = re.compile(r"\n| [—–-] | / |(?<!(?<!\w)(?i:mah|cad|sok|blv|bul|apt|sit))(?<!(?<!\w)(?i:mh|cd|sk|no|bl))"
                         r"(?<!(?<!\w)(?i:d|k))(?<![0-9])\. (?=[A-ZÇĞİÖŞÜ])|;")
_HOUSE = re.compile(r"(?<![0-9])(?:no\b[ \t:.]*[0-9]{1,5}|[0-9]{1,5}[ \t]*/[ \t]*[0-9]{1,4}|[0-9]{5}(?![0-9])|"
                    r"d(?:aire)?[ \t:.]*[0-9]{1,4}|kat[ \t:.]*[0-9]{1,3})", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{3,}")
_OWNED = re.compile(
    r"(?:adres(?:im|imiz)|yeni[ \t]+adres|teslimat[ \t]+adres|tebligat[ \t]+adres|ev[ \t]+adres|ikamet|"
    r"oturuyorum|yaşıyorum|kiralanan|al[ıi]c[ıi]|adres[ \t]*:|shipping|line1)", re.IGNORECASE)
_INSTITUTION = re.compile(
    r"(?:hizmet[ \t]+binas|adresine[ \t]+yaz|ba[sş]vuru|[sş]ubemiz|ofisimiz|merkezimiz|genel[ \t]+müdürlü|"
    r"belediye|müdürlü[gğ]ü|başkanlığı|kaymakamlığı|adliye|hastanesi|üniversitesi|noterli|mağazamız|"
    r"satıcı|fabrikamız|depomuz)", re.IGNORECASE)


def find_postal_addresses(text: str, hits: list[tuple[int, int]], names: Sequence[tuple[int, int]],
                          limit: int = 16) -> list[Span]:
    """("person_address", start, end) of addresses tied to a person; `hits`: the trigger pass's
    address anchors; `names`: person names found in the text."""
    out: list[Span] = []
    for s, _ in hits:
        if out and s < out[-1][2]:
            continue  # inside the address just found
        m = _ANCHOR.match(text, s)
        span = _clause(text, m) if m is not None else address_abroad(text, s)
        if m is not None and (_dark(text, m) or _ORGANISATION.match(text, m.end())):
            continue
        if span is None or (m is not None and (not _addressy(text, *span) or _ROOM.search(text, *span))):
            continue
        if m is not None and (_ROAD.search(text, *span) or _PARCEL.search(text, max(0, span[0] - 200), span[1] + 200)):
            continue
        if _personal(text, span[0], span[1], names):
            out.append(("person_address", *span))
            if len(out) >= limit:
                break
    return out


_WORD_BEFORE = re.compile(r"([^\W\d_]+)[ \t]+\Z")
# a village's or a site's name as part of a body's ("Çaybaşı Köyü Yardımlaşma ve Dayanışma Derneği",
# "YEŞİLYURT KÖYÜ MUHTARLIĞI", "Gülbahçe Sitesi Yönetimi"): that body's name, not anyone's address
_ORGANISATION = re.compile(
    rf"(?:[ \t]+[^\W\d_]+){{0,4}}?[ \t]+(?:derne[gğ]{_I}|muhtarl{_I}[gğ]{_I}|y[öo]net{_I}m{_I}|kooperat{_I}f{_I}|"
    rf"vakf{_I}|b{_I}rl{_I}[gğ]{_I}|cem{_I}yet{_I}|kul[üu]b[üu]|camii|okulu)(?!\w)", re.IGNORECASE)


# a clinic's room or an examination in the clause ("Nöroloji Polikliniği EMG tetkikiniz ... Blok C Kat 2'de",
# "B BLOK 2. KAT 3 NOLU ODADA"): where an appointment is, not anyone's home (a flat is a "daire", not an "oda")
_ROOM = re.compile(rf"[0-9][ \t]*(?:no['’]?lu|numaral{_I})?[ \t]*oda(?:da|ya)?(?!\w)|poliklini|tetkik|muayene", re.IGNORECASE)


# a stretch of a highway ("E-5 BAĞCILAR MEVKİİ", "TEM otoyolu Hasdal mevkii", "D-100 karayolu"): where a
# traffic record places a car, not anyone's home
_ROAD = re.compile(r"(?<![\w-])(?:E-?(?:5|80|90)|D-?[0-9]{3}|O-?[0-9]{1,2}|TEM)(?![\w-])|(?i:otoyol|otoban|karayolu)")
# a land registry's plot ("ADA/PARSEL: 412/9", "Parsel No: 7", "pafta"): a plot's locality, not an
# address (a deed's mere mention, "tapu işlemlerinde", is no plot)
_PARCEL = re.compile(rf"(?<!\w)(?:ada[ \t]*/[ \t]*parsel|parsel{_I}?[ \t]*(?:no|:)|pafta)", re.IGNORECASE)


def _dark(text: str, m: re.Match[str]) -> bool:
    """ASCII "koyu" is "köyü" (a village) only after the village's name ("yesilyurt koyu");
    otherwise it is the adjective "dark, devout" ("koyu tenli", "koyu MHP'li", "koyu Ortodoks")."""
    if m.group().lower() != "koyu":
        return False
    before = _WORD_BEFORE.search(text, max(0, m.start() - 40), m.start())
    return before is None or fold_key(before.group(1)) not in all_places()


def _clause(text: str, m: re.Match[str]) -> tuple[int, int] | None:
    """The address clause around an anchor: after a label's colon (or the line's start, or a
    field separator) up to the clause's end."""
    line_lo = text.rfind("\n", 0, m.start()) + 1
    lo = max(line_lo, m.start() - 80)
    if m.group().lower().startswith("adres"):
        colon = text.find(":", m.end(), m.end() + 12)
        lo = (colon if colon != -1 else m.end()) + 1
    else:
        for sep in _CLAUSE_END.finditer(text, lo, m.start()):
            lo = sep.end()
        colon = text.rfind(": ", lo, m.start())
        lo = colon + 2 if colon != -1 else lo
    end = _CLAUSE_END.search(text, m.end(), min(len(text), m.end() + 140))
    hi = end.start() if end else min(len(text), m.end() + 140)
    while lo < hi and text[lo] in " \t\"'":
        lo += 1
    while hi > lo and text[hi - 1] in " \t.,\"'":
        hi -= 1
    return (lo, hi) if hi - lo >= 10 else None


# a Dutch or a British postcode ("1073 TW Amsterdam", "London N16 9BS"): an address abroad with
# no country after it
_POSTCODE_ABROAD = re.compile(r"(?<![\w])(?:[0-9]{4}[ \t]?[A-Z]{2}[ \t]+[A-Z][a-z]|[A-Z]{1,2}[0-9][A-Z0-9]?[ \t][0-9][A-Z]{2}(?!\w))")


def _addressy(text: str, lo: int, hi: int) -> bool:
    if _HOUSE.search(text, lo, hi) or _POSTCODE_ABROAD.search(text, lo, hi):
        return True
    places = all_places()
    return sum(fold_key(w) in places for w in _WORD.findall(text, lo, hi)) >= 1 and \
        bool(re.search(r"(?i)k[öo]y|mevk|mah|sitesi", text[lo:hi]))


# a company's legal form ("Ltd. Şti.", "A.Ş.", "San. ve Tic."): an invoice's or a lease's party that is no person
_FIRM = re.compile(r"(?<!\w)(?:ltd\.|[şs]t[iİ]\.|a\.[şs]\.|san\.[ \t]+ve[ \t]+t[iİ]c\.|limited|anonim)", re.IGNORECASE)


def _personal(text: str, lo: int, hi: int, names: Sequence[tuple[int, int]]) -> bool:
    before = text[max(0, lo - 100) : lo]
    line_lo = text.rfind("\n", 0, lo) + 1
    if PLACEHOLDER.search(text, lo, hi) or WORKPLACE.search(text, max(0, lo - 12), min(len(text), hi + 20)):
        return False
    # the nearest party named before the address (in its record, or in the clause itself) is a firm
    firms = [f for f in _FIRM.finditer(text, max(0, lo - 160), hi) if _same_record(text, f.start(), lo)]
    if firms and (firms[-1].start() >= lo or not any(firms[-1].end() <= s < lo for s, _ in names)):
        return False
    near_name = any(max(0, lo - 250) <= s and e <= hi + 250 and _same_record(text, s, lo) for s, e in names)
    if not near_name and _INSTITUTION.search(text, max(line_lo, lo - 100), min(len(text), hi + 40)):
        return False
    if not near_name and _INSTITUTION.search(text, max(0, lo - 100), lo) and _same_record(text, max(0, lo - 100), lo):
        return False  # an institution's heading on the lines above ("İL SAĞLIK MÜDÜRLÜĞÜ\nADRES: ...")
    return near_name or bool(_OWNED.search(before))


def _same_record(text: str, a: int, b: int) -> bool:
    """No blank line between offsets a and b."""
    lo, hi = min(a, b), max(a, b)
    return "\n\n" not in text[lo:hi]
