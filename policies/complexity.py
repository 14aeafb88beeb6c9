"""A cheap complexity score for `model: "auto"`: simple requests may go to a smaller model.

Not a model, a handful of signals any reviewer can check: long prompts, code, reasoning or
maths vocabulary (English and Turkish), long conversations, several questions. The score is in
[0, 1]; a routing rule's `max_complexity` compares against it. One regex pass per signal, so
the cost stays a few microseconds per KB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_REASONING = re.compile(
    r"step by step|prove|proof|derive|analy[sz]e|analysis|explain why|trade-?offs?|optimi[sz]e|"
    r"algorithm|architecture|design a|debug|refactor|compare|evaluate|"
    r"adım adım|kanıtla|ispat|türet|analiz|neden|karşılaştır|optimize et|algoritma|mimari|tasarla|"
    r"hata ayıkla|değerlendir",
    re.IGNORECASE,
)
_CODE = re.compile(r"```|\bdef |\bclass |\bfunction\b|\bimport |#include|=>|\};|SELECT .+ FROM", re.IGNORECASE)
_MATH = re.compile(r"\\frac|\\sum|\\int|∫|∑|√|\b[a-z]\s*\^\s*\d|\d\s*[*/^]\s*\d|\bintegral\b|\bdenklem|\bequation", re.IGNORECASE)


def complexity_score(texts: Sequence[str], prompt_tokens: int | None = None) -> float:
    """Return a score in [0, 1] for the request's messages (higher = harder).

    `prompt_tokens`, when known, replaces the character-based length estimate (~4 chars/token).
    """
    text = "\n".join(texts)
    tokens = prompt_tokens if prompt_tokens is not None else len(text) / 4
    # Length: 0 at ~50 tokens, 0.4 at ~2k tokens, saturating beyond ~8k.
    length = 0.0 if tokens <= 50 else min(0.5, 0.4 * math.log(tokens / 50) / math.log(40))
    reasoning = min(0.45, 0.15 * len(set(m.group().lower() for m in _REASONING.finditer(text))))
    code = 0.25 if _CODE.search(text) else 0.0
    maths = 0.15 if _MATH.search(text) else 0.0
    turns = 0.1 if len(texts) > 6 else 0.0
    questions = 0.1 if text.count("?") >= 3 else 0.0
    return round(min(1.0, length + reasoning + code + maths + turns + questions), 4)
