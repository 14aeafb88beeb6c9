"""A cheap complexity score for `model: "auto"`: simple requests may go to a smaller model.

Not a model, a handful of signals any reviewer can check: long prompts, code, reasoning or
maths vocabulary (English and Turkish), long conversations, several questions. The score is in
[0, 1]; a routing rule's `max_complexity` compares against it.

Speed: keyword signals are plain substring searches (C speed) on the lower-cased text, looked
for only in the first 4 KB and last 2 KB; a case-insensitive regex alternation was ~50x slower.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

REASONING = (
    "step by step", "prove", "proof", "derive", "analyze", "analyse", "analysis", "explain why",
    "trade-off", "tradeoff", "optimize", "optimise", "algorithm", "architecture", "design a",
    "debug", "refactor", "compare", "evaluate",
    "adım adım", "kanıtla", "ispat", "türet", "analiz", "neden", "karşılaştır", "optimize et",
    "algoritma", "mimari", "tasarla", "hata ayıkla", "değerlendir",
)
CODE = ("```", "def ", "class ", "function", "import ", "#include", "=>", "};", "select ")
MATH = ("\\frac", "\\sum", "\\int", "∫", "∑", "√", "integral", "denklem", "equation")
_ARITHMETIC = re.compile(r"[0-9]\s*[*/^]\s*[0-9]")
_HEAD, _TAIL = 4096, 2048  # instructions sit at the start or the end of a prompt


def complexity_score(texts: Sequence[str], prompt_tokens: int | None = None) -> float:
    """Return a score in [0, 1] for the request's messages (higher = harder).

    `prompt_tokens`, when known, replaces the character-based length estimate (~4 chars/token).
    """
    text = "\n".join(texts)
    tokens = prompt_tokens if prompt_tokens is not None else len(text) / 4
    # Length: 0 at ~50 tokens, 0.4 at ~2k tokens, capped at 0.5.
    length = 0.0 if tokens <= 50 else min(0.5, 0.4 * math.log(tokens / 50) / math.log(40))
    sample = (text if len(text) <= _HEAD + _TAIL else text[:_HEAD] + "\n" + text[-_TAIL:]).lower()
    has = sample.__contains__  # mapped in C: no Python frame per word
    reasoning = min(0.45, 0.15 * sum(map(has, REASONING)))
    code = 0.25 if any(map(has, CODE)) else 0.0
    maths = 0.15 if any(map(has, MATH)) or _ARITHMETIC.search(sample) else 0.0
    turns = 0.1 if len(texts) > 6 else 0.0
    questions = 0.1 if sample.count("?") >= 3 else 0.0
    return round(min(1.0, length + reasoning + code + maths + turns + questions), 4)
