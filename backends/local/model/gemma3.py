"""Gemma 3 text decoder (transformers' Gemma3ForCausalLM, model_type gemma3_text) over the paged cache.

What differs from the Llama layers (llama.py), each as modeling_gemma3.py computes it:
- the embedding is scaled by sqrt(hidden) and the LM head may soft-cap its logits
  (DecoderModel.forward / compute_logits read the config);
- every RMSNorm scales by (1 + w): the loader folds the 1 into the weights, so the plan's
  rms_norm runs them unchanged;
- four norms a layer: attention and MLP outputs are normalised before they join the residual;
- q and k get a per-head norm before RoPE (Qwen3's qk_norm kernel);
- the MLP is gelu_tanh(gate) * up;
- layers interleave: sliding layers attend to the last `sliding_window` positions only and rotate
  by their own RoPE base (rope_local_base_freq), full layers see the whole context. A window runs
  the native CPU attention where the plan runs it (cpu_attention.c's windowed entries), else the
  torch reference (the Triton kernels do not window: on CUDA the sliding layers take the
  reference); full layers the plan's kernels. No native whole-model program takes these layers.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from fairgate.backends.local.model.config import ModelConfig
from fairgate.backends.local.model.llama import (
    Attention,
    AttentionMetadata,
    DecoderModel,
    LayerKV,
    RMSNorm,
)
from fairgate.kernels import KernelPlan

log = logging.getLogger(__name__)


class GeluMLP(nn.Module):
    """gelu_tanh(gate) * up, then down. `swiglu` False keeps pack_linears from fusing a SwiGLU
    into the gate/up projection."""

    swiglu = False

    def __init__(self, cfg: ModelConfig, kernels: KernelPlan) -> None:
        super().__init__()
        self.kernels = kernels
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=cfg.mlp_bias)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=cfg.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down_proj(self.kernels.gelu_tanh_mul(self.gate_up_proj(x)))  # [T, 2 I] -> [T, I] -> [T, hidden]
        return out


class Gemma3Layer(nn.Module):
    def __init__(self, cfg: ModelConfig, kernels: KernelPlan, index: int) -> None:
        super().__init__()
        eps = cfg.rms_norm_eps
        self.input_norm = RMSNorm(cfg.hidden_size, eps, kernels)
        self.attn = Attention(cfg, kernels, index)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, eps, kernels)
        self.pre_ff_norm = RMSNorm(cfg.hidden_size, eps, kernels)
        self.mlp = GeluMLP(cfg, kernels)
        self.post_ff_norm = RMSNorm(cfg.hidden_size, eps, kernels)

    def forward(self, h: torch.Tensor, pending: torch.Tensor | None, cache: LayerKV,
                meta: AttentionMetadata) -> torch.Tensor:
        """As DecoderLayer.forward: returns the normalised MLP output, which the next norm adds to
        the residual stream `h` (updated in place)."""
        x = self.input_norm(h) if pending is None else self.input_norm(pending, h)
        attn = self.post_attn_norm(self.attn(x, cache, meta))  # [T, hidden]
        x = self.pre_ff_norm(attn, h)  # h += attn, then normalised
        out: torch.Tensor = self.post_ff_norm(self.mlp(x))
        return out


class Gemma3Model(DecoderModel):
    """DecoderModel with Gemma 3's layers; it always runs per op (`attach_native_stack` declines)."""

    @staticmethod
    def make_layer(cfg: ModelConfig, kernels: KernelPlan, index: int) -> nn.Module:
        return Gemma3Layer(cfg, kernels, index)

    def attach_native_stack(self) -> bool:
        cfg = self.cfg
        local = sum(t == "sliding_attention" for t in cfg.layer_types)
        windowed = "native CPU kernels" if self.kernels.choice("decode_attention").impl == "native" else "torch reference"
        log.info("gemma3: %d sliding-window layers (window %s) attend on the %s, %d full layers on the kernel plan's;"
                 " GELU-tanh MLP in torch; no native layer stack (per-op layers)",
                 local, cfg.local_window, windowed, cfg.num_layers - local)
        self.native_stack = None
        return False


def decoder_class(cfg: ModelConfig) -> type[DecoderModel]:
    """The model class of a config's family."""
    return Gemma3Model if cfg.model_type == "gemma3_text" else DecoderModel
