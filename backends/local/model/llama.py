"""Llama-style decoder over a paged KV cache (Llama 2/3, Mistral, Qwen2, Qwen3, Phi-3; Mixtral and Qwen3-MoE
with the sparse MLP of moe.py).

The model sees one flat, ragged batch per step: every new token of every sequence in one
[num_tokens] row, decode tokens first, then prefill chunks. Attention writes new K/V through
the kernel plan's `rope_write_kv` and reads through its paged attention; nothing else touches the cache.
Every kernel call goes through the `KernelPlan` the runner chose (`kernels.plan`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple, cast

import torch
from torch import nn

from fairgate.backends.local.model.config import SLIDING, ModelConfig
from fairgate.backends.local.model.moe import mlp_block
from fairgate.backends.local.model.rope import cos_sin_cache
from fairgate.kernels import KernelPlan, NativeStack, StackLayer, StepRows


@dataclass(slots=True)
class AttentionMetadata:
    """Per-step tensors shared by every layer (built once per step by the runner).

    Tokens are ordered: the `num_decodes` decode rows first (one per token of a short input,
    batch.DECODE_ROWS_MAX: each attends to its own position and those before it), then the
    prefill chunks.
    """

    slot_mapping: torch.Tensor  # [num_tokens] int64
    cos_sin: torch.Tensor  # [num_tokens, 2, head_dim], rows for each token's position
    num_decodes: int
    decode_block_tables: torch.Tensor | None  # [num_decodes, max_blocks] int32 (a row per decode row)
    decode_seq_lens: torch.Tensor | None  # [num_decodes] int32, each row's position + 1
    decode_max_seq_len: int
    prefill_block_tables: torch.Tensor | None  # [num_prefills, max_blocks] int32
    prefill_query_start_loc: torch.Tensor | None  # [num_prefills + 1] int32
    prefill_seq_lens: torch.Tensor | None  # [num_prefills] int32
    cos_sin_local: torch.Tensor | None = None  # [num_tokens, 2, head_dim]: Gemma 3's sliding layers' RoPE


class LayerKV(NamedTuple):
    """One layer's share of the KV pool: K and V blocks [num_blocks, block_size, num_kv_heads, W]
    and, for a quantized cache, their float16 scales [num_blocks, block_size, num_kv_heads, S]
    (indexed by the same block ids; see kernels/ops/kv_quant.py)."""

    k: torch.Tensor
    v: torch.Tensor
    k_scale: torch.Tensor | None = None
    v_scale: torch.Tensor | None = None


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, kernels: KernelPlan, layer: int = 0) -> None:
        super().__init__()
        self.kernels = kernels
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_size, self.kv_size = cfg.q_size, cfg.kv_size
        self.scale = cfg.attention_scale
        # Gemma 3's sliding layers: a window over the context and their own RoPE (meta.cos_sin_local)
        self.window = cfg.layer_window(layer)
        self.local_rope = bool(cfg.layer_types) and cfg.layer_types[layer] == SLIDING
        self.qkv_proj = nn.Linear(cfg.hidden_size, cfg.q_size + 2 * cfg.kv_size, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(cfg.q_size, cfg.hidden_size, bias=cfg.o_bias)
        # Qwen3: an RMSNorm over each query and key head, before RoPE ([head_dim] weights)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps, kernels) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps, kernels) if cfg.qk_norm else None

    def qk_norm_weights(self) -> tuple[torch.Tensor, torch.Tensor] | tuple[None, None]:
        """Qwen3's q and k norm weights [head_dim], or (None, None) for the families without."""
        if self.q_norm is None or self.k_norm is None:
            return None, None
        return self.q_norm.weight, self.k_norm.weight

    def forward(self, x: torch.Tensor, cache: LayerKV, meta: AttentionMetadata) -> torch.Tensor:
        qkv = self.qkv_proj(x)  # [T, (H + 2 Hkv) * D]
        if self.q_norm is not None and self.k_norm is not None:  # Qwen3 only
            qkv = self.kernels.qk_norm(qkv, self.q_norm.weight, self.k_norm.weight, self.q_norm.eps, self.num_heads,
                                       self.num_kv_heads)
        cos_sin = meta.cos_sin_local if self.local_rope else None
        # a sliding layer never falls back to the full layers' rotation (build_step fills it)
        assert cos_sin is not None or not self.local_rope, "a sliding layer needs meta.cos_sin_local"
        return self.o_proj(paged_attention(self.kernels, qkv, cache, meta, self.num_heads, self.scale,
                                           self.window, cos_sin))


def paged_attention(kernels: KernelPlan, qkv: torch.Tensor, cache: LayerKV, meta: AttentionMetadata,
                    num_heads: int, scale: float, window: int | None = None,
                    cos_sin: torch.Tensor | None = None) -> torch.Tensor:
    """One layer's attention between its projections, for the model and the draft model's
    LeanForward (draft_forward.py) alike: q and k rotate, k and v go to their cache slots, then
    the decode rows and the prefill chunks attend over the paged cache (only the last `window`
    positions where one is given; `cos_sin` replaces meta.cos_sin, Gemma 3's local RoPE).
    qkv [T, (H + 2 Hkv) * D] -> [T, H * D]."""
    num_tokens = qkv.shape[0]
    k_cache, v_cache, k_scale, v_scale = cache
    # rotation and the KV write: one pass on the CPU. q: [T, H, D]
    q = kernels.rope_write_kv(qkv, meta.cos_sin if cos_sin is None else cos_sin, k_cache, v_cache,
                              meta.slot_mapping, num_heads, k_scale, v_scale)
    windowed = {} if window is None else {"window": window}  # the plan's windowed (reference) path

    def decode(rows: torch.Tensor) -> torch.Tensor:
        return kernels.paged_decode_attention(rows, k_cache, v_cache, meta.decode_block_tables, meta.decode_seq_lens,
                                              scale, meta.decode_max_seq_len, k_scale, v_scale, **windowed)

    def prefill(rows: torch.Tensor) -> torch.Tensor:
        return kernels.paged_prefill_attention(rows, k_cache, v_cache, meta.prefill_block_tables,
                                               meta.prefill_query_start_loc, meta.prefill_seq_lens, scale, k_scale,
                                               v_scale, **windowed)

    nd = meta.num_decodes
    if nd == num_tokens:  # decode-only step: no copy into a shared output
        out = decode(q)
    elif nd == 0:
        out = prefill(q)
    else:
        out = torch.empty_like(q)  # [T, H, D]
        out[:nd] = decode(q[:nd])
        out[nd:] = prefill(q[nd:])
    return out.reshape(num_tokens, -1)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig, kernels: KernelPlan) -> None:
        super().__init__()
        self.kernels = kernels
        self.intermediate = cfg.intermediate_size
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if getattr(self.gate_up_proj, "fused_swiglu", False):  # a panel linear that applies it itself
            return self.down_proj(self.gate_up_proj(x))
        gate_up = self.gate_up_proj(x)  # [T, 2 I]
        return self.down_proj(self.kernels.silu_mul(gate_up))  # SwiGLU: silu(gate) * up, [T, I]


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float, kernels: KernelPlan) -> None:
        super().__init__()
        self.kernels = kernels
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """norm(x); with `residual`, residual += x in place first and the sum is normalised."""
        return self.kernels.rms_norm(x, self.weight, self.eps, residual)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig, kernels: KernelPlan, index: int = 0) -> None:
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, kernels)
        self.attn = Attention(cfg, kernels)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, kernels)
        self.mlp = mlp_block(cfg, kernels, index) or MLP(cfg, kernels)  # sparse MoE or dense

    def forward(self, h: torch.Tensor, pending: torch.Tensor | None, cache: LayerKV,
                meta: AttentionMetadata) -> torch.Tensor:
        """Returns this layer's MLP output, not yet added to the residual stream `h`: the next
        norm adds it (one pass for the add and the norm). `pending` is the previous layer's.
        h is this step's own activation buffer (from the embedding), updated in place."""
        x = self.input_norm(h) if pending is None else self.input_norm(pending, h)
        x = self.post_attn_norm(self.attn(x, cache, meta), h)
        return self.mlp(x)


class DecoderModel(nn.Module):
    """Embedding, decoder layers, final norm and LM head. Parameter names match `loader`.
    `kernels`: the runner's kernel plan, which every layer calls."""

    def __init__(self, cfg: ModelConfig, kernels: KernelPlan) -> None:
        super().__init__()
        self.cfg = cfg
        self.kernels = kernels
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(self.make_layer(cfg, kernels, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, kernels)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.cos_sin: torch.Tensor | None = None  # [max_positions, 2, head_dim], set by from_state_dict
        self.cos_sin_local: torch.Tensor | None = None  # the same for Gemma 3's sliding layers
        self.native_stack: NativeStack | None = None  # every layer in one native call (attach_native_stack)
        self.native_stack_why: str | None = None  # why the layers did not fit it, where they did not

    @staticmethod
    def make_layer(cfg: ModelConfig, kernels: KernelPlan, index: int) -> nn.Module:
        """Decoder layer `index` (a family with other layers overrides this: gemma3.py)."""
        return DecoderLayer(cfg, kernels, index)

    @classmethod
    def from_state_dict(
        cls, cfg: ModelConfig, state: dict[str, torch.Tensor], max_positions: int, kernels: KernelPlan,
        modules: dict[str, nn.Module] | None = None,
    ) -> DecoderModel:
        """Build without allocating random weights, then adopt `state` (from `loader`).

        `modules` replaces submodules by dotted name before the weights load (quantized
        linears, whose tensors are then not in `state`).
        """
        with torch.device("meta"):
            model = cls(cfg, kernels)
        for name, module in (modules or {}).items():
            parent, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(parent), leaf, module)
        model.load_state_dict(state, strict=not cfg.tie_word_embeddings, assign=True)
        if cfg.tie_word_embeddings:
            model.lm_head.weight = model.embed_tokens.weight
        missing = [n for n, p in model.named_parameters() if p.is_meta]
        if missing:
            raise KeyError(f"weights missing from checkpoint: {missing[:5]}")
        weight = model.embed_tokens.weight
        model.cos_sin = cos_sin_cache(cfg, max_positions, weight.dtype, weight.device)
        if cfg.local_rope is not None:
            local = dataclasses.replace(cfg, rope=cfg.local_rope)
            model.cos_sin_local = cos_sin_cache(local, max_positions, weight.dtype, weight.device)
        model.requires_grad_(False)
        return model.eval()

    def decoder_layers(self) -> list[DecoderLayer]:
        """`layers` as what they are (an nn.ModuleList's items are typed `nn.Module`)."""
        return [cast(DecoderLayer, layer) for layer in self.layers]

    def attach_native_stack(self) -> bool:
        """Run every layer of a step in one native call (kernels/programs/layer_stack.py: the same kernels in
        the same order, so the same bits) where the weights allow: float32 panel linears with a
        SwiGLU-fused gate/up, or weight-only int8 / int4 linears on cpu_quant.c, on the CPU. Steps
        on caches it does not take still run per op. A mixture-of-experts model always runs per op
        (the stack has no router or experts). `native_stack_why` keeps why a model did not fit."""
        self.native_stack, self.native_stack_why = None, None
        if self.cfg.moe is not None:
            return False
        # kernel boundary: StackLayer declares PanelLinear / QuantLinear parts, which NativeStack.misfit checks
        layers = [StackLayer(layer.input_norm.weight, layer.attn.qkv_proj, layer.attn.o_proj,  # type: ignore[arg-type]
                             layer.post_attn_norm.weight, layer.mlp.gate_up_proj, layer.mlp.down_proj,  # type: ignore[arg-type]
                             *layer.attn.qk_norm_weights())
                  for layer in self.decoder_layers()]
        cfg = self.cfg
        shape = (self.norm.weight, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim)
        self.native_stack = self.kernels.native_stack(layers, *shape, cfg.rms_norm_eps)
        if self.native_stack is None:
            self.native_stack_why = NativeStack.misfit(layers, *shape)
        return self.native_stack is not None

    def forward(
        self,
        input_ids: torch.Tensor,  # [T] int64
        kv_caches: list[LayerKV],
        meta: AttentionMetadata,
    ) -> torch.Tensor:  # [T, hidden] after the final norm
        h = self.embed_tokens(input_ids)  # [T, hidden], the residual stream
        if self.cfg.embed_scale is not None:  # Gemma: times sqrt(hidden), in the weights' dtype
            h.mul_(torch.tensor(self.cfg.embed_scale).to(h.dtype))
        if self.native_stack is not None:
            rows = StepRows(meta.cos_sin, meta.slot_mapping, meta.num_decodes, meta.decode_block_tables,
                            meta.decode_seq_lens, meta.prefill_block_tables, meta.prefill_query_start_loc,
                            meta.prefill_seq_lens)
            # kernel boundary: it takes the caches as tuple[Tensor, ...] and reads k and v only
            out = self.native_stack(h, kv_caches, rows)  # type: ignore[arg-type]
            if out is not None:
                return out
        pending = None
        for layer, cache in zip(self.layers, kv_caches, strict=True):
            pending = layer(h, pending, cache, meta)
        return self.norm(h) if pending is None else self.norm(pending, h)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:  # [N, vocab] float32
        logits = self.lm_head(hidden)
        cap = self.cfg.final_logit_softcapping
        if cap:  # Gemma: cap * tanh(logits / cap), which keeps the argmax (the greedy head's tokens)
            logits = torch.tanh(logits / cap) * cap
        return logits.float()
