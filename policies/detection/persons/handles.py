"""Social media handles made of a person's name ("@gokhan.sarac", "@duygu_sarac",
"@serhat_kaplan63"): the handle names its owner as the name does. The name tagger's tokens stop
at an underscore or a dot, so a handle is read whole here: its first two parts, split at dots
and underscores (digits may end it), are a lexicon given name that is no place and then a given
name or a surname ("@karadeniz_kizi", "@pytest.fixture" are none); a given name that is a common
word too only where it is a common given name ("@duygu_sarac").
A one-part handle ("@gamze") is the mention rule's (`inflected.mentioned`)."""

from __future__ import annotations

import re

from fairgate.policies.detection.gazetteer import fold_key, given_names
from fairgate.policies.detection.persons.lexicon import NOT_NAMES, lexicon_flags

# '@', two or more letter runs joined by a dot or an underscore, digits maybe; not an e-mail's
# domain ("ali@gmail.com": a word before the '@') nor a handle's next part ("@a.b.com")
_HANDLE = re.compile(r"(?<![\w@.])@([^\W\d_]{2,}(?:[._][^\W\d_]{2,})+)(?:[._]?[0-9]+)?(?![\w@]|\.\w)")


def handle_names(text: str) -> list[tuple[int, int]]:
    """(start, end) of the @handles in `text` made of a given name and a given name or surname."""
    out: list[tuple[int, int]] = []
    flags = lexicon_flags()
    for m in _HANDLE.finditer(text):
        first, second = (fold_key(p) for p in re.split(r"[._]", m.group(1))[:2])
        a, b = flags.get(first, ""), flags.get(second, "")
        given = first in given_names() or ("g" in a and "c" not in a)  # (a common given name may be a word too)
        if given and ("g" in b or "s" in b) and "p" not in a and first not in NOT_NAMES and second not in NOT_NAMES:
            out.append(m.span())
    return out
