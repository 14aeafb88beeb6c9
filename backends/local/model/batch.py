"""Turn a step's RunnerInputs into the flat tensors one forward pass needs.

Everything here is built once per step on the host and moved to the device in a handful of
copies; layers only index into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fairgate.backends.local.engine.types import RunnerInput
from fairgate.backends.local.model.llama import AttentionMetadata
from fairgate.backends.local.model.rope import table_rows

# Which inputs run through the decode attention kernel, one row per token (each row attends to
# its own position and those before it), instead of the prefill path:
# - speculative verify chunks, always: a verify row then attends exactly as the plain decode
#   step at its position would (the same kernel, the same sums), so greedy output keeps its bits;
# - other short chunks (a draft's catch-up, a prompt's short last chunk) while the rows' work is
#   small: the prefill path pays ~0.1 ms per sequence (masks, one SDPA call each) but does the
#   arithmetic about twice as fast, and the two cross near q * context * heads = 28K (measured
#   on this CPU at 12 and 4 heads, contexts 128-512).
DECODE_ROWS_MAX = 16
ROW_ATTENTION_WORK = 24_576  # q * context * heads up to which a short chunk runs as decode rows


def _as_decode_rows(inp: RunnerInput, num_heads: int) -> bool:
    n = len(inp.token_ids)
    if n == 1 or inp.num_spec_tokens:
        return True
    return n <= DECODE_ROWS_MAX and n * (inp.start_pos + n) * num_heads <= ROW_ATTENTION_WORK


@dataclass(slots=True)
class StepBatch:
    input_ids: torch.Tensor  # [T] int64, short inputs' tokens (decode rows) first, then prefill chunks
    meta: AttentionMetadata
    order: list[int]  # execution position -> index into the caller's inputs
    token_start: list[int]  # per caller input: offset of its first token in input_ids
    token_count: list[int]  # per caller input: number of new tokens


def _check(inp: RunnerInput, block_size: int, max_model_len: int, vocab_size: int) -> None:
    end = inp.start_pos + len(inp.token_ids)
    if not inp.token_ids:
        raise ValueError(f"request {inp.request_id}: no tokens to run")
    if min(inp.token_ids) < 0 or max(inp.token_ids) >= vocab_size:
        raise ValueError(f"request {inp.request_id}: token id outside the vocabulary (0..{vocab_size - 1})")
    if end > max_model_len:
        raise ValueError(f"request {inp.request_id}: length {end} exceeds max_model_len {max_model_len}")
    if len(inp.block_table) * block_size < end:
        raise ValueError(
            f"request {inp.request_id}: block table covers {len(inp.block_table) * block_size}"
            f" positions, needs {end}"
        )


def _padded_tables(tables: list[list[int]]) -> list[list[int]]:
    width = max(len(t) for t in tables)
    return [t + [0] * (width - len(t)) for t in tables]  # padding block 0 is masked by seq_lens


def build_step(
    inputs: Sequence[RunnerInput],
    block_size: int,
    max_model_len: int,
    cos_sin_table: torch.Tensor,  # [max_positions, 2, head_dim]
    device: torch.device,
    vocab_size: int,
    num_heads: int = 1,
    long_from: int | None = None,
    local_table: torch.Tensor | None = None,  # [max_positions, 2, head_dim], Gemma 3's sliding layers
) -> StepBatch:
    """Order inputs (those run as decode rows first) and build ids, slots, positions and tables.

    `long_from`: longrope's original context (`RopeConfig.long_from`): the table then holds
    short rows and long rows, and each sequence reads the set transformers would pick.
    `local_table`: Gemma 3's sliding layers' own RoPE table, gathered into meta.cos_sin_local.
    Raises ValueError for an input the model cannot run (empty, past max_model_len, a block
    table too short, a token id outside the vocabulary) before anything is written.
    """
    for inp in inputs:
        _check(inp, block_size, max_model_len, vocab_size)
    rows = [_as_decode_rows(inp, num_heads) for inp in inputs]
    decodes = [i for i, as_rows in enumerate(rows) if as_rows]
    prefills = [i for i, as_rows in enumerate(rows) if not as_rows]
    order = decodes + prefills

    ids: list[int] = []
    positions: list[int] = []
    rows_at: list[int] = []  # cos_sin table row of each token
    slots: list[int] = []
    token_start = [0] * len(inputs)
    token_count = [0] * len(inputs)
    for i in order:
        inp = inputs[i]
        n, start, table = len(inp.token_ids), inp.start_pos, inp.block_table
        token_start[i], token_count[i] = len(ids), n
        ids.extend(inp.token_ids)
        pos = range(start, start + n)
        positions.extend(pos)
        rows_at.extend(table_rows(pos, cos_sin_table.shape[0], long_from, len(inp.prompt_token_ids)))
        slots.extend(table[p // block_size] * block_size + p % block_size for p in pos)

    pos_t = torch.tensor(rows_at, dtype=torch.int64).to(device, non_blocking=True)
    meta = _attention_metadata(
        inputs, decodes, prefills, block_size, device,
        slot_mapping=torch.tensor(slots, dtype=torch.int64).to(device, non_blocking=True),
        cos_sin=cos_sin_table.index_select(0, pos_t),  # [T, 2, head_dim]
    )
    if local_table is not None:
        local_pos = torch.tensor(positions, dtype=torch.int64).to(device, non_blocking=True)
        meta.cos_sin_local = local_table.index_select(0, local_pos)
    input_ids = torch.tensor(ids, dtype=torch.int64).to(device, non_blocking=True)
    return StepBatch(input_ids, meta, order, token_start, token_count)


def _attention_metadata(inputs: Sequence[RunnerInput], decodes: list[int], prefills: list[int], block_size: int,
                        device: torch.device, slot_mapping: torch.Tensor, cos_sin: torch.Tensor) -> AttentionMetadata:
    def blocks_needed(i: int) -> list[int]:
        inp = inputs[i]
        ctx = inp.start_pos + len(inp.token_ids)
        return list(inp.block_table[: (ctx + block_size - 1) // block_size])

    def i32(values: Sequence[int] | Sequence[Sequence[int]]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.int32).to(device, non_blocking=True)

    # A short input runs each of its tokens as a decode row: token p sees positions 0 .. p, its
    # sequence's block table repeated (every new token's KV is written before attention).
    dec_lens = [p + 1 for i in decodes
                for p in range(inputs[i].start_pos, inputs[i].start_pos + len(inputs[i].token_ids))]
    dec_tables = [t for i in decodes for t in [blocks_needed(i)] * len(inputs[i].token_ids)]
    pre_lens = [inputs[i].start_pos + len(inputs[i].token_ids) for i in prefills]
    qsl = [0]
    for i in prefills:
        qsl.append(qsl[-1] + len(inputs[i].token_ids))
    return AttentionMetadata(
        slot_mapping=slot_mapping,
        cos_sin=cos_sin,
        num_decodes=len(dec_lens),
        decode_block_tables=i32(_padded_tables(dec_tables)) if decodes else None,
        decode_seq_lens=i32(dec_lens) if decodes else None,
        decode_max_seq_len=max(dec_lens, default=0),
        prefill_block_tables=i32(_padded_tables([blocks_needed(i) for i in prefills])) if prefills else None,
        prefill_query_start_loc=i32(qsl) if prefills else None,
        prefill_seq_lens=i32(pre_lens) if prefills else None,
    )
