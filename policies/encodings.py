"""Values hidden in encodings: base64, hex, URL-encoding and HTML entities are decoded (bounded:
at most `MAX_DECODED` characters per text) and scanned again; Turkish number words are read as
digits ("beş yüz otuz iki altı yüz on dört ..." → "532 614 ..."). A finding inside a decoded run
is reported over the whole run in the text.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from urllib.parse import unquote

MAX_DECODED = 64 * 1024
_B64 = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){8,}(?![0-9A-Fa-f])")
_URL = re.compile(r"[^\s<>\"']{0,200}%[0-9A-Fa-f]{2}[^\s<>\"']{0,400}")
_HTML = re.compile(r"(?:&#?[0-9A-Za-z]{1,8};[^<>&\n]{0,20}){2,}")
_UNITS = {"sıfır": 0, "bir": 1, "iki": 2, "üç": 3, "dört": 4, "beş": 5, "altı": 6, "yedi": 7,
          "sekiz": 8, "dokuz": 9}
_TENS = {"on": 10, "yirmi": 20, "otuz": 30, "kırk": 40, "elli": 50, "altmış": 60, "yetmiş": 70,
         "seksen": 80, "doksan": 90}
_NUMBER_WORD = "|".join(sorted([*_UNITS, *_TENS, "yüz"], key=len, reverse=True))
_WORDS_RUN = re.compile(rf"(?<!\w)(?:(?:{_NUMBER_WORD})[ \t,\-]+){{3,}}(?:{_NUMBER_WORD})(?!\w)", re.IGNORECASE)


def decoded_runs(text: str) -> list[tuple[int, int, str]]:
    """(start, end, decoded text) for encoded runs, decoded size bounded in total."""
    out: list[tuple[int, int, str]] = []
    budget = MAX_DECODED
    for rx, decode in ((_B64, _b64), (_HEX, _hex), (_URL, unquote), (_HTML, html.unescape)):
        for m in rx.finditer(text):
            if budget <= 0:
                return out
            piece = m.group()[:budget]
            value = decode(piece)
            if value and value != piece:
                out.append((m.start(), m.end(), value))
                budget -= len(value)
    for m in _WORDS_RUN.finditer(text):
        out.append((m.start(), m.end(), words_to_digits(m.group())))
    return out


def _printable(raw: bytes) -> str | None:
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return s if s.isprintable() or all(c.isprintable() or c in "\n\t" for c in s) else None


def _b64(piece: str) -> str | None:
    try:
        raw = base64.b64decode(piece + "=" * (-len(piece) % 4), altchars=b"-_" if "-" in piece or "_" in piece else None)
    except (binascii.Error, ValueError):
        return None
    return _printable(raw)


def _hex(piece: str) -> str | None:
    try:
        return _printable(bytes.fromhex(piece))
    except ValueError:
        return None


def words_to_digits(run: str) -> str:
    """Turkish number words to digit groups: "beş yüz otuz iki" → "532", "bir sıfır" → "1 0"."""
    groups: list[str] = []
    value, last = None, 99  # last: order of the last word (0 units, 1 tens, 2 hundreds)
    for word in re.findall(r"\w+", run.replace("I", "ı").replace("İ", "i").lower()):
        if word == "yüz":
            order, add = 2, None
        elif word in _TENS:
            order, add = 1, _TENS[word]
        else:
            order, add = 0, _UNITS.get(word, 0)
        multiplies = order == 2 and last == 0 and value is not None and 0 < value < 10  # "beş yüz"
        if value is not None and not multiplies and (order >= last or word == "sıfır" or value == 0):
            groups.append(str(value))
            value = None
        if order == 2:
            value = (value or 1) * 100
        else:
            value = (value or 0) + (add or 0)
        last = order
    if value is not None:
        groups.append(str(value))
    # digits spelled one at a time ("bir sıfır sıfır") are one number; composed ones keep groups
    out: list[str] = []
    glue = False  # the last group is a run of single spelled digits
    for g in groups:
        if len(g) == 1 and glue:
            out[-1] += g
        else:
            out.append(g)
            glue = len(g) == 1
    return " ".join(out)
