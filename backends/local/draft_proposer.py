"""A small draft model proposes k tokens per sequence, batched, on its own paged KV cache.

The draft is a second `ModelRunner` in the same engine (same device, same block size) with its
own KV pool and its own `BlockManager` (no prefix caching: draft KV is a private scratch
space). Per step, for the sequences that want drafts:

  round 0   one ragged pass: each sequence catches its draft cache up to its last token (a new
            sequence's whole prompt, else the tokens verified since the last proposal), and the
            draft's greedy token at the last position is draft 1;
  round j   one batched decode pass of the sequences still short of their k: draft j + 1.

Draft KV written for guesses that the target then rejected is simply recomputed: the next
proposal starts from the longest prefix of what the draft was fed that is still the sequence.
The draft decodes greedily, so its proposals are deterministic (q one-hot; see spec_verify.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from backends.local.block_manager import BlockManager
from backends.local.proposers import ProposalRequest
from backends.local.runner import ModelRunner
from backends.local.types import RunnerInput, SamplingParams
from scheduler.request import SchedRequest

_GREEDY = SamplingParams(temperature=0.0)


@dataclass(slots=True)
class _DraftSeq:
    kv: SchedRequest  # the draft block manager's view: num_computed_tokens = draft KV present
    fed: list[int] = field(default_factory=list)  # tokens whose KV the draft cache holds, in order


class DraftModelProposer:
    """Implements `proposers.Proposer` with a draft `ModelRunner`."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.kv = BlockManager(runner.num_kv_blocks, runner.block_size, enable_prefix_caching=False)
        self._seqs: dict[str, _DraftSeq] = {}

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

    def propose(self, requests: list[ProposalRequest]) -> dict[str, list[int]]:
        inputs: list[RunnerInput] = []
        wanted: list[ProposalRequest] = []
        for req in requests:
            inp = self._catch_up(req)
            if inp is not None:
                inputs.append(inp)
                wanted.append(req)
        drafts: dict[str, list[int]] = {req.request_id: [] for req in wanted}
        while inputs:
            tokens = self.runner.execute(inputs)
            step: list[RunnerInput] = []
            for inp, req, tok in zip(inputs, wanted, tokens, strict=True):
                assert isinstance(tok, int)
                out = drafts[req.request_id]
                out.append(tok)
                if len(out) < req.num_tokens:  # feed the guess to get the next one
                    pos = inp.start_pos + len(inp.token_ids)
                    step.append(RunnerInput(req.request_id, [tok], pos, inp.block_table, True, _GREEDY))
            wanted = [r for r in wanted if len(drafts[r.request_id]) < r.num_tokens]
            inputs = step
        for request_id, out in drafts.items():
            seq = self._seqs[request_id]
            seq.fed.extend(out[:-1])  # the last guess was never fed
        return drafts

    def _catch_up(self, req: ProposalRequest) -> RunnerInput | None:
        """Round 0's input for one sequence: the tokens its draft cache is missing."""
        tokens = req.token_ids
        seq = self._seqs.get(req.request_id)
        if seq is None:
            seq = self._seqs[req.request_id] = _DraftSeq(SchedRequest(req.request_id, [], 1))
        fed = seq.fed
        same = 0
        limit = min(len(fed), len(tokens) - 1)  # the last token is always run: its logits are needed
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
        seq.fed = tokens[:]  # after round 0 the cache holds the whole sequence
        table = list(self.kv.block_table(req.request_id))
        return RunnerInput(req.request_id, tokens[same:], same, table, True, _GREEDY)
