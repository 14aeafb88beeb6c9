"""Postal addresses abroad, as written for a parcel or a form: a postcode and a city, then the
country ("vul. Saksahanskoho 47, kv. 12, 01033 Kyiv, Ukraine", "Storgatan 14, 411 38 Göteborg,
Sverige", "Mühlenstraße 14\n50321 Brühl, Deutschland"), or the city before its postcode ("Odesa
65000, Ukraine"). No Turkish street word stands in them, so `postal` reads them from the
country's name back (the trigger pass finds it), and keeps them where they are a person's (the
same test as a Turkish address) and no firm's ("GmbH", "B.V.", "Ltd").
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


def address_abroad(text: str, start: int) -> tuple[int, int] | None:
    """(start, end) of the address ending in the country at `start`: from its clause's start
    (a label's colon, the line's or a field's start, at most 100 characters back) to the
    country's end; None where no postcode and city stand right before it, or a firm's is."""
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
