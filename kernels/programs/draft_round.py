"""A small float32 Llama model's decode round (one token per sequence) in one native call
(cpu_draft.c): embedding gather, every layer, final RMSNorm.

For a draft model's rounds j >= 1, whose per-op path at batch 1 is mostly call overhead.
The norms, RoPE with the KV write, attention and SwiGLU are the per-op kernels themselves
(cpu_fused.c, cpu_attention.c, passed in as function pointers); the linears run on weights
packed here once in panels of 64 output columns ([K, 64] each: `pack_panels`), so only their
summation order differs from `F.linear`.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

from fairgate.kernels.layers.panel_linear import pack_panels  # cpu_draft.c's PANEL is abi.PANEL
from fairgate.kernels.native import abi
from fairgate.kernels.native.abi import LANES  # head_dim and every linear's width must be multiples

KV = tuple[torch.Tensor, ...]  # a layer's (k_cache, v_cache, ...): the first two are read
_WEIGHTS = abi.LAYER_FIELDS[:-2]  # the layer's tensors; the caches are bound per call


@dataclass(slots=True)
class LayerWeights:
    """One layer's float32 weights in torch's layout: linears [out, in], biases [out] or None."""

    input_norm: torch.Tensor
    qkv: torch.Tensor  # [(H + 2 Hkv) * D, hidden]
    qkv_bias: torch.Tensor | None
    o: torch.Tensor  # [hidden, H * D]
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # [2 * inter, hidden]
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor  # [hidden, inter]
    down_bias: torch.Tensor | None
    q_norm: torch.Tensor | None = None  # [D], Qwen3's per-head norms (both or neither)
    k_norm: torch.Tensor | None = None


class DecodeRound:
    """One decode step, one token per sequence -> [B, hidden] after the final norm; None when
    the caches are not float32 [blocks, block_size, Hkv, D] (the caller takes its per-op path).

    `__call__` takes a step's decode metadata; `at_positions` only the positions and block
    tables (slots, lengths and RoPE rows are derived in C: no per-round metadata tensors)."""

    def __init__(self, lib: ctypes.CDLL, embed: torch.Tensor, final_norm: torch.Tensor, cos_sin: torch.Tensor,
                 layers: list[LayerWeights], heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
        self._lib = lib
        self._keep: list[torch.Tensor] = [embed, final_norm, cos_sin]  # alive as long as C holds pointers
        self._layers = (abi.Layer * len(layers))()
        for slot, w in zip(self._layers, layers, strict=True):
            for name in _WEIGHTS:
                t = getattr(w, name)
                if t is not None:
                    t = pack_panels(t.detach()) if t.dim() == 2 else t.detach().contiguous()
                    self._keep.append(t)
                    setattr(slot, name, t.data_ptr())
        attention, fused = abi.load(abi.ATTENTION), abi.load(abi.FUSED)
        assert attention is not None and fused is not None  # `build` checked
        inter = layers[0].down.shape[1] if layers else 0
        fn = [abi.address(fused, "rms_norm"), abi.address(fused, "silu_mul"), abi.address(fused, "rope_write_kv"),
              abi.address(attention, "paged_decode_attention"), abi.address(fused, "qk_norm")]
        self._model = abi.DraftModel(len(layers), embed.shape[1], heads, kv_heads, head_dim, inter, 0, cos_sin.shape[0],
                             embed.shape[0], eps, head_dim**-0.5, embed.data_ptr(), final_norm.data_ptr(), cos_sin.data_ptr(),
                             self._layers, *fn)
        self._bound: tuple[object, int] = (None, 0)  # the caches the layers point at: (list, first pointer)

    @classmethod
    def build(cls, embed: torch.Tensor, final_norm: torch.Tensor, cos_sin: torch.Tensor, layers: list[LayerWeights],
              heads: int, kv_heads: int, head_dim: int, eps: float) -> DecodeRound | None:
        """The round for float32 CPU weights (cos_sin: [max_positions, 2, head_dim], the model's
        RoPE table), or None: other dtypes or devices, a head_dim the attention kernel does not
        take, or native libraries that did not build."""
        tensors = [embed, final_norm, cos_sin, *(getattr(w, f) for w in layers for f in _WEIGHTS)]
        if any(t is not None and (t.device.type != "cpu" or t.dtype != torch.float32) for t in tensors):
            return None
        if head_dim % LANES or not all(t.is_contiguous() for t in (embed, final_norm, cos_sin)):
            return None
        if tuple(cos_sin.shape[1:]) != (2, head_dim) or any(w.shape[0] % LANES for w in _linears(layers)):
            return None
        if any((w.q_norm is None) != (w.k_norm is None) or any(t.shape != (head_dim,) for t in (w.q_norm, w.k_norm)
                                                                if t is not None) for w in layers):
            return None
        lib = abi.load(abi.DRAFT)
        if lib is None or abi.load(abi.ATTENTION) is None or abi.load(abi.FUSED) is None:
            return None
        return cls(lib, embed, final_norm, cos_sin, layers, heads, kv_heads, head_dim, eps)

    def __call__(self, input_ids: torch.Tensor, kv_caches: list[KV], cos_sin: torch.Tensor, slots: torch.Tensor,
                 block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor | None:
        # input_ids [B] int64, cos_sin [B, 2, D] float32, slots [B] int64, block_tables [B, W]
        # int32, seq_lens [B] int32
        if (input_ids.dtype, cos_sin.dtype, slots.dtype, block_tables.dtype, seq_lens.dtype) != _META_DTYPES:
            return None
        return self._run(input_ids, kv_caches, None, cos_sin.contiguous(), slots.contiguous(),
                         seq_lens.contiguous(), block_tables)

    def at_positions(self, input_ids: torch.Tensor, kv_caches: list[KV], positions: torch.Tensor,
                     block_tables: torch.Tensor) -> torch.Tensor | None:
        """Tokens `input_ids` [B] int64 at `positions` [B] int64 of the sequences whose blocks are
        `block_tables` [B, W] int32 (wide enough for each position)."""
        if (input_ids.dtype, positions.dtype, block_tables.dtype) != _POSITION_DTYPES:
            return None
        return self._run(input_ids, kv_caches, positions.contiguous(), None, None, None, block_tables)

    def _run(self, input_ids: torch.Tensor, kv_caches: list[KV], positions: torch.Tensor | None,
             cos_sin: torch.Tensor | None, slots: torch.Tensor | None, seq_lens: torch.Tensor | None,
             block_tables: torch.Tensor) -> torch.Tensor | None:
        if not self._bind(kv_caches):
            return None
        batch, ids, tables = input_ids.shape[0], input_ids.contiguous(), block_tables.contiguous()
        out = torch.empty(batch, self._model.hidden, dtype=torch.float32)
        rc = self._lib.draft_decode_round(
            ctypes.byref(self._model), ids.data_ptr(), _ptr(positions), _ptr(cos_sin), _ptr(slots), _ptr(seq_lens),
            tables.data_ptr(), tables.stride(0), batch, out.data_ptr(), torch.get_num_threads())
        if rc == -2:
            raise ValueError("draft_decode_round: a token id past the vocabulary, or a position past the RoPE "
                             "table or its block table")
        if rc != 0:
            raise MemoryError("draft_decode_round: no scratch memory")
        return out

    def _bind(self, kv_caches: list[KV]) -> bool:
        """Point the layers at these caches (once per list of caches); False when they do not fit."""
        if self._bound[0] is kv_caches and self._bound[1] == kv_caches[0][0].data_ptr():
            return True
        m = self._model
        if len(kv_caches) != m.num_layers or not kv_caches:
            return False
        shape = (kv_caches[0][0].shape[1], m.kv_heads, m.head_dim)
        for k, v in (kv[:2] for kv in kv_caches):
            if (k.dtype != torch.float32 or k.device.type != "cpu" or k.dim() != 4 or tuple(k.shape[1:]) != shape
                    or v.shape != k.shape or v.dtype != k.dtype or not k.is_contiguous() or not v.is_contiguous()):
                return False
        for slot, (k, v) in zip(self._layers, (kv[:2] for kv in kv_caches), strict=True):
            slot.k_cache, slot.v_cache = k.data_ptr(), v.data_ptr()
        m.block_size = shape[0]
        self._bound = (kv_caches, kv_caches[0][0].data_ptr())
        return True

_META_DTYPES = (torch.int64, torch.float32, torch.int64, torch.int32, torch.int32)
_POSITION_DTYPES = (torch.int64, torch.int64, torch.int32)


def _linears(layers: list[LayerWeights]) -> list[torch.Tensor]:
    return [t for w in layers for t in (w.qkv, w.o, w.gate_up, w.down)]


def _ptr(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.data_ptr()
