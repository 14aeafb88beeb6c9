"""Named workload mixes: what each request of a `fairgate bench` run asks for.

A workload turns a request's index into a `RequestSpec` (messages, max_tokens), the same
sequence for every target and every run with the same seed, so side-by-side numbers compare
like with like. Lengths are in words (roughly 1.3 tokens each for English BPE vocabularies) and
are multiplied by `scale`, so the same mix fits a 256-token test model and a 128k-context one.

    chat        short system prompt, a question of 10–120 words, 32–256 tokens out
    rag         prefill-heavy: one long system prompt shared byte-for-byte by every request
                (the prefix cache should hit it), three retrieved passages, a question; 64 out
    long        a short instruction, long generation (1024 tokens out)
    extraction  a 200–400-word document, asked for a JSON object of its fields; 96 out
    mixed       50% chat, 25% rag, 15% extraction, 10% long
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

# Plain words only: no digits that could read as phone, card or identity numbers, and no
# e-mail addresses, so the gateway's personal-data detectors route a bench like real traffic.
_WORDS = (
    "the a gateway request model tenant queue token cache block prefix engine server answer "
    "question report summary customer order delivery invoice payment budget quota policy team "
    "project meeting schedule office weather city river market price product service support "
    "quickly carefully today tomorrow because although however therefore while after before "
    "write explain compare describe list translate improve check review plan build measure "
    "bugün hava güzel müşteri sipariş fatura toplantı rapor şirket ekip proje teslim ödeme "
    "and or but with without for from into over under about between during against among"
).split()

SYSTEM_SHORT = "You are a helpful assistant. Answer clearly and briefly."


@dataclass(slots=True, frozen=True)
class RequestSpec:
    """One request of a run: chat messages, the output cap, and which mix it came from."""

    messages: tuple[dict[str, str], ...]
    max_tokens: int
    workload: str


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(max(n, 1)))


def sample_words(n: int) -> str:
    """`n` words of the workloads' vocabulary, the same every time (token-count probes)."""
    return _words(random.Random(n), n)


def _n(words: float, scale: float) -> int:
    return max(1, round(words * scale))


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return round(lo * math.pow(hi / lo, rng.random()))


def chat(rng: random.Random, scale: float) -> RequestSpec:
    question = _words(rng, _n(_log_uniform(rng, 10, 120), scale)) + "?"
    return RequestSpec(({"role": "system", "content": SYSTEM_SHORT}, {"role": "user", "content": question}),
                       _n(rng.randint(32, 256), scale), "chat")


@functools.lru_cache(maxsize=8)
def shared_system_prompt(scale: float) -> str:
    """The RAG system prompt: the same bytes in every request and run (a fixed seed)."""
    fixed = random.Random(20)
    return ("You answer questions about the company's documents. Use only the passages given. "
            + _words(fixed, _n(600, scale)))


def rag(rng: random.Random, scale: float) -> RequestSpec:
    passages = "\n\n".join(f"Passage {i + 1}: {_words(rng, _n(150, scale))}" for i in range(3))
    user = f"{passages}\n\nQuestion: {_words(rng, _n(20, scale))}?"
    return RequestSpec(({"role": "system", "content": shared_system_prompt(scale)},
                        {"role": "user", "content": user}), _n(64, scale), "rag")


def long(rng: random.Random, scale: float) -> RequestSpec:
    user = "Write a long, detailed story about " + _words(rng, _n(20, scale)) + "."
    return RequestSpec(({"role": "user", "content": user},), _n(1024, scale), "long")


def extraction(rng: random.Random, scale: float) -> RequestSpec:
    doc = _words(rng, _n(rng.randint(200, 400), scale))
    user = ("Extract the customer, the product and the delivery city from the document below. "
            'Reply with one JSON object {"customer": ..., "product": ..., "city": ...}.\n\n' + doc)
    return RequestSpec(({"role": "system", "content": SYSTEM_SHORT}, {"role": "user", "content": user}),
                       _n(96, scale), "extraction")


Workload = Callable[[random.Random, float], RequestSpec]
_MIXED: tuple[tuple[Workload, float], ...] = ((chat, 0.5), (rag, 0.25), (extraction, 0.15), (long, 0.1))


def mixed(rng: random.Random, scale: float) -> RequestSpec:
    pick = rng.choices([w for w, _ in _MIXED], weights=[p for _, p in _MIXED])[0]
    return pick(rng, scale)


WORKLOADS: dict[str, Workload] = {"chat": chat, "rag": rag, "long": long, "extraction": extraction,
                                  "mixed": mixed}


@dataclass(slots=True, frozen=True)
class WorkloadSource:
    """Request `i` of workload `name`: the same spec for the same (name, seed, scale, i), so
    every target and every run sees the same sequence. `max_tokens` overrides every cap."""

    name: str
    seed: int = 0
    scale: float = 1.0
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.name not in WORKLOADS:
            raise ValueError(f"unknown workload {self.name!r} (one of {', '.join(WORKLOADS)})")

    def spec(self, i: int) -> RequestSpec:
        spec = WORKLOADS[self.name](random.Random(f"{self.seed}:{i}"), self.scale)
        if self.max_tokens is not None:
            return RequestSpec(spec.messages, self.max_tokens, spec.workload)
        return spec
