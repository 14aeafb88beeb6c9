"""The mixture-of-experts part of a config.json (Mixtral, Qwen3-MoE), read by `config.py`.

Mixtral: every layer's MLP is sparse (`num_local_experts`, experts of `intermediate_size`), and
the top-k routing weights are always renormalised. Qwen3-MoE: `num_experts` of
`moe_intermediate_size`; layer i is sparse unless it is in `mlp_only_layers` or
(i + 1) % `decoder_sparse_step` != 0 (a dense MLP of `intermediate_size` then), and
`norm_topk_prob` says whether the top-k weights are renormalised. Neither has a shared expert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MOE_MODEL_TYPES = ("mixtral", "qwen3_moe")


@dataclass(frozen=True, slots=True)
class MoeConfig:
    num_experts: int
    top_k: int  # experts each token runs (num_experts_per_tok)
    intermediate_size: int  # of each expert's SwiGLU MLP
    norm_topk_prob: bool  # renormalise the top-k softmax weights to sum to 1
    sparse_layers: frozenset[int]  # the layers whose MLP is the sparse block; the others are dense

    def is_sparse(self, layer: int) -> bool:
        return layer in self.sparse_layers


def parse_moe(model_type: str, cfg: dict[str, Any], num_layers: int) -> MoeConfig | None:
    """The MoE settings of a config.json, or None for a dense family."""
    if model_type == "mixtral":
        return MoeConfig(int(cfg["num_local_experts"]), int(cfg["num_experts_per_tok"]),
                         int(cfg["intermediate_size"]), True, frozenset(range(num_layers)))
    if model_type != "qwen3_moe":
        return None
    # Qwen3-MoE folders say num_experts; transformers 5 writes num_local_experts (its attribute_map)
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    step = int(cfg.get("decoder_sparse_step") or 1)
    dense = set(cfg.get("mlp_only_layers") or ())
    sparse = frozenset(i for i in range(num_layers) if i not in dense and experts > 0 and (i + 1) % step == 0)
    return MoeConfig(experts, int(cfg["num_experts_per_tok"]), int(cfg["moe_intermediate_size"]),
                     bool(cfg.get("norm_topk_prob", False)), sparse)
