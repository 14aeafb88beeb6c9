"""The draft model's forward pass as plain function calls, for its many tiny steps.

A draft proposes k tokens with k forward passes of a batch of one token per sequence; at batch
1 on the CPU such a pass is almost all per-call overhead: nn.Module dispatch (a dozen module
calls per layer) and the packed oneDNN linears, which cost ~10 us a call more than `F.linear`
on one row (kernels/layers/panel_linear.py packs for steps of many rows). `LeanForward` runs the same
computation as `DecoderModel.forward` (model.py: pre-norm Llama layers, fused QKV and
gate/up projections, and each layer's attention through the model's own `paged_attention`) from
dense weights of its own, as a loop over layers with no modules. It serves any batch the model
does (decode and prefill chunks), so round 0's catch-up runs on it too. The draft's guesses only need to be
deterministic: the target verifies every one, so float32 rounding that differs from the
packed path cannot change an output.

A decode-only step (one token per sequence: the proposer's rounds j >= 1) on float32 CPU
weights and an unquantized cache runs as one native call instead (kernels/programs/draft_round.py):
the same computation, only the linears' summation order differs.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from fairgate.backends.local.model.config import ModelConfig
from fairgate.backends.local.model.llama import (
    AttentionMetadata,
    DecoderModel,
    LayerKV,
    paged_attention,
)
from fairgate.backends.local.model.loader import load_weights
from fairgate.kernels import KernelPlan, LayerWeights, QuantLinear, QuantMethod, quantize_weight


class LeanForward:
    """`DecoderModel.forward` without nn.Module calls: `hidden(input_ids, kv_caches, meta)`, then
    `logits(hidden)`."""

    def __init__(self, model: DecoderModel, state: dict[str, torch.Tensor], int8_head: bool = True) -> None:
        cfg = model.cfg
        self.cfg = cfg
        self.embed = model.embed_tokens.weight
        # dense, not the model's packed lm_head: one row a round (a tied head is the embedding)
        self.lm_head = self.embed if cfg.tie_word_embeddings else state["lm_head.weight"]
        self.kernels = kernels = model.kernels  # the runner's plan
        self._head = _int8_head(self.lm_head, kernels) if int8_head else None
        self._rms_norm, self._silu_mul = kernels.fused.rms_norm, kernels.fused.silu_mul  # bound once: seven a round
        self.norm = model.norm.weight
        self.cos_sin = model.cos_sin
        self.layers = [self._layer(model, state, i) for i in range(cfg.num_layers)]
        # the native round indexes the table by position: not for longrope's two sets of rows
        native_table = self.cos_sin if cfg.rope.long_from is None else None
        self._round = kernels.draft_round(self.embed, self.norm, native_table, self.layers, cfg.num_heads,  # or None
                                          cfg.num_kv_heads, cfg.head_dim, cfg.rms_norm_eps)

    @classmethod
    def load(cls, model_dir: str | Path, cfg: ModelConfig, model: DecoderModel,
             int8_head: bool = True) -> LeanForward | None:
        """From the folder's weights as the runner loaded them; None for a quantized folder
        (its linears are not dense: the draft then runs through its model), and for a
        mixture-of-experts model (its sparse MLP runs in the model, moe.py). `int8_head`:
        the head on int8 codes where the native kernels run (`_int8_head`)."""
        if cfg.quantization is not None or cfg.moe is not None or type(model) is not DecoderModel:
            return None  # a family with its own layers (Gemma 3) or MoE layers runs through its model too
        weight = model.embed_tokens.weight
        state = load_weights(model_dir, cfg, weight.dtype, weight.device, progress=False)
        return cls(model, state, int8_head)

    @staticmethod
    def _layer(model: DecoderModel, state: dict[str, torch.Tensor], i: int) -> LayerWeights:
        p = f"layers.{i}."
        layer = model.decoder_layers()[i]
        return LayerWeights(
            layer.input_norm.weight, state[p + "attn.qkv_proj.weight"], state.get(p + "attn.qkv_proj.bias"),
            state[p + "attn.o_proj.weight"], state.get(p + "attn.o_proj.bias"), layer.post_attn_norm.weight,
            state[p + "mlp.gate_up_proj.weight"], state.get(p + "mlp.gate_up_proj.bias"),
            state[p + "mlp.down_proj.weight"], state.get(p + "mlp.down_proj.bias"),
            *layer.attn.qk_norm_weights(),
        )

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[N, vocab] float32, as `DecoderModel.compute_logits` (from int8 weights on the CPU)."""
        if self._head is not None:
            return self._head(hidden)
        return F.linear(hidden, self.lm_head).float()

    def hidden(self, input_ids: torch.Tensor, kv_caches: list[LayerKV], meta: AttentionMetadata) -> torch.Tensor:
        """[T, hidden] after the final norm, as `DecoderModel.forward` returns."""
        if self._round is not None and meta.num_decodes == input_ids.shape[0] and kv_caches[0][2] is None:
            assert meta.decode_block_tables is not None and meta.decode_seq_lens is not None  # every row decodes
            # kernel boundary: it takes the caches as tuple[Tensor, ...] and reads k and v only
            out = self._round(input_ids, kv_caches, meta.cos_sin, meta.slot_mapping,  # type: ignore[arg-type]
                              meta.decode_block_tables, meta.decode_seq_lens)
            if out is not None:
                return out
        eps, rms_norm = self.cfg.rms_norm_eps, self._rms_norm
        h = F.embedding(input_ids, self.embed)  # [T, hidden], the residual stream
        pending = None
        for layer, cache in zip(self.layers, kv_caches, strict=True):
            x = rms_norm(h, layer.input_norm, eps) if pending is None else rms_norm(pending, layer.input_norm, eps, h)
            x = rms_norm(self._attention(layer, x, cache, meta), layer.post_norm, eps, h)
            pending = F.linear(self._silu_mul(F.linear(x, layer.gate_up, layer.gate_up_bias)),
                               layer.down, layer.down_bias)
        return rms_norm(h, self.norm, eps) if pending is None else rms_norm(pending, self.norm, eps, h)

    def decode_hidden(self, input_ids: torch.Tensor, kv_caches: list[LayerKV], positions: torch.Tensor,
                      block_tables: torch.Tensor) -> torch.Tensor | None:
        """`hidden` of one decode token per sequence (`input_ids` [B] at `positions` [B] int64,
        `block_tables` [B, W] int32) in one native call; None where that does not run (the
        caller builds the step's metadata and calls `hidden`)."""
        if self._round is None or kv_caches[0][2] is not None:
            return None
        # kernel boundary: it takes the caches as tuple[Tensor, ...] and reads k and v only
        return self._round.at_positions(input_ids, kv_caches, positions, block_tables)  # type: ignore[arg-type]

    def _attention(self, layer: LayerWeights, x: torch.Tensor, cache: LayerKV, meta: AttentionMetadata) -> torch.Tensor:
        cfg = self.cfg
        qkv = F.linear(x, layer.qkv, layer.qkv_bias)  # [T, (H + 2 Hkv) * D]
        if layer.q_norm is not None and layer.k_norm is not None:  # Qwen3
            qkv = self.kernels.qk_norm(qkv, layer.q_norm, layer.k_norm, cfg.rms_norm_eps, cfg.num_heads,
                                       cfg.num_kv_heads)
        out = paged_attention(self.kernels, qkv, cache, meta, cfg.num_heads, cfg.head_dim**-0.5)  # [T, H * D]
        return F.linear(out, layer.o, layer.o_bias)


INT8_HEAD_MIN_BYTES = 1 << 20  # a float head smaller than this stays in a core's cache between rounds


def _int8_head(weight: torch.Tensor, kernels: KernelPlan) -> QuantLinear | None:
    """The head as an int8 layer on the native CPU kernels, or None (elsewhere, or without them).

    The head is most of a small draft's round (vocab x hidden floats read for one row: 60 us
    for 6144 x 128 here); int8 codes are a quarter of that memory and the int8-activation
    kernel takes 23 us. The head only ranks the draft's guesses, which the target verifies:
    rounding there can change a guess (the acceptance the bench measures), never an output."""
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not kernels.native:
        return None
    if weight.numel() * weight.element_size() < INT8_HEAD_MIN_BYTES:  # in cache anyway: float is as fast
        return None
    head = kernels.quant_linear(quantize_weight(weight.detach(), QuantMethod.parse("int8-a8")), None)
    return head if head.native else None
