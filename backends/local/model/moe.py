"""The sparse mixture-of-experts MLP of Mixtral and Qwen3-MoE, on the per-op path.

A router linear scores every expert per token; each token runs its top-k experts (SwiGLU MLPs)
and sums their outputs weighted by the softmax of the scores (renormalised over the k where the
config says: transformers' MixtralTopKRouter / Qwen3MoeTopKRouter). Only the selected experts'
rows are computed, grouped by expert: the (token, slot) pairs are sorted by expert, each active
expert runs one matmul pair over the rows routed to it (gathered once into one contiguous
buffer), and each token's k weighted results are added in expert order (the order transformers
adds them in). No index_add_: on the CPU it is a scatter_add_ that took 80% of the block's time.

The expert linears are ordinary `nn.Linear`s, so the runner's plan packs them like the dense
ones (native panel GEMM with the SwiGLU fused, or oneDNN) and `fairgate quantize` / `--quantization`
swap them for QuantLinear. The whole-model native programs (layer stack, draft round) do not take
this block: an MoE model runs its layers per op (`DecoderModel.attach_native_stack`).
"""

from __future__ import annotations

import torch
from torch import nn

from fairgate.backends.local.model.config import ModelConfig
from fairgate.kernels import KernelPlan


class Expert(nn.Module):
    """One expert: SwiGLU over a fused [gate; up] projection (the loader fuses w1/w3 or gate/up)."""

    def __init__(self, hidden: int, intermediate: int, kernels: KernelPlan) -> None:
        super().__init__()
        self.kernels = kernels
        self.gate_up_proj = nn.Linear(hidden, 2 * intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [n, hidden] -> [n, hidden]
        if getattr(self.gate_up_proj, "fused_swiglu", False):  # a panel linear that applies it itself
            hidden: torch.Tensor = self.gate_up_proj(x)  # [n, I], SwiGLU applied
        else:
            hidden = self.kernels.silu_mul(self.gate_up_proj(x))  # silu(gate) * up, [n, I]
        out: torch.Tensor = self.down_proj(hidden)
        return out


class SparseMoeBlock(nn.Module):
    """Router `gate` [num_experts, hidden] and `experts`; forward [T, hidden] -> [T, hidden]."""

    def __init__(self, cfg: ModelConfig, kernels: KernelPlan) -> None:
        super().__init__()
        moe = cfg.moe
        assert moe is not None
        self.top_k, self.norm_topk_prob = moe.top_k, moe.norm_topk_prob
        # Mixtral's router hands its weights on in float32 (each expert's output is scaled in float32,
        # then rounded); Qwen3-MoE's casts them to the activations' dtype first. Same bits in float32.
        self.float_weights = cfg.model_type == "mixtral"
        self.gate = nn.Linear(cfg.hidden_size, moe.num_experts, bias=False)
        self.experts = nn.ModuleList(Expert(cfg.hidden_size, moe.intermediate_size, kernels)
                                     for _ in range(moe.num_experts))

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k routing: (weights [T, k], expert ids [T, k] int64), as transformers' routers:
        softmax in float32 over all experts, top-k, optionally renormalised."""
        probs = torch.softmax(self.gate(x).float(), dim=-1)  # [T, E]
        weights, experts = torch.topk(probs, self.top_k, dim=-1)  # [T, k]
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return (weights if self.float_weights else weights.to(x.dtype)), experts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        num_tokens, k = x.shape[0], self.top_k
        weights, experts = self.route(x)
        experts, slot = experts.sort(dim=-1)  # each token's experts in ascending id: the order they add in
        weights = weights.gather(1, slot)  # [T, k]
        order = torch.argsort(experts.flatten(), stable=True)  # [T * k] pairs grouped by expert
        counts = torch.bincount(experts.flatten(), minlength=len(self.experts)).tolist()  # one host sync a layer
        rows = x.index_select(0, order // k)  # [T * k, hidden]: each expert's rows, contiguous
        ys = torch.empty_like(rows)
        start = 0
        for expert, n in zip(self.experts, counts, strict=True):
            if n:
                ys[start : start + n] = expert(rows[start : start + n])
                start += n
        ys *= weights.flatten()[order, None]
        # back to [T, k, hidden] by token and slot, then the k outputs added in expert order
        # (transformers adds them into zeros expert by expert: the same sums, bit for bit)
        per_slot = ys.index_select(0, torch.argsort(order)).view(num_tokens, k, -1)
        out = per_slot[:, 0].clone()  # [T, hidden]
        for j in range(1, k):
            out += per_slot[:, j]
        return out


def mlp_block(cfg: ModelConfig, kernels: KernelPlan, layer: int) -> SparseMoeBlock | None:
    """Layer `layer`'s sparse MLP, or None where the model's MLP there is the dense one."""
    if cfg.moe is None or not cfg.moe.is_sparse(layer):
        return None
    return SparseMoeBlock(cfg, kernels)
