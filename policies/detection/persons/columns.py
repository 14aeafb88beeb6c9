"""Names in a table's name columns: the cells under `ad`, `soyad`, `Adı Soyadı`, `full_name`, or
one of them after a person's role (`veli_adi`, `delege_adi`), in a CSV, `;`/`|`/tab-separated or markdown table, or in the tuples after an SQL column list
(`INSERT INTO personel (ad, soyad, tckn) VALUES ('Şeyhmus', 'Acar', ...)`).

The header says what the cells are, so a cell needs only the shape of a name (one to four words
of letters, no digits), even in lower case (`3310;nurettin;bakırcı;...`) and for names no list
knows (`Ousmane,Sow`). Where the header is a surname or full-name column, or has both a given
name and a surname column, every such cell is a name; a lone `ad` / `isim` / `name` column may
name products or places, so there the column counts as people's names only when at least half
of its cells hold a given name or surname the lexicons know. Cells that are only common, place
or organisation words ("Merkez", "Sivas") are names only in a column that holds nothing else:
a surname's (`soyad`), or a given name's beside one, where a capitalised cell is a surname that
is a word or a place too ("Sarıkamış", "Ilıcak", "Evcimen").
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.persons.lexicon import NOT_NAMES, lexicon_flags, public_names
from fairgate.policies.detection.records import column_cells

# people a column's name may say the names are of ("ogrenci_adi", "veli_adi", "delege_adi",
# "sigortali_adi"; not "urun_adi", "kurs_adi": a product's or course's), folded
_ROLES = (r"[öo][ğg]renci|veli|delege|sigortal[ıi]|hasta|[üu]ye|personel|[çc]al[ıi][şs]an|m[üu][şs]teri|"
          r"al[ıi]c[ıi]|g[öo]nderen|yolcu|misafir|kirac[ıi]|s[üu]r[üu]c[üu]|aday|ba[ğg][ıi][şs][çc][ıi]|"
          r"anne|baba|dan[ıi][şs]an|kat[ıi]l[ıi]mc[ıi]|customer|patient|employee|guest|member|student")
_ROLE_PREFIX = re.compile(r"(?:" + _ROLES + r")_(?=ad|soyad|isim|soyisim|name|first|last|full|surname|given|family)")
# (RE2, in the trigger pass) a name column among a header's separators; the header is read here
COLUMN_LABELS = (
    r"(?:^|[\n,;|\t(])[ \t\"'`]*(?:(?:" + _ROLES + r")_)?(?:ad[ıiİI]?|soyad[ıiİI]?|ad[ıiİI]?[ _]?soyad[ıiİI]?|isim|soyisim|isim[ _]soyisim|"
    r"name|first_?name|last_?name|full_?name|surname|given_?name|family_?name)[ \t\"'`]*(?:[,;|\t)\n]|$)"
)
_SURE = frozenset(fold_key(w) for w in (
    "soyad", "soyadı", "ad_soyad", "adsoyad", "ad_soyadı", "adı_soyadı", "ad soyad", "adı soyadı", "isim_soyisim",
    "isim soyisim", "soyisim", "full_name", "fullname", "last_name", "lastname", "surname", "family_name"))
_GIVEN = frozenset(fold_key(w) for w in "ad adı adi isim name first_name firstname given_name givenname".split())
_CELL = re.compile(r"[^\W\d_]{2,}\.?(?:[ '’.\-]{1,2}[^\W\d_]+\.?){0,3}")
_WORD = re.compile(r"[^\W\d_]+")
_HEADER = re.compile(r"[ \t|]*[^,;|\t\n()]{1,30}(?:[ \t]*[,;|\t][ \t]*[^,;|\t\n()]{1,30}){1,40}[ \t|]*")
# words of test fixtures and seed data ("Deneme Kullanici", "Ornek Musteri", "Test User")
_FIXTURE = frozenset(fold_key(w) for w in (
    "test deneme örnek sample dummy example fake sahte kullanıcı müşteri user customer demo placeholder").split())
# a cell that says there is no value ("Yok", "Bilinmiyor", "Toplam")
_NO_VALUE = frozenset(fold_key(w) for w in (
    "yok boş bilinmiyor belirtilmemiş belirsiz diğer toplam genel none null unknown empty anonim gizli").split())


def find_column_names(text: str, hits: list[tuple[int, int]], limit: int = 32
                      ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(names, headers): (start, end) of the names in name columns of the tables whose headers
    the trigger pass saw (`hits`: where a name column label stands in a header line), and of
    those header lines (column names, never a person's)."""
    out: list[tuple[int, int]] = []
    headers: list[tuple[int, int]] = []
    for s, _ in hits:
        line_start = text.rfind("\n", 0, s + 1) + 1 if text[s : s + 1] != "\n" else s + 1
        if headers and headers[-1][0] == line_start:
            continue
        line_end = text.find("\n", line_start)
        line = (line_start, len(text) if line_end == -1 else line_end)
        out += _header_names(text, *line)
        headers.append(line)
        if len(out) >= limit:
            break
    # only a header of column names alone (not an SQL line with its values, not prose)
    return out[:limit], [(a, b) for a, b in headers if _HEADER.fullmatch(text, a, b)]


def _header_names(text: str, line_start: int, line_end: int) -> list[tuple[int, int]]:
    header = text[line_start:line_end]
    # (a person's role before the label says whose names: "veli_adi" is a name column as "adi" is)
    columns = [(line_start + m.start(), line_start + m.end(), _ROLE_PREFIX.sub("", fold_key(m.group().strip(" \t\"'`()"))))
               for m in re.finditer(r"[^,;|\t\n()]+", header)]
    labels = {key for _, _, key in columns}
    both = bool(labels & _GIVEN) and bool(labels & _SURE)
    out: list[tuple[int, int]] = []
    for start, end, key in columns:
        if key not in _SURE and key not in _GIVEN:
            continue
        sure = key in _SURE or both
        cells = [(pos, value) for pos, value in column_cells(text, start, end) if _name_shaped(value, sure)]
        known = [(pos, value) for pos, value in cells if _known(value)]
        if sure or 2 * len(known) >= len(cells):
            out += [(pos, pos + len(value)) for pos, value in cells]
        else:
            out += [(pos, pos + len(value)) for pos, value in known]
    return out


# columns whose cells are places, not people ("mahalle", "köy", "ilce", "city"), folded
_PLACE_COLUMNS = frozenset(fold_key(w) for w in (
    "mahalle mahallesi köy köyü belde ilçe ilce il şehir sehir semt kasaba city town district village "
    "province neighbourhood neighborhood").split())


def place_cells(text: str, headers: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of the cells under a header's place column ("mahalle;delege_adi;oy"): a
    neighbourhood or village named like a surname ("Kocatepe") is the row's place, not a person."""
    out: list[tuple[int, int]] = []
    for a, b in headers:
        for m in re.finditer(r"[^,;|\t\n()]+", text[a:b]):
            if fold_key(m.group().strip(" \t\"'`")) in _PLACE_COLUMNS:
                out += [(pos, pos + len(value)) for pos, value in column_cells(text, a + m.start(), a + m.end())]
    return out


def _name_shaped(value: str, sure: bool) -> bool:
    """One to four words of letters, none an organisation's word alone ("Ltd."), not all of them
    common, place or title words (`sure`, a column of names and nothing else: capitalised common
    or place words count, but no title word), and no public name, test fixture or empty value's word."""
    if not _CELL.fullmatch(value):
        return False
    keys = [fold_key(w) for w in _WORD.findall(value)]
    flags = lexicon_flags()
    if " ".join(keys) in public_names() or any(k in NOT_NAMES or k in _FIXTURE or k in _NO_VALUE for k in keys):
        return False
    if any("o" in (f := flags.get(k, "")) and "g" not in f and "s" not in f for k in keys):
        return False  # a firm in a buyer's column ("Ekinöz Gıda Ltd."): no person's name
    if sure and value[0].isupper() and not any(c in flags.get(k, "") for k in keys for c in "ot"):
        return True  # a surname that is a word or a place too ("Sarıkamış", "Ilıcak")
    return any(not (f := flags.get(k, "")) or "g" in f or "s" in f for k in keys)


def _known(value: str) -> bool:
    """The cell holds a given name the lexicons know ("Kadriye Sönmez", "Anıl Uz")."""
    flags = lexicon_flags()
    return any(len(k) >= 3 and "g" in flags.get(k, "") for k in map(fold_key, _WORD.findall(value)))
