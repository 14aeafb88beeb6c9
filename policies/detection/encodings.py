"""Values hidden in encodings: base64, hex, URL-encoding and HTML entities are decoded (bounded:
at most `MAX_DECODED` characters per text) and scanned again; Turkish number words are read as
digits ("beş yüz otuz iki altı yüz on dört ..." → "532 614 ..."), with the digit groups that
end such a number ("beş yüz otuz üç - 417 - 82 - 06"). A finding inside a decoded run is
reported over the whole run in the text.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from urllib.parse import unquote

MAX_DECODED = 64 * 1024
_HEX = re.compile(r"[0-9A-Fa-f]+")
_B64_LIKE = re.compile(r"[0-9+/]|[a-z][A-Z]")  # a digit, '+', '/' or a case change: not prose
_URL_RUN = re.compile(r"[^\s<>\"']{1,600}")
_HTML = re.compile(r"(?:&#?[0-9A-Za-z]{1,8};[^<>&\n]{0,20}){2,}")
_DIGITS_AFTER = re.compile(r"(?:[ \t]*[\-.,/]?[ \t]*[0-9]{1,4}(?![0-9])){1,4}")
_GROUPS = re.compile(r"[0-9]+")
_UNITS = {"sıfır": 0, "bir": 1, "iki": 2, "üç": 3, "dört": 4, "beş": 5, "altı": 6, "yedi": 7,
          "sekiz": 8, "dokuz": 9, "sifir": 0, "uc": 3, "dort": 4, "bes": 5, "alti": 6}
_TENS = {"on": 10, "yirmi": 20, "otuz": 30, "kırk": 40, "elli": 50, "altmış": 60, "yetmiş": 70,
         "seksen": 80, "doksan": 90, "kirk": 40, "altmis": 60, "yetmis": 70}


def decoded_runs(text: str, encoded: list[tuple[int, int]], words: list[tuple[int, int]]) -> list[tuple[int, int, str]]:
    """(start, end, decoded text) for encoded runs, decoded size bounded in total. `encoded`:
    the trigger pass's base64/hex runs, '%XX' and '&...;' places; `words`: number-word runs."""
    out: list[tuple[int, int, str]] = []
    budget = MAX_DECODED
    last_end = -1
    for s, e in encoded:
        if budget <= 0:
            break
        if s < last_end:
            continue  # inside the run just decoded
        run = _run(text, s, e)
        if run is None:
            continue
        start, end, value = run
        last_end = end
        if value:
            out.append((start, end, value[:budget]))
            budget -= len(value)
    for s, e in words:
        # the number's written end, in digits ("beş yüz otuz üç - 417 - 82 - 06"): one number
        tail = _DIGITS_AFTER.match(text, e)
        end = tail.end() if tail else e
        out.append((s, end, " ".join((words_to_digits(text[s:e]), *_GROUPS.findall(text, e, end)))))
    return out


def _run(text: str, s: int, e: int) -> tuple[int, int, str | None] | None:
    """The encoded run a trigger belongs to, and its decoded text (None: not decodable)."""
    c = text[s]
    if c == "%":
        lo = s
        while lo > max(0, s - 200) and not text[lo - 1].isspace() and text[lo - 1] not in "<>\"'":
            lo -= 1
        m = _URL_RUN.match(text, lo)
        end = m.end() if m else e
        piece = text[lo:end][:MAX_DECODED]
        value = unquote(piece)
        return lo, end, value if value != piece else None
    if c == "&":
        m = _HTML.match(text, s)
        if m is None:
            return None
        value = html.unescape(m.group()[:MAX_DECODED])
        return s, m.end(), value if value != m.group() else None
    piece = text[s:e][:MAX_DECODED]
    if len(piece) % 2 == 0 and _HEX.fullmatch(piece):
        hex_value = _hex(piece)
        if hex_value:
            return s, e, hex_value
    if not _B64_LIKE.search(piece):
        return s, e, None  # one long word, not base64
    return s, e, _b64(piece)


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
        if word in ("yüz", "yuz"):
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
