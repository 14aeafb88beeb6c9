from __future__ import annotations

from fairgate.policies.complexity import complexity_score


def test_simple_prompts_score_low() -> None:
    assert complexity_score(["Merhaba, nasılsın?"]) < 0.2
    assert complexity_score(["Translate 'good morning' to Turkish."]) < 0.2


def test_hard_prompts_score_higher() -> None:
    hard = complexity_score([
        "Analyze the trade-offs of this algorithm step by step and prove its complexity:\n"
        "```python\ndef f(xs):\n    return sorted(xs)\n```"
    ])
    assert hard >= 0.6
    assert complexity_score(["Bu iki mimariyi karşılaştır ve adım adım analiz et."]) >= 0.3


def test_length_and_bounds() -> None:
    short = complexity_score(["word " * 20])
    long = complexity_score(["word " * 8000])
    assert short < long <= 1.0
    assert complexity_score(["x"], prompt_tokens=100_000) <= 1.0
    assert complexity_score([]) == 0.0
