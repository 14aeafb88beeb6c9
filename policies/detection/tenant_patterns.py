"""Tenant-defined patterns and keywords, compiled for linear-time matching.

Patterns are compiled with RE2 (`google-re2`): matching time is linear in the text, so a tenant
pattern like `(\\w+\\s?)+@corp\\.example` cannot stall the gateway. A pattern RE2 cannot compile
(backreferences, lookaround -- the constructs that need backtracking) is refused when it is
saved (`validate_tenant_patterns`) and, should one reach the detectors anyway, raises
`re.error`, which the caller treats as sensitive. Keywords are escaped literals in one Python
alternation (linear too), whole words, case-insensitive with Unicode case rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import re2

Matcher = tuple[str, object]  # ("pattern" | "keyword", compiled pattern with finditer)


def _options() -> re2.Options:
    opts = re2.Options()
    opts.case_sensitive = False
    opts.log_errors = False
    opts.max_mem = 8 << 20  # a pathological pattern fails to compile instead of using memory
    return opts


def compile_pattern(pattern: str) -> object:
    """RE2-compile one tenant pattern; raises `re.error` when RE2 cannot take it."""
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        raise re.error(f"not supported in linear time (RE2): {_message(exc)}") from None


def _message(exc: Exception) -> str:
    msg = exc.args[0] if exc.args else str(exc)
    return msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)


@lru_cache(maxsize=256)
def compile_tenant(patterns: tuple[str, ...], keywords: tuple[str, ...]) -> tuple[Matcher, ...]:
    """Tenant regexes compiled one by one, plus one alternation of all keywords as whole words.
    Cached: a tenant reuses the same tuples."""
    compiled: list[Matcher] = [("pattern", compile_pattern(p)) for p in patterns]
    words = sorted({k.strip() for k in keywords if k.strip()}, key=len, reverse=True)
    if words:
        alt = "|".join(re.escape(w) for w in words)
        compiled.append(("keyword", re.compile(rf"(?<!\w)(?:{alt})(?!\w)", re.IGNORECASE)))
    return tuple(compiled)


def tenant_findings(text: str, patterns: Iterable[str], keywords: Iterable[str]) -> list[tuple[str, int, int]]:
    """(kind, start, end) of every non-empty tenant match in `text`."""
    out: list[tuple[str, int, int]] = []
    for kind, rx in compile_tenant(tuple(patterns), tuple(keywords)):
        for m in rx.finditer(text):  # type: ignore[attr-defined]
            if m.end() > m.start():
                out.append((kind, m.start(), m.end()))
    return out


def validate_tenant_patterns(patterns: Iterable[str]) -> list[str]:
    """One error message per tenant pattern that does not compile, needs backtracking (RE2
    refuses it) or matches the empty string."""
    errors: list[str] = []
    for i, p in enumerate(patterns):
        try:
            re.compile(p, re.IGNORECASE)
        except re.error as exc:
            errors.append(f"pattern {i}: invalid regular expression: {exc}")
            continue
        try:
            rx = compile_pattern(p)
        except re.error as exc:
            errors.append(f"pattern {i}: {exc}; rewrite it without backreferences or lookaround")
            continue
        if rx.fullmatch("") is not None:  # type: ignore[attr-defined]
            errors.append(f"pattern {i}: matches the empty string")
    return errors
