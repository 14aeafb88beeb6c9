"""Where a special-category term stands inside a name or a machine's string rather than in a
statement about a person: a body's or a street's name ("Kayseri Çerkes Derneği", "Gürcüler Sk."),
a dish or thing named after a people ("Laz böreği"), a city's traffic ("trafik felç"), an e-mail
address or link, a table header's column name. `special_categories` skips such terms.
"""

from __future__ import annotations

import re


def in_a_bodys_name(text: str, end: int, kind: str) -> bool:
    """The term ending at `end` begins a body's name (an association's name is association's own
    data) or a street's; but a church named with a member's or congregant's word after it says
    the person's belief ("Ermeni Apostolik Kilisesi mensubudur", "Rum Ortodoks Kilisesi'ne gidiyor")."""
    if kind != "association" and (body := _BODY_AFTER.match(text, end)) is not None:
        church = text[body.end() - 6 : body.end()].lower() == "kilise"
        if not church or _CHURCH_MEMBER.match(text, body.end()) is None:
            return True
    return _STREET_AFTER.match(text, end) is not None


# after a church's name: its member or congregant ("Kilisesi mensubudur", "Kilisesi'ne gidiyor",
# "Kilisesi cemaatinden"; not "Kilisesi'ne giden yol")
_CHURCH_MEMBER = re.compile(
    r"\w*(?:['’]\w+)?[ \t]+(?:mensu[bp]|[üu]yes|cemaat)|\w*['’]?y?n?[ae][ \t]+(?:gid(?!en)|gitt|devam|ba[ğg]l[ıi])",
    re.IGNORECASE,
)


def a_things_name(text: str, start: int, end: int, kind: str) -> bool:
    """A dish or a thing named after a people ("Laz böreği", "Arnavut kaldırımı"), or a church,
    rite, liturgy or foundation by its people or language ("Ermeni kilisesi", "Süryanice ayin",
    "Süryani ayiniyle vaftiz", "Rum vakıfları"; a belief's or a body's): no one's origin; a city's or its
    traffic's standstill ("trafik felç", "şehir felç oldu"): no one's paralysis."""
    if kind == "ethnicity":
        return _DISH_AFTER.match(text, end) is not None or _RITE_AFTER.match(text, end) is not None
    jam = kind == "health" and text[start : start + 4].lower() in ("felç", "felc")
    return jam and _JAM_BEFORE.search(text, max(0, start - 20), start) is not None


# (a body's name may join two words with "ve" after its first: "Hemşin Kültür ve Dayanışma Derneği",
# "KÜRTÜN VE ÇEVRESİ ... DERNEĞİ"; not "Oğlum Ermeni ve Ermeni Apostolik Kilisesi'ne")
_BODY_AFTER = re.compile(
    r"(?:\w+(?:[ \t]+(?:[A-ZÇĞİÖŞÜ]\w*|ve|VE)){0,4}|(?:[ \t]+[A-ZÇĞİÖŞÜ]\w*){1,2}[ \t]+(?:ve|VE)"
    r"(?:[ \t]+[A-ZÇĞİÖŞÜ]\w*){1,2}|(?:[ \t]+[A-ZÇĞİÖŞÜ]\w*){0,2})[ \t]+(?:Derne[kğ]|Vakf|Kilise|Federasyon|Kültür[ \t]+Merkez|Cemaati|DERNE[KĞ]|VAKF|FEDERASYON)"
)
_DISH_AFTER = re.compile(
    r"[ \t]+(?:b[öo]re[ğgk]|tavu[ğgk]|ci[ğg]er|kald[ıi]r[ıi]m|salatas|pilav|sa[çc][ıi](?!\w)|kahve|"
    r"k[öo]fte|lokum|ekme[ğgk]|peynir|mant[ıi]s)",
    re.IGNORECASE,
)
# (in lower case too: "Ermeni kilisesinin vakfı", "Rum manastırı", "Süryanice ayin yapılan", and
# a community's foundations: "Ermeni vakıfları", "Rum vakfının")
_RITE_AFTER = re.compile(
    r"\w*[ \t]+(?:kilise|manast[ıi]r|ayin|liturji|vak[ıi]f|vakf)", re.IGNORECASE
)
_JAM_BEFORE = re.compile(
    r"(?<!\w)(?:trafi[kğ]\w*|ula[şs][ıi]m\w*|[şs]ehir|kent|yollar\w*)[ \t]+\Z", re.IGNORECASE
)
_STREET_AFTER = re.compile(
    r"\w*(?:[ \t]+[^\W\d_]+)?[ \t]+(?:sk|sok|cd|cad|mh|mah|blv)(?:\.|(?!\w))|"
    r"\w*(?:[ \t]+[^\W\d_]+)?[ \t]+(?:soka[kğ]|caddesi|mahallesi|bulvar)",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"\S+")


def in_address(text: str, start: int, end: int) -> bool:
    """The term is part of an e-mail address or a link ("b.kurtcebe@gmail.com", "…/kurt-festivali"):
    an address's letters, not a statement."""
    lo, hi = max(0, start - 64), end + 64
    if text.find("@", lo, hi) == -1 and text.find("://", lo, hi) == -1:
        return False  # (most terms: no address within reach, no token to read)
    lo = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start), text.rfind("\t", 0, start)) + 1
    token = _TOKEN.match(text, lo)
    return (
        token is not None
        and token.end() >= end
        and ("@" in token.group() or "://" in token.group())
    )


_HEADER = re.compile(r"[^\W\d]+(?:[,;|\t][^\W\d]+){3,}")


def header_cell(text: str, start: int) -> bool:
    """The term is a column's name in a table's header: the text's first line, only words
    joined by "_" and three or more separators ("personel_no,ad,soyad,sendika_kesintisi")."""
    end = text.find("\n")
    line = text if end == -1 else text[:end]
    return start < len(line) and "_" in line and _HEADER.fullmatch(line.strip()) is not None
