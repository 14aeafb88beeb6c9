"""E-mail addresses, plain and obfuscated (`ali [at] ornek [dot] com`, `(at)`, ` at `, ` et `
(Turkish reads "@" so), ` @ `, `%40`, `[.]`), matched outward from each "at" marker on normalised text.

Cost is linear: only markers found by the trigger pass (`triggers`: a local-part character, the
marker, a dotted domain) are looked at; the local part is matched on the reversed text (at most
64 characters, never past the previous address), the domain forward with a bounded pattern. Obfuscated forms need a known top-level domain, so
"look at the office. Then" is not an address.
"""

from __future__ import annotations

import re

from fairgate.policies.detection.textnorm import MESSAGE_JOIN

_J = MESSAGE_JOIN
# (a dot spelt "dot", "nokta" or "punto", as Turkish writers borrow it from Italian and Spanish,
# or a dot with a space on each side, as a middle dot reads once normalised, or a bullet:
# "selin · kaya (et) gmail · com", "selin•kaya at gmail•com")
_MID_DOTS = "\u2022\u2219\u22c5"
_DOT = (r"(?:\.|[ \t]?[\[\(\{<][ \t]?(?:dot|nokta|punto|\.)[ \t]?[\]\)\}>][ \t]?|[ \t]+(?:dot|nokta|punto)[ \t]+"
        rf"|[ \t]\.[ \t]|[ \t]?[{_MID_DOTS}][ \t]?)")
# An "at" marker right after a local-part character and before something domain-shaped, so a
# flood of "a@a@a@" is rejected by the regex engine alone.
_MARKER = re.compile(
    r"(?:[@\uff20]|[ \t\[\(\{<%])"  # a plain first character lets the engine skip ahead fast
    rf"(?<=[\w.+%\-{_J}].)"
    r"(?:(?<=[@\uff20])[ \t]*|(?<=%)40"
    # (spaced, in English or as Turkish reads "@": "tuncay nokta erbil et gmail nokta com", "et işareti")
    r"|(?<=[ \t])[ \t]*(?:[@\uff20][ \t]*|[\[\(\{<][ \t]?(?:at|et)[ \t]?[\]\)\}>][ \t]?|(?:at|et(?:[ \t]+i[şs]areti)?)[ \t]+)"
    r"|(?<=[\[\(\{<])[ \t]?(?:at|et)[ \t]?[\]\)\}>][ \t]?)"
    rf"(?=[\w\-{_J}]{{1,63}}{_DOT})",
    re.IGNORECASE,
)
# Local part, read backwards from the marker (the reversed text's match, reversed).
_LOCAL_REV = re.compile(rf"[\w.+%\-{_J}]{{1,64}}")
# " nokta x" or " · x" reversed
_LOCAL_DOT_REV = re.compile(rf"(?:[ \t]+(?:atkon|otnup|tod)[ \t]+|[ \t]\.[ \t]|[ \t]?[{_MID_DOTS}][ \t]?)[\w\-]{{1,32}}(?![\w\-])",
                            re.IGNORECASE)
_PLAIN_DOMAIN = re.compile(rf"[\w\-{_J}]{{1,63}}(?:\.[\w\-{_J}]{{1,63}}){{1,8}}")
_OBF_DOMAIN = re.compile(rf"[\w\-]{{1,63}}(?:{_DOT}[\w\-]{{1,63}}){{1,8}}", re.IGNORECASE)
_LAST_LABEL = re.compile(rf"(?<![\w{_J}])((?:[^\W\d_]|{_J}){{2,25}})\Z")
KNOWN_TLDS = frozenset(
    "com net org edu gov mil int info biz io co me tr uk de fr nl it es eu us ca au ru az "
    "az ch at be se no dk fi pl cz gr pt ie jp cn in br mx ai app dev tech online site".split()
)


def find_emails(text: str, hits: list[tuple[int, int]], limit: int = 64) -> list[tuple[int, int]]:
    """Spans of e-mail addresses in normalised `text` (at most `limit`); `hits`: where the
    trigger pass saw an "at" marker with a local part before it and a domain after."""
    out: list[tuple[int, int]] = []
    rev = ""
    for s, e in hits:
        if len(out) >= limit:
            break
        if out and s < out[-1][1]:
            continue  # inside the address just found
        m = _MARKER.search(text, max(0, s - 2), min(len(text), e + 700))
        if m is None or m.start() > e:
            continue
        if not rev:
            rev = text[::-1]
        span = _address(text, rev, m, out[-1][1] if out else 0)
        if span is not None:
            out.append(span)
    return out


def _address(text: str, rev: str, m: re.Match[str], floor: int) -> tuple[int, int] | None:
    at, after = m.start(), m.end()
    local = _LOCAL_REV.match(rev, len(text) - at)
    if local is None:
        return None
    start = max(len(text) - local.end(), floor)
    while start < at and text[start] in "." + _J:  # not a leading dot or boundary
        start += 1
    if start == at:
        return None
    obfuscated = m.group() not in ("@", "\uff20")
    if obfuscated:  # "hakan nokta ersoy at gmail nokta com": the local part's dots in words too
        while (dotted := _LOCAL_DOT_REV.match(rev, len(text) - start)) is not None and len(text) - dotted.end() >= floor:
            start = len(text) - dotted.end()
    domain = (_PLAIN_DOMAIN if not obfuscated else _OBF_DOMAIN).match(text, after)
    if domain is None:
        return None
    end = _trim_domain(text, domain.start(), domain.end())
    label = _LAST_LABEL.search(text, domain.start(), end)
    # A domain may run on across a message boundary (an address split over two parts); when the
    # run ends in no top-level domain (`ali@x.com` + `crm_user_42`), the address ends at the boundary.
    while label is None and (cut := text.rfind(_J, domain.start(), end)) > domain.start():
        end = _trim_domain(text, domain.start(), cut)
        label = _LAST_LABEL.search(text, domain.start(), end)
    if label is None:
        return None
    tld = label.group(1).replace(_J, "")
    if len(tld) < 2 or (obfuscated and tld.lower() not in KNOWN_TLDS):
        return None
    return start, end


def _trim_domain(text: str, start: int, end: int) -> int:
    """Drop a trailing part that is not a top-level domain (digits, '-', a message boundary)."""
    while end > start and not text[end - 1].isalpha():
        end -= 1
    return end
