"""Structured output: grammar token masks applied to the batch's logits (xgrammar).

Why xgrammar: on this project's CPU it fills one token mask for the demo model's 6,144-token
vocabulary in ~70 µs where llguidance took 3-16 ms (`bench/structured_output.py` measures the
end-to-end cost). A request's grammar (`response_format` json_object / json_schema, vLLM's
`guided_json` / `guided_regex` / `guided_choice` / `structured_outputs`) is compiled once when the
request is prepared, off the event loop and the step thread (grammar_compiler.py); each choice
gets its own `GrammarState`. The state never trusts its own
bookkeeping about what was sampled: before each mask it catches up with the sequence's generated
tokens (and rolls back if there are fewer), so preemption, recompute and rejected speculative
tokens all leave it where the sequence is.

On a reasoning model the grammar applies to the answer after the thinking (`after_thinking`):
while the thinking runs the row is not masked, and where the model may open a thinking of its
own (Qwen3) the first token may also be the opening tag.

xgrammar's JSON strings admit raw control characters (U+0000-U+001F), which strict JSON parsers
(Python's json, pydantic) refuse; JSON grammars here are compact (no whitespace but single
spaces), so tokens holding a control character are simply forbidden for them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
import xgrammar as xgr

from fairgate.backends.openai_wire import bad_value

MAX_ROLLBACK = 64


@dataclass(slots=True, frozen=True)
class GrammarRequest:
    """What the client asked for: kind is "json" (schema or None = any JSON), "regex" or "choice"."""

    kind: str
    value: Any
    param: str  # the field it came from, for error messages


@dataclass(slots=True, frozen=True)
class CompiledRequest:
    """A compiled grammar plus tokens it forbids outright; shared by a request's choices."""

    grammar: xgr.CompiledGrammar
    allowed_bits: torch.Tensor | None  # [ceil(V / 32)] int32 ANDed into every mask, or None


def allowed_bits(vocab_size: int, banned: Sequence[int]) -> torch.Tensor:
    """A bitmask row (xgrammar's layout: bit j of word w is token 32w + j) with `banned` cleared."""
    words = [0xFFFFFFFF] * ((vocab_size + 31) // 32)
    for token in banned:
        words[token // 32] &= ~(1 << (token % 32)) & 0xFFFFFFFF
    return torch.tensor([w - (1 << 32) if w >= 1 << 31 else w for w in words], dtype=torch.int32)


class GrammarState:
    """One sequence's position in its grammar; used on the engine thread only."""

    __slots__ = ("allowed_bits", "begin", "closes", "failed", "matcher", "num_accepted", "opens")

    def __init__(self, compiled: CompiledRequest, after_thinking: tuple[int | None, int] | None = None) -> None:
        self.matcher = xgr.GrammarMatcher(compiled.grammar, max_rollback_tokens=MAX_ROLLBACK)
        self.allowed_bits = compiled.allowed_bits
        self.num_accepted = 0
        self.failed = False  # a token the grammar refused got in (e.g. ignore_eos): stop masking
        # after_thinking (opening tag id or None when the prompt opened it, closing tag id): the
        # grammar starts after the closing tag; `begin` is where, once known
        self.opens: int | None = after_thinking[0] if after_thinking else None
        self.closes: int | None = after_thinking[1] if after_thinking else None
        self.begin: int | None = 0 if after_thinking is None else None

    def answer(self, output_ids: Sequence[int]) -> Sequence[int] | None:
        """The generated tokens the grammar applies to; None while the thinking runs (or may start)."""
        if self.begin == 0:
            return output_ids
        if self.begin is not None and self.begin > len(output_ids):  # rolled back into the thinking
            self.matcher.rollback(self.num_accepted)
            self.begin, self.num_accepted = None, 0
        if self.begin is None:
            if self.opens is not None and output_ids and output_ids[0] != self.opens:
                self.begin = 0  # the model answered without thinking
            elif self.closes is not None and self.closes in output_ids:
                self.begin = list(output_ids).index(self.closes) + 1
            else:
                return None
        return output_ids[self.begin:]

    def may_open(self, output_ids: Sequence[int]) -> bool:
        """The next token may open the thinking instead of starting the answer."""
        return self.begin is None and self.opens is not None and not output_ids

    def sync(self, output_ids: Sequence[int]) -> None:
        """Catch up with (or roll back to) the sequence's generated tokens."""
        if self.num_accepted > len(output_ids):
            self.matcher.rollback(self.num_accepted - len(output_ids))
            self.num_accepted = len(output_ids)
        for token in output_ids[self.num_accepted :]:
            if self.matcher.is_terminated() or not self.matcher.accept_token(token):
                self.failed = True
                return
            self.num_accepted += 1

    def fill(self, bitmask: torch.Tensor, row: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, row)
        if self.allowed_bits is not None:
            bitmask[row] &= self.allowed_bits


@dataclass(slots=True)
class GrammarMasks:
    """The token masks of one step's grammar rows, filled (maybe on the masker's thread)."""

    bitmask: torch.Tensor  # [N, ceil(V / 32)] int32; 0 bits are forbidden tokens
    rows: list[int]  # rows that have a mask

    def apply(self, logits: torch.Tensor) -> None:  # logits [N, V] float32, masked in place
        if self.rows:
            xgr.apply_token_bitmask_inplace(logits, self.bitmask.to(logits.device), indices=self.rows)


class MaskFiller:
    """Fills a step's grammar masks for all rows at once: rows that moved by one token catch up
    in one batched accept, every mask is filled by one batched call (xgrammar's C++ loop, not a
    Python one), the control-token ban is one AND over the whole bitmask, and the bitmask buffer is
    reused from step to step (a step's masks are applied before the next step fills)."""

    def __init__(self) -> None:
        self._batch = xgr.BatchGrammarMatcher(max_threads=1)  # the forward pass has the cores
        self._buffer: torch.Tensor | None = None

    def fill(self, states: Sequence[GrammarState | None], output_ids: Sequence[Sequence[int]],
             vocab_size: int) -> GrammarMasks:
        """Sync each row's grammar with its sequence and fill its mask; rows without one untouched."""
        views = [None if s is None else s.answer(ids) for s, ids in zip(states, output_ids, strict=True)]
        _sync_all(states, views)
        rows = [i for i, s in enumerate(states)
                if s is not None and not s.failed and not s.matcher.is_terminated()
                and (views[i] is not None or s.may_open(output_ids[i]))]
        bitmask = self._bitmask(len(states), vocab_size)  # [N, ceil(V / 32)] int32
        if rows:
            self._batch.batch_fill_next_token_bitmask([states[i].matcher for i in rows],  # type: ignore[union-attr]
                                                      bitmask, indices=rows)
            bans = [states[i].allowed_bits for i in rows]  # type: ignore[union-attr]
            if all(b is bans[0] for b in bans):  # the usual case: one ban (or none) for all rows
                if bans[0] is not None:
                    bitmask &= bans[0]  # [N, W]; rows without a grammar are never applied
            else:
                for i, bits in zip(rows, bans, strict=True):
                    if bits is not None:
                        bitmask[i] &= bits
            for i in rows:
                opens = states[i].opens  # type: ignore[union-attr]
                if views[i] is None and opens is not None:  # the answer, or the thinking's opening tag
                    bitmask[i, opens // 32] |= _bit(opens % 32)
        return GrammarMasks(bitmask, rows)

    def _bitmask(self, rows: int, vocab_size: int) -> torch.Tensor:
        words = (vocab_size + 31) // 32
        buf = self._buffer
        if buf is None or buf.shape[0] < rows or buf.shape[1] != words:
            buf = self._buffer = xgr.allocate_token_bitmask(max(rows, 16), vocab_size)
        return buf[:rows]


def _bit(j: int) -> int:
    """Bit j of an int32 bitmask word, as the signed value torch stores."""
    return (1 << j) - (1 << 32) if j == 31 else 1 << j


def _sync_all(states: Sequence[GrammarState | None], output_ids: Sequence[Sequence[int] | None]) -> None:
    """Catch every grammar up with its sequence's answer; the usual one new token each goes in
    one batched accept, anything else (several tokens, a rollback) row by row."""
    single: list[int] = []
    for i, state in enumerate(states):
        if state is None or state.failed or output_ids[i] is None:
            continue
        ids = output_ids[i]
        assert ids is not None
        if len(ids) == state.num_accepted + 1 and not state.matcher.is_terminated():
            single.append(i)
        else:
            state.sync(ids)
    if not single:
        return
    matchers = [states[i].matcher for i in single]  # type: ignore[union-attr]
    accepted = xgr.BatchGrammarMatcher.batch_accept_token(matchers, [output_ids[i][-1] for i in single])  # type: ignore[index]
    for i, ok in zip(single, accepted, strict=True):
        state = states[i]
        assert state is not None
        if ok:
            state.num_accepted += 1
        else:
            state.failed = True


def fill_grammar_masks(states: Sequence[GrammarState | None], output_ids: Sequence[Sequence[int]],
                       vocab_size: int) -> GrammarMasks:
    """One step's masks without a reusable filler (a fresh buffer)."""
    return MaskFiller().fill(states, output_ids, vocab_size)


class GrammarMasker:
    """Fills a step's masks on a worker thread while the forward pass runs (torch releases the
    GIL), so the grammar's CPU time hides behind the model's; `start` returns None when no row
    has a grammar."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._filler = MaskFiller()

    def start(self, states: Sequence[GrammarState | None], output_ids: Sequence[Sequence[int]],
              vocab_size: int) -> Future[GrammarMasks] | None:
        if all(s is None for s in states):
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="fairgate-grammar")
        return self._pool.submit(self._filler.fill, list(states), list(output_ids), vocab_size)


def read_grammar_request(body: dict[str, Any]) -> GrammarRequest | None:
    """The one grammar a body asks for (None: free text); two at once is a 400."""
    found: list[GrammarRequest] = []
    fmt = body.get("response_format")
    if fmt is not None:
        found += _response_format(fmt)
    for name, kind in (("guided_json", "json"), ("guided_regex", "regex"), ("guided_choice", "choice")):
        if body.get(name) is not None:
            found.append(_checked(kind, body[name], name))
    so = body.get("structured_outputs")
    if so is not None:
        if not isinstance(so, dict):
            raise bad_value("structured_outputs must be an object", "structured_outputs")
        for key in ("json", "regex", "choice"):
            if so.get(key) is not None:
                found.append(_checked(key, so[key], "structured_outputs"))
        unknown = set(so) - {"json", "regex", "choice"}
        if unknown:
            raise bad_value(f"structured_outputs.{sorted(unknown)[0]} is not supported", "structured_outputs")
    if len(found) > 1:
        raise bad_value("ask for one structured output only", found[1].param)
    return found[0] if found else None


def _response_format(fmt: Any) -> list[GrammarRequest]:
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise bad_value('response_format.type must be "text", "json_object" or "json_schema"', "response_format")
    if fmt["type"] == "text":
        return []
    if fmt["type"] == "json_object":
        return [GrammarRequest("json", {"type": "object"}, "response_format")]  # OpenAI: an object
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
        raise bad_value("response_format.json_schema must be an object with a `schema` object", "response_format")
    return [GrammarRequest("json", spec.get("schema") or {}, "response_format")]


def _checked(kind: str, value: Any, param: str) -> GrammarRequest:
    if kind == "json":
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise bad_value(f"{param} must be a JSON schema", param) from None
        if not isinstance(value, dict):
            raise bad_value(f"{param} must be a JSON schema object", param)
    elif kind == "regex":
        if not isinstance(value, str) or not value:
            raise bad_value(f"{param} must be a non-empty regex string", param)
    elif not isinstance(value, list) or not value or not all(isinstance(c, str) and c for c in value):
        raise bad_value(f"{param} must be a non-empty list of non-empty strings", param)
    return GrammarRequest(kind, value, param)


