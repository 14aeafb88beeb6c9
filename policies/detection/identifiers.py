"""Identifiers that need context: tax numbers (VKN, with its check digit), passports, vehicle
plates and birth dates. Each is matched as a context word followed, within a few characters,
by a value of the right shape (bounded gaps: linear time), so "plaka" or "doğum tarihi" decides
whether "34 ABC 123" or "12.03.1985" is personal data.
"""

from __future__ import annotations

import re
from datetime import date

from fairgate.policies.detection.gazetteer import fold_key
from fairgate.policies.detection.person_links import person_word

_GAP = r"[^\n0-9]{0,25}?"


def _starting_with(first: str, body: str, flags: int = 0) -> re.Pattern[str]:
    """`body` tried only at a character of `first`, the class every match of it starts with:
    without it Python's re enters each branch of a large alternation at every position of a
    window (~0.5 µs a character for `_BIRTH_BODY`); a lookahead fails at one test."""
    return re.compile(f"(?={first})(?:{body})", flags)


_VKN_BODY = (
    # (or a tax office's "V.D." / "VD" before its payer's number: "Kadıköy V.D. 1784005016")
    rf"(?<!\w)(?:vkn|vergi[ \t]+(?:kimlik[ \t]+)?(?:no|numaras[ıi]|numaram)|v\.?[ \t]?no|v\.?d\.?(?!\w)|tax[ \t]+(?:id|number|no))"
    # (not a TR IBAN's check digits and account after it: "V.D. Kaporayı TR18 0003 2008 ...", nor ten
    # digits of a longer grouped number: "VD 0090 260 265 65 62" is a phone)
    rf"{_GAP}(?<![0-9])(?<![Tt][Rr])([0-9](?:[ .\-]?[0-9]){{9}})(?![0-9]|[ .\-][0-9])"
)
_VKN = _starting_with("[vt]", _VKN_BODY, re.IGNORECASE)
# a tax number asked for, then given on the next line after a speaker's or a dash's label
_VKN_ANSWER_BODY = (r"(?<!\w)(?:vkn|vergi[ \t]+(?:kimlik[ \t]+)?(?:no|numara)\w*)[^\n0-9]{0,40}\n"
                    r"[^\n0-9]{0,25}?(?<![0-9])([0-9]{10})(?![0-9])")
_VKN_ANSWER = _starting_with("v", _VKN_ANSWER_BODY, re.IGNORECASE)
# the number first: "3831061847 vergi kimlik numaralı mükellef"
_VKN_BEFORE = re.compile(r"(?<![0-9])([0-9]{10})[ \t]+vergi[ \t]+(?:kimlik[ \t]+)?(?:numaral[ıi]|no['’]?lu)", re.IGNORECASE)
# a passport's number may come later in its sentence ("pasaportu ile kayıt oldum, numarası K48...")
# (a number's abbreviation may end in a dot before it: "pasaport no. P0982...", "passport (no. P44...)")
_PASSPORT_GAP = r"(?:[^\n0-9.!?]|\.(?![ \t\n])|(?<![^\W\d_])(?i:no|nr|num)\.[ \t]){0,60}?"
_PASSPORT_BODY = (
    # (also a booking's "PSP" / "PSPT" / "PPT", the last in capitals only: "ppt" is a slide file)
    rf"(?<!\w)(?:pasaport|passport|pspt?(?![a-z])|(?-i:PPT)(?![a-z]))\w*{_PASSPORT_GAP}(?<![A-Za-z0-9])([A-Z]{{1,2}}[ \-]?[0-9]{{6,9}}(?![0-9])(?:[A-Z](?![A-Za-z0-9]))?"
    # other countries' forms: letters and digits mixed ("NP7K2L8R5", "13AB48291"), or digits ("72 4419083")
    r"|(?=[A-Z0-9]{0,8}[A-Z])(?=[A-Z]{0,8}[0-9][A-Z]{0,8}[0-9])[A-Z0-9]{7,9}(?![A-Za-z0-9])"
    r"|[0-9]{2}[ ]?[0-9]{7}(?![0-9])"
    # or eight digits, right after a label's colon ("Pasaport: 91427586", "Passport #: 38271946")
    r"|(?<=[:#][ \t])[0-9]{8}(?![0-9])"
    # spoken or typed in groups ("u 41 88 20 97")
    r"|[A-Z][ ][0-9]{2,4}(?:[ ][0-9]{2,4}){2,3}(?![0-9]))"
    # (or a passport's machine-readable second line: its number, a check digit, the nationality
    # and the holder's birth date: "U270481638TUR8811046F...")
    r"|(?<![A-Za-z0-9])([UZS] ?[0-9]{8})(?=[0-9][A-Z]{3}[0-9]{7}[MF<]|(?![0-9]))"
)
_PASSPORT = _starting_with("[puzs]", _PASSPORT_BODY, re.IGNORECASE)
_NOT_PLATE = ("(?:TL|KG|GB|MB|KB|TB|CM|MM|KM|ML|LT|GR|MG|AM|PM|HP|KW|YTL|USD|EUR|GBP|ADT|OCA|MAR|NIS|MAY|HAZ|TEM|"
              "EYL|EKI|KAS|ARA|JAN|FEB|APR|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SAT|SUN|MON|TUE|WED|THU|FRI)(?![A-Z])")
_NOT_PLATE_LOWER = "(?:mhz|ghz|khz|bpm|rpm|fps|ppm|ltd|gbp|kgs)(?![a-z])"
_PLATE_BODY = (
    rf"(?<!\w)(?i:plaka|plate|araç|aracı|aracın|aracım|license plate)\w*{_GAP}"
    # (its letters in capitals, or in lower case in a chat that writes so: "araç gelicek: 41 sp 852", not a unit)
    r"(?<![0-9])((?:0[1-9]|[1-7][0-9]|8[01])[ \t-]?(?:[A-Z]{1,3}|(?!" + _NOT_PLATE.lower() + r")[a-z]{1,3})[ \t-]?[0-9]{2,4})(?![0-9])"
    # or the plate first: "06 FK 4821 plakalı aracım", "34 klm 907 plakali"
    r"|(?<![0-9])((?:0[1-9]|[1-7][0-9]|8[01])[ \t-]?[A-Za-z]{1,3}[ \t-]?[0-9]{2,4})[ \t]*(?=(?i:plaka))"
    # or alone, in a plate's own shape: a province code, two or three capitals, two to four digits
    # ("34 FVK 206", "06 DL 4417"), not a unit or a month ("12 MB 512", "22 NOV 2024")
    r"|(?<![\w.,:/`])((?:0[1-9]|[1-7][0-9]|8[01]) (?!" + _NOT_PLATE + r")[A-PR-VYZ]{2,3} [0-9]{2,4})(?![\w/`]|[.,:][0-9])"
    # or in lower case, three consonants ("34 kbn 518'i kapının önüne", "35 bvk 207 için ceza"): a
    # word or a unit of this shape has a vowel ("25 bin 300") but for a few of frequency and rate
    r"|(?<![\w.,:/`])((?:0[1-9]|[1-7][0-9]|8[01]) (?!" + _NOT_PLATE_LOWER + r")[b-df-hj-np-tv-z]{3} [0-9]{2,4})(?![\w/`]|[.,:][0-9])"
    # or a foreign car's, letters on both sides, after a plate's own word ("ARAÇ PLAKASI: EB-417-BB
    # (GÜRCİSTAN)", "Gürcistan plakalı HK-318-GE": Georgian, French, Italian)
    rf"|(?<!\w)(?i:plaka|plate)\w*{_GAP}(?<![A-Za-z0-9])([A-Z]{{2}}[ -][0-9]{{3}}[ -][A-Z]{{2}})(?![A-Za-z0-9])"
)
_PLATE = _starting_with("[0-8]|(?i:[pal])", _PLATE_BODY)
# a plate shown as a format's example ("Örnek: 34 ABC 123 formatında"), not anyone's car
_EXAMPLE = re.compile(r"(?<!\w)(?:örne[kğ]\w*|ornek\w*|example|e\.g\.|format\w*)", re.IGNORECASE)
_MONTHS = ("ocak|şubat|subat|mart|nisan|mayıs|mayis|haziran|temmuz|ağustos|agustos|eylül|eylul|ekim|kasım|kasim|"
           "aralık|aralik|january|february|march|april|may|june|july|august|september|october|november|december")
_DATE = (rf"(?:[0-3]?[0-9][./-][01]?[0-9][./-](?:19|20)[0-9]{{2}}|(?:19|20)[0-9]{{2}}-[01][0-9]-[0-3][0-9]"
         rf"|[0-3]?[0-9][ \t]+(?:{_MONTHS})[ \t]+(?:19|20)[0-9]{{2}})")
_SHORT_MONTH = (r"(?:oca|şub|sub|mar|nis|may|haz|tem|ağu|agu|eyl|eki|kas|ara|jan|feb|apr|jun|jul|aug|sep|oct|nov|dec)"
                r"\.?(?![^\W\d_]{2})")
# after a birth word a date may be short ("5 mayıs 79", "12/03/85") or month-first ("March 12, 1985")
_BIRTH_DATE = (rf"(?:{_DATE}|[0-3]?[0-9][./-][01]?[0-9][./-][0-9]{{2}}(?![0-9])"
               rf"|[0-3]?[0-9][ \t]+(?:{_MONTHS})[ \t]+['’]?[0-9]{{2}}(?![0-9])"
               rf"|(?:{_MONTHS})[ \t]+[0-3]?[0-9],?[ \t]+(?:19|20)[0-9]{{2}}"
               # an airline's "03MAR1991"
               r"|[0-3][0-9](?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)(?:19|20)?[0-9]{2}(?![0-9])"
               # a passport's or ID card's short month, maybe in two languages ("25 TEM 1967", "17 MAY/MAY 1992")
               rf"|[0-3]?[0-9][ \t]+{_SHORT_MONTH}(?:[ \t]?/[ \t]?[a-zçğış]{{3}}\.?)?[ \t]+(?:19|20)[0-9]{{2}}"
               # a month and a year ("doğum Mart 1987", "DOB: June 1990")
               rf"|(?:{_MONTHS})[ \t]+(?:19|20)[0-9]{{2}}(?![0-9]))")
# the value may follow on the next line, after a speaker or field label ("...doğum tarihiniz?\nMüşteri: 12.07.1985")
# (a chat line may open with its time: "[16:20] Müşteri: 7 mart 1985")
_BIRTH_GAP = r"[^\n0-9]{0,30}?(?:\n(?:\[?[0-2]?[0-9][:.][0-5][0-9]\]?)?[^\n0-9]{0,25}?)?"
_BIRTH_BODY = (
    rf"(?<!\w)(?:do[gğ]um[ \t]+(?:yeri[ \t]*(?:/|ve)[ \t]*)?tarih\w*|d\.[ \t]?t\.|doğumlu|doğdu|doğdum|born|"
    rf"date[ \t_]+of[ \t_]+birth|dob|bday|birthday|birth[ \t_]?date|dogum[ \t_]+tarih|d[ \t]?\.[ \t]?t[ \t]?\.|"
    rf"do[gğ]\.[ \t]?t\.|d\.[ \t]?tarih|do[gğ]\.(?=[ \t]*[0-9])|d\.[ \t]?t(?=[ \t]*:))\w*{_BIRTH_GAP}"  # (and "D.T: 14.03.2021")  # (and "Doğ. 14.08.1983")
    rf"({_BIRTH_DATE})"
    # "doğum" alone, or one's birthday, right before a full date ("Doğum: 12 Aralık 2016, Hakkari",
    # "doğum günüm 9 mayıs 1998"; not "doğum izni 12.03.2024"), and "d." before one ("(d. 17.01.1949)")
    # (a particle between: "doğum günüm aslında 14 mart 1996")
    rf"|(?<!\w)do[gğ]um(?:[ \t]+g[üu]n[üu]m?(?:[ \t]+(?:asl[ıi]nda|ise|de|da|resmen|ger[çc]ekte))?)?[ \t]*[:=]?[ \t]*({_BIRTH_DATE})"
    # one's birthday's day and month ("Zehra'nın doğum günü 7 Mart'ta", "doğum günüm 3 nisan")
    rf"|(?<!\w)do[gğ]um[ \t]+g[üu]n[üu](?:m|n|müz|muz)?[ \t]*[:=]?[ \t]*([0-3]?[0-9][ \t]+(?:{_MONTHS})(?![^\W\d_]))"
    rf"|(?<![\w.])d\.[ \t]?({_BIRTH_DATE})"
    # "d. 1952" in a list (not "(d. 1907, ...)", an encyclopaedia's life dates), "doğum 1994"
    r"|(?<![\w.(])d\.[ \t]?((?:19|20)[0-9]{2})(?![0-9]|[ \t]*(?:[-–][ \t]*[0-9]|,))"
    # (a comma after "doğum 1975" too, in a record: "Şahin Eroğlu, doğum 1975, sağ gözünde ..."; not
    # an entry's "doğum 1907, ölüm 1980")
    r"|(?<![\w.(])do[gğ]um[ \t]?((?:19|20)[0-9]{2})(?![0-9]|[ \t]*(?:[-–][ \t]*[0-9]|[,;][ \t]*(?:[öo]l|d\.)))"
    # a date or year, then "doğmuşum" / "doğmuş" / "doğdum" (not an encyclopaedia's "doğmuştur" or "dünyaya geldi")
    # (only forms that start with a digit: a month-first form tried at every letter costs too much)
    rf"|((?:{_DATE})|[0-3]?[0-9][ \t]+(?:{_MONTHS})|(?<![0-9])(?:19|20)[0-9]{{2}})['’]?\w{{0,3}}(?:[ \t]+[dt][ae])?[ \t]+"
    # (or "when / the day she was born", "I came into the world": "6 Aralık 2003'te doğduğunda")
    r"(?:do[gğ](?:mu[şs]um|mu[şs](?!t)|dum|du[gğ]u\w*)|d[üu]nyaya[ \t]+gel(?:dim|mi[şs]im|di[gğ]\w+))(?!\w)"
    # (or a full date, then a few words, a place or the night's weather, before a first-person "doğdum" /
    # "doğmuşum": "7 Ekim 1990'da Rize'de, fırtınalı bir gecede doğmuşum"; the writer's own birth)
    rf"|({_DATE})['’]?\w{{0,3}}(?:,?[ \t]+[^\W\d_]+(?:['’][^\W\d_]{{1,5}})?){{1,5}}"
    r"[ \t]+(?:do[gğ](?:mu[şs]um|dum)|d[üu]nyaya[ \t]+gel(?:dim|mi[şs]im))(?!\w)"
    # a full date, maybe a place between, then "doğdu" / "doğmuş" ("3 Mart 2019'da doğdu", "17 Şubat 1949'da
    # Tokat'ta doğmuş"): a day's date is a family's record; an encyclopaedia gives a year ("1881'de Selanik'te doğdu")
    # (or "dünyaya geldi", and the time of day between: "2 kasım 2026 sabahı dünyaya geldi")
    # (or a year, where a relative is told of: "Babaannem ... 1941'de Sivas Zara'da doğdu"; a place may
    # be a province and a district)
    rf"|(?P<told>{_DATE}|(?<![0-9])(?:19|20)[0-9]{{2}})['’]?\w{{0,3}}(?:(?:[ \t]+[A-ZÇĞİÖŞÜ][^\W\d_]{{1,15}})?[ \t]+[A-ZÇĞİÖŞÜ][^\W\d_]{{1,15}}['’]\w{{1,4}}"
    rf"|[ \t]+(?:sabah|ak[şs]am|gece|[öo][gğ]le)\w{{0,4}})?"
    # (and a birth announcement's weight: "4 Aralık 2025 sabahı 3.180 gram olarak dünyaya geldi")
    r"(?:[ \t]+[0-9][0-9.,]{0,5}[ \t]*(?:gram|gr|g|kg|kilo)\.?(?:[ \t]+olarak)?)?"
    r"[ \t]+(?:do[gğ](?:du|mu[şs])|d[üu]nyaya[ \t]+gel(?:di|mi[şs]))(?!\w)"
    # a date or year, maybe its month or a place between, then "doğumlu" ("1991 Ağustos doğumluyum",
    # "12/04/1986 Keçiören doğumlu")
    rf"|((?:{_DATE}|(?<![0-9])(?:19|20)?[0-9]{{2}})(?:[ \t]+(?:{_MONTHS}))?)['’]?(?:[ \t]+[A-ZÇĞİÖŞÜ][^\W\d_]{{2,15}})?"
    # (not a cohort: "2006 doğumlu yükümlülerin", "1990 doğumlular")
    r"[ \t]*(?:doğumlu|dogumlu|tarihinde[ \t]+do[gğ])(?!l[ae]r|[ \t]+[^\W\d_]+l[ae]r(?:[ıi]n|[ıi])?(?!\w))"
    # a year alone after "doğum:" or a birth-year key ("dogum_yili: 1992", "doğum: 1996"), or before "doğdum"
    # (not "doğdu": encyclopaedic text gives public figures' birth years)
    r"|(?:doğum|dogum)(?:[ \t_]+y[ıi]l[ıi])?[\"']?[ \t]*[:=][ \t]*[\"']?((?:19|20)[0-9]{2})(?![0-9])"
    r"|(?<![0-9])((?:19|20)[0-9]{2})['’]?\w{0,3}[ \t]+(?:y[ıi]l[ıi]nda[ \t]+)?do[gğ]dum(?!\w)"
    # the date an ID card or the civil registry gives ("nüfusta 1 temmuz 1961 yazıyo", "kimlikte 1990 görünüyor")
    rf"|(?<!\w)(?:n[üu]fus(?:ta|umda|unda)|kimli[gğk](?:te|imde|inde))[ \t]+({_BIRTH_DATE}|(?:19|20)[0-9]{{2}})"
    r"(?![0-9])['’]?\w{0,3}[ \t]+(?:yaz|g[öo]r[üu]n|diye|olarak|kay[ıi]tl)"
    # a passport's machine-readable line: the holder's YYMMDD after the nationality, then its check
    # digit, the sex and the expiry ("U270481638TUR8811046F3102175<<...")
    r"|(?<=[0-9][A-Z<]{3})([0-9]{2}[01][0-9][0-3][0-9])(?=[0-9][MF<][0-9]{7})"
    # an HL7 message's patient segment: the birth date (PID-7, YYYYMMDD maybe with a time) is the
    # field before the sex ("PID|1||...||KALKAN^SEVİM||19790523|F|", or the segment's last: "...||20010917|M")
    r"|(?<=\|)((?:19|20)[0-9]{2}[01][0-9][0-3][0-9])(?=[0-9]{0,6}\|[MFUOA](?:\||$|\n))"
)
_BIRTH = _starting_with("[dbnk0-9]", _BIRTH_BODY, re.IGNORECASE)


# a form's or a fixture's empty date ("01.01.1900", "1900-01-01", HL7's "19000101"), nobody's birth
_PLACEHOLDER_DATE = re.compile(r"0?1[./-]0?1[./-]1900|1900-0?1-0?1|19000101")


def placeholder_date(value: str) -> bool:
    return _PLACEHOLDER_DATE.fullmatch(value.strip()) is not None


# a child or a relative told of ("Oğlum Aybars ...", "kızımız ...", "oysa kız ...", "Rahmetli babam ..."): a
# family's record, where a biography tells a public figure's birth the same way ("... 1943'te doğdu")
_KIN_WORDS = frozenset(("kiz", "oglan", "bebek", "cocuk", "rahmetli"))
_WORDS = re.compile(r"[^\W\d_]+")


def _told_of_kin(text: str, start: int) -> bool:
    """A relation or role word (`person_links.person_word`) in the 60 characters before the date."""
    keys = [fold_key(w) for w in _WORDS.findall(text, max(0, start - 60), start)]
    return any(k in _KIN_WORDS or person_word(k) for k in keys)


# a full date right after a person's name, in brackets or after a dash, ending its item ("AYŞEGÜL
# TUNÇBİLEK (03.09.1962)", "Nesrin Tümer – 28 Ekim 1961 (0533 ...)"): a wristband's or a list's birth
# date; life dates are a range ("(1907-1948)") and a meeting's date has its hour after it
_DATE_AFTER_NAME = re.compile(rf"[ \t]*(?:\([ \t]*|[–—-][ \t]*)({_DATE})(?=[ \t]*(?:[);,(\n]|\.(?!\w)|\Z))", re.IGNORECASE)


def dates_after_names(text: str, names: list[tuple[int, int]], found: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """("birth_date", start, end) of a full date written right after one of `names`, unless
    `found` has it already."""
    known = {s for k, s, _ in found if k == "birth_date"}
    return [("birth_date", *m.span(1)) for _, e in names
            if (m := _DATE_AFTER_NAME.match(text, e)) is not None and m.start(1) not in known
            and not placeholder_date(m.group(1))]


def dates_after_passports(text: str, found: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """("birth_date", start, end) of a full date right after a passport number, after a dash or
    in brackets and ending its item, as a traveller list writes it ("Kyoko Nishimura — JP
    pasaport TZ1184097 — 12.06.1978"); not a year to come (the passport's expiry)."""
    passports = [(s, e) for k, s, e in found if k == "passport"]
    if not passports:
        return []
    dates = dates_after_names(text, passports, found)
    this_year = date.today().year
    return [d for d in dates if (m := _YEAR.search(text, d[1], d[2])) is not None and int(m.group()) <= this_year]


_YEAR = re.compile(r"(?:19|20)[0-9]{2}(?![0-9])")


def vkn_valid(digits: str) -> bool:
    """Vergi Kimlik No: 10 digits; the last is a check digit over the first nine."""
    if len(digits) != 10 or not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(digits[:9]):
        tmp = (int(ch) + 9 - i) % 10
        v = (tmp * 2 ** (9 - i)) % 9
        if tmp != 0 and v == 0:
            v = 9
        total += v
    return (10 - total % 10) % 10 == int(digits[9])


def _windows(text: str, hits: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merged windows around context triggers: 40 characters before, 80 after."""
    out: list[tuple[int, int]] = []
    for s, e in hits:
        lo, hi = max(0, s - 40), min(len(text), e + 80)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def vkn_spans(text: str, hits: list[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """(start, end, valid) of every number written after a tax-number context word; even a bad
    one is a tax number, not a phone. `hits`: the trigger pass's context words. A number that
    answers on the next line ("vergi kimlik numaranızı alabilir miyim?\nmüşteri: 9235446910")
    counts only with its check digit."""
    windows = _windows(text, hits)
    out = [(*m.span(1), vkn_valid(digits := re.sub(r"[^0-9]", "", m.group(1))) and digits not in _COUNTING)
           for lo, hi in windows for rx in (_VKN, _VKN_BEFORE) for m in rx.finditer(text, lo, hi)]
    return out + [(*m.span(1), True) for lo, hi in windows for m in _VKN_ANSWER.finditer(text, lo, hi)
                  if vkn_valid(m.group(1)) and m.group(1) not in _COUNTING and not any(s == m.start(1) for s, _, _ in out)]


_COUNTING = ("1234567890", "0123456789")  # a test's or a form's made-up number, though its check digit fits


# a list's next passport, of the first one's series ("FE918264 and FE918265", "TZ1184097 — 12.06.1978\n2)
# Daiki ... — TZ1184098"): a family's or a group's documents, given once after one "pasaport"
_PASSPORT_SHAPED = re.compile(r"(?<![\w.,:/-])([A-Z]{0,2})([0-9]{2})( ?)([0-9]{4,7})(?![\w/-]|[.,:][0-9])")
_SERIES_REACH = 240


def _series(value: str) -> tuple[str, str, str, int] | None:
    """A passport number's series: its letters, its layout and its length (and, for digits
    alone, their first two: a country's series, "72 4419083")."""
    m = _PASSPORT_SHAPED.fullmatch(value)
    if m is None:
        return None
    letters, head, gap, rest = m.groups()
    return letters, "" if letters else head, gap, len(rest)


def passport_series(text: str, found: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """("passport", start, end) of numbers of a found passport's series written after it."""
    out: list[tuple[str, int, int]] = []
    for kind, s, e in found:
        if kind != "passport" or (series := _series(text[s:e])) is None:
            continue
        for m in _PASSPORT_SHAPED.finditer(text, e, e + _SERIES_REACH):
            if _series(m.group()) == series and not any(a < m.end() and m.start() < b for _, a, b in found + out):
                out.append(("passport", *m.span()))
    return out


def find_identifiers(text: str, hits: list[tuple[int, int]], limit: int = 16) -> list[tuple[str, int, int]]:
    """("passport" | "plate" | "birth_date", start, end) findings near the context triggers."""
    out: list[tuple[str, int, int]] = []
    for lo, hi in _windows(text, hits):
        for kind, rx in (("passport", _PASSPORT), ("plate", _PLATE), ("birth_date", _BIRTH)):
            for m in rx.finditer(text, lo, hi):
                group = next(g for g in range(1, (rx.groups or 1) + 1) if m.group(g) is not None)
                if kind == "plate" and group >= 3 and _EXAMPLE.search(text, max(0, m.start() - 30), m.start()):
                    continue
                if kind == "birth_date" and (placeholder_date(m.group(group))
                                             or m.group("told") is not None and not _told_of_kin(text, m.start())):
                    continue
                out.append((kind, *m.span(group)))
                if len(out) >= limit:
                    return out
    return out + passport_series(text, out)
