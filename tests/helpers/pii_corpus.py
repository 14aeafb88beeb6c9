"""A seeded, labelled corpus for the sensitivity detectors (owned by the sensitivity issue).

Positives: valid TCKNs, TR IBANs, Turkish phones, payment cards and e-mails in many written
forms (spaced, dashed, dotted, full-width and Arabic-Indic digits, split across messages),
embedded in Turkish and English sentences. Hard negatives: TCKNs and IBANs with wrong check
digits, order and invoice numbers, dates and date ranges, amounts, IP addresses, Luhn-invalid
16-digit numbers, handles without a domain. Used by tests and by bench/sensitivity_quality.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from fairgate.policies.detection.checksums import iban_tr_valid, luhn_valid, tckn_valid

FULLWIDTH = {str(d): chr(0xFF10 + d) for d in range(10)}
ARABIC_INDIC = {str(d): chr(0x0660 + d) for d in range(10)}


@dataclass(slots=True)
class Sample:
    parts: list[str]  # chat messages (classify_parts joins them with one character)
    labels: list[tuple[str, int, int]] = field(default_factory=list)  # spans in the joined text


def make_tckn(r: random.Random, valid: bool = True) -> str:
    while True:
        d = [r.randint(1, 9)] + [r.randint(0, 9) for _ in range(8)]
        d.append(((d[0] + d[2] + d[4] + d[6] + d[8]) * 7 - (d[1] + d[3] + d[5] + d[7])) % 10)
        d.append(sum(d) % 10)
        if not valid:
            d[r.choice([9, 10])] = (d[9] + r.randint(1, 9)) % 10
        s = "".join(map(str, d))
        if tckn_valid(s) == valid:
            return s


def make_iban(r: random.Random, valid: bool = True) -> str:
    """24 digits after "TR": 2 check digits + 5 bank + '0' + 16 account."""
    while True:
        bban = f"{r.randint(1, 999):05d}0" + "".join(str(r.randint(0, 9)) for _ in range(16))
        check = 98 - int(bban + "292700") % 97
        if not valid:
            check = (check + r.randint(1, 98)) % 100
        digits = f"{check:02d}{bban}"
        if iban_tr_valid(digits) == valid:
            return digits


def make_card(r: random.Random, valid: bool = True) -> str:
    prefix, length = r.choice([("4", 16), ("51", 16), ("55", 16), ("34", 15), ("37", 15),
                               ("9792", 16), ("6011", 16), ("2221", 16), ("4", 19)])
    body = prefix + "".join(str(r.randint(0, 9)) for _ in range(length - len(prefix) - 1))
    for last in "0123456789":
        if luhn_valid(body + last) == valid:
            return body + last
    raise AssertionError("unreachable")


def fmt_card(r: random.Random, n: str) -> str:
    style = r.random()
    if style < 0.3:
        return n
    sep = r.choice([" ", "-", " "])
    if len(n) == 15:
        return sep.join([n[:4], n[4:10], n[10:]])
    return sep.join(n[i : i + 4] for i in range(0, len(n), 4))


def fmt_iban(r: random.Random, d: str) -> str:
    tr = r.choice(["TR", "TR", "TR", "tr"])
    if r.random() < 0.3:
        return tr + d
    full = tr + d
    return " ".join(full[i : i + 4] for i in range(0, len(full), 4))


def make_phone(r: random.Random) -> str:
    first = r.choice(["5", "5", "5", "2", "3", "4"])
    area = first + "".join(str(r.randint(0, 9)) for _ in range(2))
    a, b, c = (f"{r.randint(0, 999):03d}", f"{r.randint(0, 99):02d}", f"{r.randint(0, 99):02d}")
    forms = [
        f"+90 {area} {a} {b} {c}", f"0{area} {a} {b} {c}", f"0{area}{a}{b}{c}",
        f"0 ({area}) {a}-{b}-{c}", f"+90-{area}-{a}-{b}{c}", f"(0{area}) {a} {b} {c}",
        f"0090 {area} {a} {b} {c}", f"+90{area}{a}{b}{c}", f"0{area}.{a}.{b}.{c}",
        f"+90 ({area}) {a} {b}{c}",
    ]
    if first == "5":
        forms.append(f"{area} {a} {b} {c}")
    return r.choice(forms)


def make_email(r: random.Random) -> str:
    names = ["ayse", "mehmet", "fatma", "ali", "zeynep", "john", "emily", "can", "elif", "murat"]
    surnames = ["yilmaz", "kaya", "demir", "sahin", "smith", "celik", "ozturk", "arslan"]
    domains = ["firma.com.tr", "gmail.com", "example.org", "sirket.com", "mail.co.uk", "edu.tr"]
    local = r.choice([f"{r.choice(names)}.{r.choice(surnames)}", r.choice(names) + str(r.randint(1, 99)),
                      f"{r.choice(names)}_{r.choice(surnames)}+ik", r.choice(names)])
    return f"{local}@{r.choice(domains)}"


def script_digits(r: random.Random, s: str) -> str:
    """Sometimes rewrite digits as full-width or Arabic-Indic (same length, as users paste)."""
    x = r.random()
    if x < 0.06:
        return "".join(FULLWIDTH.get(c, c) for c in s)
    if x < 0.12:
        return "".join(ARABIC_INDIC.get(c, c) for c in s)
    return s


def spaced_tckn(r: random.Random, t: str) -> str:
    x = r.random()
    if x < 0.7:
        return t
    if x < 0.85:
        return f"{t[:3]} {t[3:6]} {t[6:9]} {t[9:]}"
    return f"{t[:3]}.{t[3:6]}.{t[6:9]}-{t[9:]}"


POSITIVE_TEMPLATES = {
    "tckn": ["Müşterinin TC kimlik numarası {x} olarak kayıtlı.", "My Turkish ID number is {x}, please verify.",
             "T.C. Kimlik No: {x}", "Kimlik {x} için başvuru yapıldı.", "Applicant ID {x} was rejected."],
    "iban": ["Ödemeyi {x} numaralı hesaba yapın.", "Please wire the refund to IBAN {x} by Friday.",
             "IBAN: {x}", "Kira için hesap numaram {x} dır."],
    "phone": ["Beni {x} numaralı telefondan arayın.", "Call me at {x} after 5pm.", "Tel: {x}",
              "Acil durumda {x} aranmalı."],
    "card": ["Kart numaram {x}, son kullanma 12/27.", "Charge the card {x} for the renewal.",
             "Card: {x}", "Şu karttan çekin: {x} lütfen."],
    "email": ["Bana {x} adresinden ulaşabilirsiniz.", "Send the report to {x} today.", "E-posta: {x}",
              "CC {x} on the thread."],
}
NEGATIVE_TEMPLATES = [
    "Sipariş numaranız {x}, kargoya verildi.", "Order {x} has shipped.", "Fatura no {x} ödenmedi.",
    "Toplantı {x} tarihinde yapılacak.", "The meeting is on {x}.", "Tutar {x} olarak hesaplandı.",
    "Referans: {x}", "Ticket {x} was closed yesterday.", "Sunucu adresi {x} değişti.",
]


def make_negative(r: random.Random) -> str:
    kind = r.randrange(12)
    if kind == 0:
        return make_tckn(r, valid=False)
    if kind == 1:
        return fmt_iban(r, make_iban(r, valid=False))
    if kind == 2:
        return f"{r.randint(2020, 2026)}-{r.randint(1, 9999999):07d}"
    if kind == 3:
        return f"{r.randint(1, 28):02d}.{r.randint(1, 12):02d}.{r.randint(2000, 2030)}"
    if kind == 4:
        return (f"{r.randint(1, 28):02d}.{r.randint(1, 12):02d}.{r.randint(2000, 2030)} - "
                f"{r.randint(1, 28):02d}.{r.randint(1, 12):02d}.{r.randint(2000, 2030)}")
    if kind == 5:
        return f"{r.randint(1, 999)}.{r.randint(0, 999):03d}.{r.randint(0, 999):03d},{r.randint(0, 99):02d} TL"
    if kind == 6:
        return ".".join(str(r.randint(1, 255)) for _ in range(4))
    if kind == 7:
        return fmt_card(r, make_card(r, valid=False))
    if kind == 8:
        return "#" + str(r.randint(10_000_000, 9_999_999_999))
    if kind == 9:
        return "@" + r.choice(["kullanici", "destek", "fairgate"])
    if kind == 10:
        return f"{r.randint(2000, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}"
    return f"SP{r.randint(1, 9)}{''.join(str(r.randint(0, 9)) for _ in range(10))}X"


def make_positive(r: random.Random, kind: str) -> str:
    if kind == "tckn":
        return script_digits(r, spaced_tckn(r, make_tckn(r)))
    if kind == "iban":
        return script_digits(r, fmt_iban(r, make_iban(r)))
    if kind == "phone":
        return script_digits(r, make_phone(r))
    if kind == "card":
        return script_digits(r, fmt_card(r, make_card(r)))
    return make_email(r)


def sentences(r: random.Random, positive: Callable[[random.Random], tuple[str, str, int, int]],
              negative: Callable[[random.Random], str]) -> tuple[str, list[tuple[str, int, int]]]:
    """One to three sentences joined by spaces, each labelled (`positive`: kind, sentence, and
    where the item starts and ends in it) with probability 0.55, else `negative`; the text and
    its labels (kind, start, end)."""
    text = ""
    labels: list[tuple[str, int, int]] = []
    for _ in range(r.randint(1, 3)):
        if text:
            text += " "
        if r.random() < 0.55:
            kind, sentence, s0, e0 = positive(r)
            labels.append((kind, len(text) + s0, len(text) + e0))
            text += sentence
        else:
            text += negative(r)
    return text, labels


def _positive_sentence(r: random.Random) -> tuple[str, str, int, int]:
    kind = r.choice(list(POSITIVE_TEMPLATES))
    x = make_positive(r, kind)
    tpl = r.choice(POSITIVE_TEMPLATES[kind])
    start = tpl.index("{x}")
    return kind, tpl.replace("{x}", x), start, start + len(x)


def _negative_sentence(r: random.Random) -> str:
    x = make_negative(r)
    return r.choice(NEGATIVE_TEMPLATES).replace("{x}", x)


def make_sample(r: random.Random) -> Sample:
    """One to three sentences; about 60% carry one labelled item, some are split in two messages."""
    text, labels = sentences(r, _positive_sentence, _negative_sentence)
    if r.random() < 0.3:
        return _split(r, text, labels)
    return Sample([text], labels)


def _split(r: random.Random, text: str, labels: list[tuple[str, int, int]]) -> Sample:
    """Two messages: cut at a space (dropped; the join restores its place), or anywhere, often
    inside a labelled item (the join adds one character, so later spans move by one)."""
    spaces = [i for i, c in enumerate(text) if c == " "]
    if spaces and r.random() < 0.5:
        cut = r.choice(spaces)
        return Sample([text[:cut], text[cut + 1 :]], labels)
    if labels and r.random() < 0.7:
        _, s0, e0 = r.choice(labels)
        cut = r.randint(s0 + 3, e0 - 1)  # never inside the "TR" of an IBAN
    else:
        cut = r.randint(1, len(text) - 1)
    moved = [(k, s0 + (s0 >= cut), e0 + (e0 > cut)) for k, s0, e0 in labels]
    return Sample([text[:cut], text[cut:]], moved)


def make_corpus(seed: int, n: int) -> list[Sample]:
    r = random.Random(seed)
    return [make_sample(r) for _ in range(n)]
