"""Identifiers found by where they stand in a record rather than by a word just before them:
SGK / retirement registry numbers after their registry's name, and tax numbers (VKN), SGK
numbers and birth dates in a CSV column, an SQL column list or a `key = value` pair named for
them (`vkn`, `vergi_no`, `sgk_sicil_no`, `dogum_tarihi`), and plates under a `plaka` column.
Whether a VKN is a person's or a company's is decided later (`institutional`).
"""

from __future__ import annotations

import re

from stdnum.tr import vkn as stdnum_vkn

from fairgate.policies.detection.identifiers import placeholder_date

Span = tuple[str, int, int]
_I = "[iİıI]"
_SGK = re.compile(
    # the registry's name, then its number's word in the same line ("SGK işe giriş bildirgesi
    # yapıldı. Sicil numarası ...", "Bağ-Kur kaydım ...", "SGM'de kayıtlı sicil ...")
    # (or "Sosyal güvenlik sicil no"; the number's word starts a word or a camel-case part ("sgkNo"),
    # not "no" in "Şenocak", and an employer's "işyeri sicil" is no person's)
    rf"(?<![^\W_])(?:(?:sgk|ssk|sgm|ba[gğ]\W?kur|emekl{_I}(?:[ \t]+sand{_I}[gğ]{_I})?|sosyal[ \t]+g[üu]venl{_I}k)"
    rf"[^\n0-9]{{0,40}}?(?:(?<![^\W\d_])|(?-i:(?<=[a-zçğıöşü])(?=[A-ZÇĞİÖŞÜ])))(?<!yer{_I}[ \t])"
    rf"(?:s{_I}c{_I}l|no|numara|kayd{_I}m?|kay{_I}t)"
    # an insured person's registry number, maybe their name between ("SİGORTALI: X Y, SİCİL NO ..."),
    # a pension's allocation number ("Tahsis No: 2019/00412")
    rf"|s{_I}gorta(?:l{_I})?[^\n0-9]{{0,40}}?s{_I}c{_I}l|tahs{_I}s[ \t]+(?:no|numara))"  # ("Tahsis numaranız: ...")
    # (a short clause may stand between: "SSK numarasını buldum sonunda: 3401 ..."; not a span of
    # years the record covers: "SSK KAYDINDA 1979-1992 ARASI")
    rf"[^\n0-9]{{0,24}}?(?<![0-9])(?!(?:19|20)[0-9]{{2}}[ \t]?[-/][ \t]?(?:19|20)[0-9]{{2}}(?![0-9]))"
    rf"([0-9](?:[ .\-/]?[0-9]){{6,15}})(?![0-9])"
    # or the registry's name right before a long number ("SGK: 16110047721983", "— SGK 0612 1907 3340
    # 218"): twelve digits or more, longer than any phone number the registry's name could stand before
    rf"|(?<![^\W_])(?:sgk|ssk)[ \t]*:?[ \t]*(?<![0-9])([0-9](?:[ .\-]?[0-9]){{11,15}})(?![0-9])",
    re.IGNORECASE)
# a registry's or a pension's words near the number (a letter on a pension claim names no registry)
_SGK_CONTEXT = re.compile(rf"(?<!\w)(?:sgk|ssk|sgm|ba[gğ]\W?kur|emekl{_I}|s{_I}gortal{_I}|sosyal[ \t]+g[üu]venl{_I}k|"
                          rf"ya[şs]l{_I}l{_I}k[ \t]+ayl{_I}|prim[ \t]+(?:g[üu]n|[öo]deme)|hizmet[ \t]+d[öo]k[üu]m)",
                          re.IGNORECASE)
_COLUMNS = {"vkn": "vkn", "vergi_no": "vkn", "vergino": "vkn", "vergi_numarasi": "vkn", "tax_id": "vkn",
            "sgk_sicil_no": "sgk", "sgk_no": "sgk", "ssk_no": "sgk", "ssk_sicil_no": "sgk",
            "emekli_sicil_no": "sgk", "bagkur_no": "sgk", "sgk_sicil": "sgk",
            "dogum_tarihi": "birth_date", "dogumtarihi": "birth_date", "dogum_tarih": "birth_date",
            "d_tarihi": "birth_date", "birth_date": "birth_date", "birthdate": "birth_date",
            "date_of_birth": "birth_date", "dob": "birth_date", "birth": "birth_date", "dogum": "birth_date", "doğum": "birth_date",
            "dogum_yili": "birth_date", "birth_year": "birth_date",
            "plaka": "plate", "plaka_no": "plate", "arac_plaka": "plate", "plate": "plate",
            "passport": "passport", "passport_no": "passport", "pasaport": "passport", "pasaport_no": "passport"}
_DATE = re.compile(r"[0-3]?[0-9][./-][01]?[0-9][./-](?:19|20)?[0-9]{2}|(?:19|20)[0-9]{2}-[01][0-9]-[0-3][0-9]")
# one or two letters and 6-9 digits, or 7-9 letters and digits with two digits or more
_PASSPORT = re.compile(r"[A-Z]{1,2}[0-9]{6,9}|(?=[A-Z0-9]*[0-9][A-Z0-9]*[0-9])(?=[A-Z0-9]*[A-Z])[A-Z0-9]{7,9}")
_YEAR = re.compile(r"(?:19|20)[0-9]{2}")
_PLATE = re.compile(r"(?:0[1-9]|[1-7][0-9]|8[01])[ \-]?[A-Za-z]{1,3}[ \-]?[0-9]{2,5}")  # a Turkish plate
# (a table's header may write the words apart: "SGK SİCİL", "Vergi No")
_COLUMN = re.compile(r"(?<![\w])(" + "|".join(c.replace("_", "[_ ]") for c in _COLUMNS) + r")(?![\w])", re.IGNORECASE)
_KEY_VALUE = re.compile(r"[\"']?[ \t]*(?:=|:)[ \t]*[\"']?([0-9]{7,13})(?![0-9])")
_KEY_DATE = re.compile(r"[\"']?[ \t]*(?:=|:)[ \t]*[\"']?([0-9][0-9./\-]{3,9})(?![0-9])")  # "birth":"2001-11-30"
_FIELD = re.compile(r"'(?:[^'\n]|'')*'|\"[^\"\n]*\"|[^,;|\t\n]+")
# a CSV whose header is split by one of ";", "|" or a tab alone keeps commas inside its cells
# ("Berrin Kaya (şahıs, eczacı);3805310698"): its rows are split by that separator only
_FIELD_BY = {sep: re.compile(rf"'(?:[^'\n]|'')*'|\"[^\"\n]*\"|[^{sep}\n]+") for sep in (";", "|", "\t")}
_SQL_VALUES = re.compile(r"\)[ \t]*VALUES[ \t]*", re.IGNORECASE)
# a tuple's values may call a function ("NOW()", "DATE('1983-03-17')")
_TUPLE = re.compile(r"\(((?:[^()\n]|\([^()\n]*\))*)\)")


# or the number first, in a letter from the registry: "34-2201-0451187 sicil numaralı hizmetleriniz"
_SICIL_AFTER = re.compile(rf"s{_I}c{_I}l[ \t]+(?:numaral{_I}|no['’]?lu|numaras{_I}yla)", re.IGNORECASE)
_NUMBER_BEFORE = re.compile(r"(?<![0-9])([0-9](?:[ .\-/]?[0-9]){7,15})[ \t]*\Z")


def find_registry_numbers(text: str, hits: list[tuple[int, int]], limit: int = 16) -> list[Span]:
    """("sgk", start, end) of numbers written after SGK / SSK / Bağ-Kur / Emekli Sandığı, or
    before "sicil numaralı" where the text names such a registry."""
    out: list[Span] = []
    for s, _ in hits:
        m = _SGK.match(text, s)
        if m is not None:
            out.append(("sgk", *m.span(1 if m.group(1) else 2)))
        elif _SICIL_AFTER.match(text, s) and _SGK_CONTEXT.search(text, max(0, s - 300), s + 300):
            before = _NUMBER_BEFORE.search(text, max(0, s - 24), s)
            if before is not None:
                out.append(("sgk", *before.span(1)))
        if len(out) >= limit:
            break
    return out


def _valid(kind: str, value: str) -> bool:
    if kind == "birth_date":  # a date, or a year alone in a birth column ("dogum" ... 1988)
        return bool(_DATE.fullmatch(value) or _YEAR.fullmatch(value)) and not placeholder_date(value)
    if kind == "plate":
        return _PLATE.fullmatch(value) is not None
    if kind == "passport":  # a table's passport column ("room;guest;passport": "EK4839217", "U19047753")
        return _PASSPORT.fullmatch(value.strip()) is not None
    digits = re.sub(r"[^0-9]", "", value)
    if kind == "vkn":
        return stdnum_vkn.is_valid(digits)
    return 7 <= len(digits) <= 16


def find_column_values(text: str, hits: list[tuple[int, int]], limit: int = 32) -> list[Span]:
    """(kind, start, end) of values under a `vkn` / `sgk_sicil_no` / `dogum_tarihi`-like column name."""
    out: list[Span] = []
    for s, _ in hits:
        m = _COLUMN.match(text, s)
        if m is None:
            continue
        kind = _COLUMNS.get(m.group(1).lower().replace(" ", "_").replace("i̇", "i"))
        if kind is None or " " in m.group(1) and not _table_header(text, m.start()):
            continue
        kv = (_KEY_DATE if kind == "birth_date" else _KEY_VALUE).match(text, m.end())
        if kv is not None and _valid(kind, kv.group(1)):
            out.append((kind, *kv.span(1)))
        out += _table_values(text, m, kind)
        if len(out) >= limit:
            break
    return out[:limit]


def _table_header(text: str, start: int) -> bool:
    """The line holding `start` is a table's header (two separators or more: "AD | SOYAD | SGK
    SİCİL"), not a form's "SGK SİCİL NO: ..." line."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line = text[line_start : len(text) if line_end == -1 else line_end]
    return sum(map(line.count, ",;|\t")) >= 2


def _table_values(text: str, m: re.Match[str], kind: str) -> list[Span]:
    """Values in the column's position that are valid for `kind`."""
    out: list[Span] = []
    for start, value in column_cells(text, m.start(), m.end()):
        if value and _valid(kind, value):
            out.append((kind, start, start + len(value)))
    return out


def column_cells(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """(offset, value) of the cells under the column name at text[start:end], unquoted: the
    CSV rows under a header line (until a blank line), or the tuples after an SQL column list."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    header = text[line_start:line_end]
    sql = _SQL_VALUES.search(header, end - line_start)
    if sql is not None:
        cols_open = header.rfind("(", 0, start - line_start)
        index = _count(header[cols_open + 1 : start - line_start])
        # the tuples after VALUES, on this line or the next ones, up to the statement's end
        values = line_start + sql.end()
        stop = text.find(";", values)
        stop = min(len(text), values + 20_000) if stop == -1 else stop
        rows = [(t.start(1), t.group(1)) for t in _TUPLE.finditer(text, values, stop)]
        field = _FIELD
    else:
        index = _count(header[: start - line_start])
        field = _field_of(header)
        rows, pos = [], line_end + 1
        while pos < len(text) and len(rows) < 200:
            nxt = text.find("\n", pos)
            nxt = len(text) if nxt == -1 else nxt
            if nxt == pos:
                break
            rows.append((pos, text[pos:nxt]))
            pos = nxt + 1
    out: list[tuple[int, str]] = []
    for base, row in rows:
        fields = [f for f in field.finditer(row) if f.group().strip()]
        if index < len(fields):
            f = fields[index]
            value = f.group().strip().strip("'\"")
            out.append((base + f.start() + f.group().index(value), value))
    return out


def _field_of(header: str) -> re.Pattern[str]:
    """The cell pattern of a CSV header's rows: its one separator's, or any of them."""
    used = [sep for sep in (",", ";", "|", "\t") if sep in header]
    return _FIELD_BY[used[0]] if len(used) == 1 and used[0] != "," else _FIELD


def _count(head: str) -> int:
    """How many fields stand before a column name in its header."""
    return sum(1 for f in _FIELD.findall(head) if f.strip())
