"""Postal addresses abroad, as written for a parcel or a form: a postcode and a city, then the
country ("vul. Saksahanskoho 47, kv. 12, 01033 Kyiv, Ukraine", "Storgatan 14, 411 38 Göteborg,
Sverige", "Mühlenstraße 14\n50321 Brühl, Deutschland"), or the city before its postcode ("Odesa
65000, Ukraine"). No Turkish street word stands in them, so `postal` reads them from the
country's name back (the trigger pass finds it), and keeps them where they are a person's (the
same test as a Turkish address) and no firm's ("GmbH", "B.V.", "Ltd"). With no country, the
street-first order of a European address (a street, its house number, a comma, a postcode and
the city: "Venloer Str. 218, 50823 Köln", "ul. Mokotowska 12/4, 00-640 Warszawa") is one too.
"""

from __future__ import annotations

import re

# a country's name in its own language, in English and in Turkish (the trigger pass's family)
COUNTRIES = ("deutschland|germany|almanya|france|fransa|nederland|netherlands|hollanda|sverige|sweden|"
             "[iİı]sve[çc]|ukraine|ukrayna|united[ \\t]+kingdom|england|[iİı]ngiltere|[öo]sterreich|austria|"
             "avusturya|belgi[eëq]u?e?|belgium|bel[çc]ika|schweiz|suisse|switzerland|[iİı]svi[çc]re|italia|italy|"
             "italya|espa[ñn]a|spain|[iİı]spanya|danmark|denmark|danimarka|norge|norway|norve[çc]|polska|poland|"
             "polonya|usa|united[ \\t]+states|canada|kanada|russia|rusya|georgia|g[üu]rcistan|bulgaria|bulgaristan|"
             "greece|yunanistan|cyprus|k[ıi]br[ıi]s")
_COUNTRY = re.compile(rf"(?:{COUNTRIES})(?![^\W\d_])", re.IGNORECASE)
_POSTCODE = r"(?:[0-9]{3}[ \t]?[0-9]{2}|[0-9]{4,5}|[0-9]{4}[ \t]?[A-Z]{2}|[A-Z]{1,2}[0-9][A-Z0-9]?[ \t]?[0-9][A-Z]{2})"
_CITY = r"[^\W\d_][^\W\d_'’.\-]*(?:[ \t-][^\W\d_]+)?"
# the postcode and city right before the country (the text's end here is the country's start)
_BEFORE_COUNTRY = re.compile(
    rf"(?<![\w])(?:{_POSTCODE}[ \t]+{_CITY}|{_CITY}[ \t]+{_POSTCODE})(?:[ \t]+[^\W\d_]+)?,?[ \t]*\Z")
_FIRM = re.compile(r"(?<!\w)(?:GmbH|B\.V\.|Ltd|LLC|S\.A\.|S\.A\.S|Inc|AG|A\.Ş)(?!\w)")
# (RE2, in the trigger pass's "postal" family) a house number, a comma, a postcode, a city
STREET_FIRST = r"[0-9]{1,4}[a-z]?(?:/[0-9]{1,4})?,[ \t]+(?:[0-9]{5}|[0-9]{2}-[0-9]{3}|[0-9]{4})[ \t]+\pL"
# the same, read case-sensitively: a five-digit postcode, a Polish "00-640" or four digits that
# are no year; the city one or two capitalised words, no currency ("3, 15000 TL"), maybe the country
_NUMBER_POSTCODE_CITY = re.compile(
    r"[0-9]{1,4}[a-z]?(?:/[0-9]{1,4})?,[ \t]+(?:[0-9]{5}|[0-9]{2}-[0-9]{3}|(?!19|20)[0-9]{4})[ \t]+"
    r"(?!(?:TL|TRY|EUR|USD|GBP|CHF|Euro|Lira|Dolar)(?![^\W\d_]))[A-ZÇĞİÖŞÜ][^\W\d_]+(?:[ \t-][A-ZÇĞİÖŞÜ][^\W\d_]+)?"
    rf"(?:,?[ \t]+(?i:{COUNTRIES})(?![^\W\d_]))?")
# the street before its number, ending where the number starts: one to three capitalised words
# with the particles of a French, Spanish, Dutch or German name between, maybe after a street
# word written in lower case ("ul. Mokotowska", "rue de la Paix", "Venloer Str.", "Via Roma")
_STREET_BEFORE = re.compile(
    r"(?<![\w.])(?:(?:ul\.|rue|via|calle|avenue|av\.|str\.)[ \t]+)?"
    r"(?:[A-ZÇĞİÖŞÜ][^\W\d_]*\.?[ \t]+(?:(?:de|la|le|del|della|di|der|den|von|van|du|des)[ \t]+)*){1,3}\Z")


def address_abroad(text: str, start: int) -> tuple[int, int] | None:
    """(start, end) of the address ending in the country at `start`: from its clause's start
    (a label's colon, the line's or a field's start, at most 100 characters back) to the
    country's end; None where no postcode and city stand right before it, or a firm's is."""
    if text[start].isdigit():
        return _street_first(text, start)
    m = _COUNTRY.match(text, start)
    if m is None:
        return None
    line_lo = text.rfind("\n", 0, start) + 1
    if _BEFORE_COUNTRY.search(text[max(line_lo, start - 60) : start]) is None:
        return None
    lo = max(line_lo, start - 100)
    for sep in re.finditer(r": |; |\t|\|", text[lo:start]):
        lo_sep = lo + sep.end()
        if start - lo_sep >= 12:
            lo = lo_sep
    if _FIRM.search(text, max(0, lo - 60), m.end()):
        return None
    return lo, m.end()


def _street_first(text: str, start: int) -> tuple[int, int] | None:
    """(start, end) of a street-first address whose house number starts at `start`: from its
    street's first word to the city (and the country, where one follows); None where no street
    stands right before the number, or a firm's name is near."""
    if start and text[start - 1].isdigit():
        return None
    m = _NUMBER_POSTCODE_CITY.match(text, start)
    street = _STREET_BEFORE.search(text, max(0, start - 50), start) if m is not None else None
    if m is None or street is None or _FIRM.search(text, max(0, street.start() - 60), m.end()):
        return None
    return street.start(), m.end()
