"""Evasive layouts of the structured identifiers (issue 17): invisible characters between digit
groups, odd separators, unusual groupings, compatibility digits, obfuscated e-mails, and the
same values encoded (base64, hex, URL, HTML entities) or spelled in Turkish number words.

`evasive(r, kind)` returns (text, layout name) for one valid value of `kind`; each layout is
listed in `LAYOUTS[kind]` so recall can be reported per layout.
"""

from __future__ import annotations

import base64
import random

from tests.helpers.pii_corpus import make_card, make_iban, make_tckn

INVISIBLE = ["\u200e", "\u200f", "\u2061", "\u2062", "\u2063", "\u2064", "\u034f", "\ufe0f", "\u00ad",
             "\u200b", "\u0301", "\u202a", "\u2066"]
SEPARATORS = ["\n", "    ", "/", ",", ":", "|", "·", "\u2024", " / ", ", ", " - ", ".", "\t"]
SUPERSCRIPT = dict(zip("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹", strict=True))
MATH_BOLD = {str(d): chr(0x1D7CE + d) for d in range(10)}
FULLWIDTH = {str(d): chr(0xFF10 + d) for d in range(10)}
UNITS = ["sıfır", "bir", "iki", "üç", "dört", "beş", "altı", "yedi", "sekiz", "dokuz"]
GROUPINGS = {"4-4-3": (4, 4, 3), "5-6": (5, 6), "3-3-3-2": (3, 3, 3, 2), "2-3-3-3": (2, 3, 3, 3),
             "1x11": (1,) * 11}


def _groups(s: str, sizes: tuple[int, ...]) -> list[str]:
    out, i = [], 0
    for n in sizes:
        out.append(s[i : i + n])
        i += n
    return out


def _mapped(s: str, table: dict[str, str]) -> str:
    return "".join(table.get(c, c) for c in s)


def _tckn(r: random.Random, layout: str) -> str:
    t = make_tckn(r)
    if layout in GROUPINGS:
        sep = r.choice([" ", "-", ".", " "]) if layout != "1x11" else r.choice([" ", "-", ", "])
        return sep.join(_groups(t, GROUPINGS[layout]))
    if layout == "invisible":
        g = _groups(t, (3, 3, 3, 2))
        return "".join(x + r.choice(INVISIBLE) for x in g[:-1]) + g[-1]
    if layout == "separator":
        return r.choice(SEPARATORS).join(_groups(t, r.choice([(3, 3, 3, 2), (4, 4, 3), (5, 6)])))
    if layout == "superscript":
        return _mapped(t, SUPERSCRIPT)
    if layout == "math_bold":
        return _mapped(t, MATH_BOLD)
    if layout == "fullwidth_spaced":
        return " ".join(_groups(_mapped(t, FULLWIDTH), (3, 3, 3, 2)))
    return _encoded(r, t, layout)


def _encoded(r: random.Random, value: str, layout: str) -> str:
    if layout == "base64":
        return base64.b64encode(value.encode()).decode()
    if layout == "hex":
        return value.encode().hex()
    if layout == "url":
        return "".join(f"%{ord(c):02X}" for c in value)
    if layout == "html":
        return "".join(f"&#{ord(c)};" if r.random() < 0.5 else f"&#x{ord(c):x};" for c in value)
    if layout == "words":
        return " ".join(UNITS[int(c)] for c in value if c.isdigit())
    raise ValueError(layout)


def _phone(r: random.Random, layout: str) -> str:
    n = "5" + r.choice("0345") + "".join(str(r.randint(0, 9)) for _ in range(8))
    if layout == "bare":
        return n
    if layout == "bare_3_7":
        return f"{n[:3]}-{n[3:]}"
    if layout == "zero_prefixed":
        return f"0{n[:3]} {n[3:6]} {n[6:]}"
    if layout == "invisible":
        g = [n[:3], n[3:6], n[6:8], n[8:]]
        return "0" + "".join(x + r.choice(INVISIBLE) for x in g[:-1]) + g[-1]
    if layout == "separator":
        return f"0{n[:3]}{r.choice(SEPARATORS)}{n[3:6]}{r.choice(SEPARATORS)}{n[6:]}"
    return _encoded(r, f"0{n[:3]} {n[3:6]} {n[6:8]} {n[8:]}", layout)


def _card(r: random.Random, layout: str) -> str:
    c = make_card(r)
    if len(c) != 16:
        c = make_card(r)
        while len(c) != 16:
            c = make_card(r)
    g = [c[i : i + 4] for i in range(0, 16, 4)]
    if layout == "mixed_separators":
        return g[0] + r.choice("- .") + g[1] + r.choice("- .") + g[2] + r.choice("- .") + g[3]
    if layout == "invisible":
        return "".join(x + r.choice(INVISIBLE) for x in g[:-1]) + g[-1]
    if layout == "separator":
        return r.choice(SEPARATORS).join(g)
    return _encoded(r, " ".join(g), layout)


def _iban(r: random.Random, layout: str) -> str:
    full = "TR" + make_iban(r)
    g = [full[i : i + 4] for i in range(0, len(full), 4)]
    if layout == "lines":
        cut = r.randint(1, len(g) - 1)
        return " ".join(g[:cut]) + "\n" + " ".join(g[cut:])
    if layout == "invisible":
        return "".join(x + r.choice(INVISIBLE) for x in g[:-1]) + g[-1]
    return _encoded(r, " ".join(g), layout)


def _email(r: random.Random, layout: str) -> str:
    local = r.choice(["ali", "ayse.kaya", "mehmet_demir", "zeynep42", "john.smith"])
    domain, tld = r.choice([("ornek", "com"), ("firma", "com.tr"), ("sirket", "net"), ("mail", "org")])
    if layout == "brackets":
        return f"{local} [at] {domain} [dot] {tld.replace('.', ' [dot] ')}"
    if layout == "parens":
        return f"{local}(at){domain}.{tld}"
    if layout == "words":
        return f"{local} at {domain} dot {tld.replace('.', ' dot ')}"
    if layout == "spaced_at":
        return f"{local} @ {domain}.{tld}"
    if layout == "percent40":
        return f"{local}%40{domain}.{tld}"
    return _encoded(r, f"{local}@{domain}.{tld}", layout)


_MAKERS = {"tckn": _tckn, "phone": _phone, "card": _card, "iban": _iban, "email": _email}
LAYOUTS = {
    "tckn": [*GROUPINGS, "invisible", "separator", "superscript", "math_bold", "fullwidth_spaced",
             "base64", "hex", "url", "html", "words"],
    "phone": ["bare", "bare_3_7", "zero_prefixed", "invisible", "separator", "base64", "url", "words"],
    "card": ["mixed_separators", "invisible", "separator", "base64", "hex", "html"],
    "iban": ["lines", "invisible", "base64", "url"],
    "email": ["brackets", "parens", "words", "spaced_at", "percent40", "base64", "html"],
}


def evasive(r: random.Random, kind: str, layout: str | None = None) -> tuple[str, str]:
    """One valid `kind` value in an evasive layout: (text, layout)."""
    layout = layout or r.choice(LAYOUTS[kind])
    return _MAKERS[kind](r, layout), layout
