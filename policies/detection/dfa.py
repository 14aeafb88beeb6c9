"""RE2 asked only whether a pattern occurs in UTF-8 bytes.

google-re2's `search` builds a generator and a match object for every call (about 0.8 µs), and
when the pattern matched it throws GeneratorExit into that generator; the compiled program's own
`Match` answers from its DFA in one call. `tests/policies/test_detection_shortcuts.py` holds
`occurs` to `search`.
"""

from __future__ import annotations

from typing import Any

import re2

UNANCHORED, AT_START = re2._Anchor.UNANCHORED, re2._Anchor.ANCHOR_START


def program(pattern: str, options: re2.Options | None = None) -> Any:
    """The compiled program under google-re2's wrapper, for `occurs` and `Match` calls."""
    return re2.compile(pattern, options)._regexp


def occurs(prog: Any, data: bytes) -> bool:
    return bool(prog.Match(UNANCHORED, data, 0, len(data))[0][0] != -1)
