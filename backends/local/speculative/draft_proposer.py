"""A small draft model proposes k tokens per sequence, batched, on its own paged KV cache.

The draft is a second `ModelRunner` in the same engine (same device, same block size) with its
own KV pool and its own `BlockManager` (no prefix caching: draft KV is a private scratch
space). Per step, for the sequences that want drafts:

  round 0   one ragged pass: each sequence catches its draft cache up to its last token (a new
            sequence's whole prompt, else the tokens verified since the last proposal), and the
            draft's greedy token at the last position is draft 1; where every sequence catches
            up by the same few tokens (after a verify, usually the one correction or bonus
            token), that many native decode rounds instead;
  round j   one batched decode pass of the sequences still short of their k: draft j + 1.

The rounds do not go through `ModelRunner.execute`: round j's inputs are round j - 1's argmax,
still a tensor, at the next position of each sequence, so a round only advances positions,
slots and lengths (no step building, checks, sampler or grammar masks), and the forward pass
is `LeanForward` (draft_forward.py: the model's computation without nn.Module calls); the
host sees the guesses once, after the last round. At batch 1 a draft forward is mostly
per-call overhead, so this is what makes a small draft cheap.

Draft KV written for guesses that the target then rejected is simply recomputed: the next
proposal starts from the longest prefix of what the draft was fed that is still the sequence.
The draft decodes greedily, so its proposals are deterministic (q one-hot; see spec_verify.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.kv_cache.block_manager import BlockManager
from fairgate.backends.local.model.batch import build_step
from fairgate.backends.local.model.llama import AttentionMetadata
from fairgate.backends.local.model.rope import table_rows
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.backends.local.speculative.draft_forward import LeanForward
from fairgate.backends.local.speculative.proposers import ProposalRequest
from fairgate.scheduler.request import SchedRequest

_GREEDY = SamplingParams(temperature=0.0)
# Round 0 of at most this many tokens a sequence runs as that many native decode rounds (~0.1 ms
# each for the demo draft on a Zen 3 core) instead of building a step and a per-op pass (~0.8 ms).
SHORT_CATCH_UP = 4


@dataclass(slots=True)
class _DraftSeq:
    kv: SchedRequest  # the draft block manager's view: num_computed_tokens = draft KV present
    fed: list[int] = field(default_factory=list)  # tokens whose KV the draft cache holds, in order
    verified: int = 0  # how many of `fed` were the sequence itself (not guesses) when fed


class DraftModelProposer:
    """Implements `proposers.Proposer` with a draft `ModelRunner`."""

    def __init__(self, runner: ModelRunner, int8_head: bool = True) -> None:
        self.runner = runner
        self.kv = BlockManager(runner.num_kv_blocks, runner.block_size, enable_prefix_caching=False)
        self._seqs: dict[str, _DraftSeq] = {}
        lean = LeanForward.load(runner.model_dir, runner.config, runner.model, int8_head)
        self._forward = runner.model if lean is None else lean.hidden  # (ids, kv_caches, meta) -> hidden
        self._logits = runner.model.compute_logits if lean is None else lean.logits  # hidden -> logits
        self._native_decode = None if lean is None else lean.decode_hidden  # (ids, kv, positions, tables) or None

    @classmethod
    def load(
        cls, model_dir: str | Path, device: str, dtype: str, block_size: int, num_kv_blocks: int,
        vocab_size: int,
    ) -> DraftModelProposer:
        """Load the draft folder; its vocabulary must be the target's (same token ids)."""
        runner = ModelRunner(model_dir, device=device, dtype=dtype, block_size=block_size, num_kv_blocks=num_kv_blocks)
        if int(runner.config.vocab_size) != vocab_size:
            raise ValueError(f"draft model vocabulary {runner.config.vocab_size} != target's {vocab_size}")
        return cls(runner)

    def drop(self, request_id: str) -> None:
        seq = self._seqs.pop(request_id, None)
        if seq is not None:
            self.kv.free(seq.kv)

    @torch.inference_mode()
    def propose(self, requests: list[ProposalRequest]) -> dict[str, list[int]]:
        inputs: list[RunnerInput] = []
        wanted: list[ProposalRequest] = []
        for req in requests:
            inp = self._catch_up(req)
            if inp is not None:
                inputs.append(inp)
                wanted.append(req)
        if not inputs:
            return {}
        guesses = self._rounds(inputs, [req.num_tokens for req in wanted])
        drafts = {req.request_id: out for req, out in zip(wanted, guesses, strict=True)}
        for request_id, out in drafts.items():
            seq = self._seqs[request_id]
            seq.fed.extend(out[:-1])  # the last guess was never fed
        return drafts

    def _rounds(self, inputs: list[RunnerInput], ks: list[int]) -> list[list[int]]:
        """Round 0 over the ragged catch-up inputs, then decode rounds until each has its k."""
        runner, model = self.runner, self.runner.model
        assert model.cos_sin is not None  # set by DecoderModel.from_state_dict, as every runner loads
        hidden = self._short_catch_up(inputs)  # [B, hidden] at each last token, or None
        if hidden is None:
            step = build_step(inputs, runner.block_size, runner.max_model_len, model.cos_sin, runner.device,
                              runner.config.vocab_size, runner.config.num_heads, runner.config.rope.long_from,
                              model.cos_sin_local)
            ragged = self._forward(step.input_ids, runner.kv_caches, step.meta)  # [T, hidden]
            last = [start + n - 1 for start, n in zip(step.token_start, step.token_count, strict=True)]
            hidden = ragged.index_select(0, torch.tensor(last, dtype=torch.int64, device=runner.device))
        tok = self._logits(hidden).argmax(dim=-1)  # [B] draft 1
        rounds = [(list(range(len(inputs))), tok)]  # per round: (input indices, their guesses)
        active = rounds[0][0]
        pos = [inp.start_pos + len(inp.token_ids) for inp in inputs]  # where draft 1 is fed
        tables = [inp.block_table for inp in inputs]
        native = self._native_inputs(pos, tables, ks)  # (positions, block tables) tensors, built once
        for j in range(1, max(ks)):
            keep = [n for n, i in enumerate(active) if ks[i] > j]
            if not keep:
                break
            if len(keep) < len(active):
                kept = torch.tensor(keep, dtype=torch.int64, device=runner.device)
                tok = tok.index_select(0, kept)
                active = [active[n] for n in keep]
                native = None if native is None else (native[0].index_select(0, kept), native[1].index_select(0, kept))
            # one native call (no metadata tensors) where it runs, else a forward pass
            decode = self._native_decode  # not None where `native` is
            hidden = None if native is None or decode is None else decode(tok, runner.kv_caches, native[0] + (j - 1),
                                                                          native[1])
            if hidden is None:
                at = [pos[i] + j - 1 for i in active]  # the previous guess's position
                hidden = self._forward(tok, runner.kv_caches, self._decode_meta(at, [tables[i] for i in active]))
            tok = self._logits(hidden).argmax(dim=-1)  # [n]
            rounds.append((active, tok))
        out: list[list[int]] = [[] for _ in inputs]
        for indices, toks in rounds:
            for i, t in zip(indices, toks.tolist(), strict=True):
                out[i].append(t)
        return out

    def _short_catch_up(self, inputs: list[RunnerInput]) -> torch.Tensor | None:
        """Round 0 as native decode rounds, one a token, where every sequence catches up by the
        same few tokens (after a verify, usually one: the correction or bonus token; the
        accepted guesses' KV is already there): [B, hidden] at each one's last token. None
        where that does not run (the caller takes the ragged forward pass, which rewrites any
        position a round here wrote)."""
        decode = self._native_decode
        count = len(inputs[0].token_ids)
        if decode is None or count > SHORT_CATCH_UP or any(len(inp.token_ids) != count for inp in inputs):
            return None
        starts = [inp.start_pos for inp in inputs]
        tables = torch.tensor(self._padded([p + count - 1 for p in starts], [inp.block_table for inp in inputs]),
                              dtype=torch.int32)
        positions = torch.tensor(starts)
        hidden = None
        for j in range(count):
            ids = torch.tensor([inp.token_ids[j] for inp in inputs])
            hidden = decode(ids, self.runner.kv_caches, positions + j, tables)
            if hidden is None:
                return None
        return hidden

    def _native_inputs(self, pos: list[int], tables: list[list[int]],
                       ks: list[int]) -> tuple[torch.Tensor, torch.Tensor] | None:
        """For LeanForward's native decode round: where each sequence feeds draft 1 [B] int64, and
        its block table [B, W] int32 wide enough for its last round; None where it does not run."""
        if self._native_decode is None or max(ks) < 2:
            return None
        last = [p + k - 2 for p, k in zip(pos, ks, strict=True)]
        return torch.tensor(pos), torch.tensor(self._padded(last, tables), dtype=torch.int32)

    def _padded(self, positions: list[int], tables: list[list[int]]) -> list[list[int]]:
        """Each table cut or padded to the blocks the furthest position needs."""
        width = max(p // self.runner.block_size + 1 for p in positions)
        return [t[:width] + [0] * (width - len(t[:width])) for t in tables]

    def _decode_meta(self, positions: list[int], tables: list[list[int]]) -> AttentionMetadata:
        """Attention metadata of one decode token per sequence at `positions`."""
        bs, device = self.runner.block_size, self.runner.device
        assert self.runner.model.cos_sin is not None  # set by DecoderModel.from_state_dict
        slots = [t[p // bs] * bs + p % bs for p, t in zip(positions, tables, strict=True)]
        padded = self._padded(positions, tables)
        table = self.runner.model.cos_sin
        # longrope: the draft does not know the prompt's length here; a decode row is long from
        # long_from on (only the draft's guesses depend on it, never the verified tokens)
        rows = table_rows(positions, table.shape[0], self.runner.config.rope.long_from, 0)
        pos_t = torch.tensor(rows, dtype=torch.int64).to(device, non_blocking=True)
        local = self.runner.model.cos_sin_local  # Gemma 3's sliding layers
        return AttentionMetadata(
            slot_mapping=torch.tensor(slots, dtype=torch.int64).to(device, non_blocking=True),
            cos_sin=self.runner.model.cos_sin.index_select(0, pos_t),
            num_decodes=len(positions),
            decode_block_tables=torch.tensor(padded, dtype=torch.int32).to(device, non_blocking=True),
            decode_seq_lens=torch.tensor([p + 1 for p in positions], dtype=torch.int32).to(device, non_blocking=True),
            decode_max_seq_len=max(positions) + 1,
            prefill_block_tables=None, prefill_query_start_loc=None, prefill_seq_lens=None,
            cos_sin_local=None if local is None else local.index_select(
                0, torch.tensor(positions, dtype=torch.int64).to(device, non_blocking=True)),
        )

    def _catch_up(self, req: ProposalRequest) -> RunnerInput | None:
        """Round 0's input for one sequence: the tokens its draft cache is missing."""
        tokens = req.token_ids
        seq = self._seqs.get(req.request_id)
        if seq is None:
            seq = self._seqs[req.request_id] = _DraftSeq(SchedRequest(req.request_id, [], 1))
        fed = seq.fed
        limit = min(len(fed), len(tokens) - 1)  # the last token is always run: its logits are needed
        # Usually the sequence still starts with what was verified when last fed (one C-speed
        # comparison); the guesses after it are compared one by one.
        same = seq.verified if seq.verified <= limit and fed[: seq.verified] == tokens[: seq.verified] else 0
        while same < limit and fed[same] == tokens[same]:
            same += 1
        # Positions up to len + k - 2 get draft KV (the last guess is never fed).
        end = len(tokens) + req.num_tokens - 1
        if end > self.runner.max_model_len:
            return None
        seq.kv.num_computed_tokens = same
        if not self.kv.allocate_slots(seq.kv, end - same):
            self.drop(req.request_id)  # the draft pool is full: this sequence gets no guess
            return None
        seq.fed, seq.verified = tokens[:], len(tokens)  # after round 0 the cache holds the sequence
        table = list(self.kv.block_table(req.request_id))
        return RunnerInput(req.request_id, tokens[same:], same, table, True, _GREEDY)
