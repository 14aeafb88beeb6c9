"""Load Hugging Face safetensors weights into the engine's module names.

Handles a single `model.safetensors` or a sharded `model.safetensors.index.json`. q/k/v
projections are fused into one `qkv_proj` and gate/up into one `gate_up_proj` at load time, so
each layer runs two matmuls fewer per step; Phi-3 stores them fused already, in the same order
([q; k; v] and [gate; up]), and they load as they are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors import safe_open
from tqdm import tqdm

from fairgate.backends.local.model.config import ModelConfig
from fairgate.backends.local.model.rope import rotary_row_order

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
# A sparse MLP's router and experts: Qwen3-MoE's mlp.gate, mlp.experts.E.{gate,up,down}_proj;
# Mixtral's block_sparse_moe.gate, block_sparse_moe.experts.E.{w1,w3,w2} (w1 gate, w3 up, w2 down).
_MOE = re.compile(r"^(?:mlp|block_sparse_moe)\.(gate|experts\.(\d+)\.(\w+))$")
_EXPERT_MAP: dict[str, tuple[str, int | None]] = {
    "gate_proj": ("gate_up_proj", 0), "w1": ("gate_up_proj", 0), "up_proj": ("gate_up_proj", 1),
    "w3": ("gate_up_proj", 1), "down_proj": ("down_proj", None), "w2": ("down_proj", None),
}
# HF suffix inside a layer -> (our name, which part of a fused tensor, or None)
_LAYER_MAP: dict[str, tuple[str, int | None]] = {
    "self_attn.q_proj": ("attn.qkv_proj", 0),
    "self_attn.k_proj": ("attn.qkv_proj", 1),
    "self_attn.v_proj": ("attn.qkv_proj", 2),
    "self_attn.o_proj": ("attn.o_proj", None),
    "self_attn.qkv_proj": ("attn.qkv_proj", None),  # Phi-3's fused projections
    "mlp.gate_up_proj": ("mlp.gate_up_proj", None),
    "self_attn.q_norm": ("attn.q_norm", None),  # Qwen3's per-head norms
    "self_attn.k_norm": ("attn.k_norm", None),
    "mlp.gate_proj": ("mlp.gate_up_proj", 0),
    "mlp.up_proj": ("mlp.gate_up_proj", 1),
    "mlp.down_proj": ("mlp.down_proj", None),
    "input_layernorm": ("input_norm", None),
    "post_attention_layernorm": ("post_attn_norm", None),
    "pre_feedforward_layernorm": ("pre_ff_norm", None),  # Gemma 3's norms around the MLP
    "post_feedforward_layernorm": ("post_ff_norm", None),
}
_TOP_MAP = {"model.embed_tokens": "embed_tokens", "model.norm": "norm", "lm_head": "lm_head"}
_FUSED_PARTS = {"qkv_proj": 3, "gate_up_proj": 2}  # by the fused module's own name
# Tensors of a `fairgate quantize` folder (kernels/ops/quant_format.py), kept as stored: codes stay
# integers, scales float32. Fusing them along dim 0 is exact (scales are per output channel).
QUANT_KINDS = ("qweight", "scales", "minimum")


def weight_files(model_dir: Path) -> list[Path]:
    """The safetensors files holding the model, in a stable order."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        return [model_dir / name for name in sorted(set(weight_map.values()))]
    single = model_dir / "model.safetensors"
    if single.is_file():
        return [single]
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {model_dir}")
    return files


def _map_name(hf_name: str) -> tuple[str, int | None] | None:
    """Our parameter name and fused-part index for an HF tensor name; None to skip it."""
    stem, _, kind = hf_name.rpartition(".")  # kind: weight | bias | ...
    if "rotary_emb" in hf_name:
        return None  # precomputed inv_freq buffers in older checkpoints
    m = _LAYER.match(stem)
    if m:
        target = _LAYER_MAP.get(m.group(2)) or _moe_target(m.group(2))
        if target is None and m.group(2).endswith("experts"):
            raise KeyError(f"{hf_name}: experts stored as one 3D tensor per layer are not supported; save the"
                           " folder with a tensor per expert (mlp.experts.E.gate_proj ..., as save_pretrained does)")
        if target is None:
            raise KeyError(f"unexpected weight {hf_name}")
        return f"layers.{m.group(1)}.{target[0]}.{kind}", target[1]
    if stem in _TOP_MAP:
        return f"{_TOP_MAP[stem]}.{kind}", None
    raise KeyError(f"unexpected weight {hf_name}")


def _moe_target(suffix: str) -> tuple[str, int | None] | None:
    """Our name and fused part of a sparse MLP tensor (router or expert), or None."""
    m = _MOE.match(suffix)
    if m is None:
        return None
    if m.group(1) == "gate":
        return "mlp.gate", None
    target = _EXPERT_MAP.get(m.group(3))
    return None if target is None else (f"mlp.experts.{m.group(2)}.{target[0]}", target[1])


def _tensor_count(files: list[Path]) -> int:
    """Tensors in the files, from their headers only (the progress bar's total)."""
    total = 0
    for path in files:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            total += len(f.keys())
    return total


def load_weights(
    model_dir: str | Path, cfg: ModelConfig, dtype: torch.dtype, device: torch.device | str = "cpu",
    progress: bool | None = None,
) -> dict[str, torch.Tensor]:
    """Read every weight file and return a state dict in the engine's names (fused, cast, moved).

    A progress bar over the tensors goes to stderr (`progress` None: only on a terminal)."""
    model_dir = Path(model_dir)
    plain: dict[str, torch.Tensor] = {}
    parts: dict[str, dict[int, torch.Tensor]] = {}
    files = weight_files(model_dir)
    bar = tqdm(total=_tensor_count(files), desc=f"Loading {model_dir.name}", unit="tensor",
               disable=None if progress is None else not progress, leave=True)
    for path in files:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for hf_name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                bar.update()
                mapped = _map_name(hf_name)
                if mapped is None:
                    continue
                name, part = mapped
                if name.startswith("layers.") and int(name.split(".")[1]) >= cfg.num_layers:
                    continue
                tensor = f.get_tensor(hf_name)
                if cfg.norm_offset and name.endswith("norm.weight"):
                    # Gemma's norms scale by (1 + w), in float32 as transformers does: fold the 1 in
                    tensor = tensor.float() + cfg.norm_offset
                if name.rpartition(".")[2] not in QUANT_KINDS:
                    tensor = tensor.to(dtype)
                elif tensor.is_floating_point():
                    tensor = tensor.float()
                if part is None:
                    plain[name] = tensor.to(device)
                else:
                    parts.setdefault(name, {})[part] = tensor
    bar.close()
    for name, pieces in parts.items():
        need = _FUSED_PARTS[name.rsplit(".", 2)[1]]
        if len(pieces) != need:
            raise KeyError(f"{name}: found {len(pieces)} of {need} parts to fuse")
        plain[name] = torch.cat([pieces[i] for i in range(need)], dim=0).to(device)
    order = rotary_row_order(cfg)
    if order is not None:  # partial rotary: each q/k head's rotated pairs where the kernels rotate (rope.py)
        for name in [n for n in plain if ".attn.qkv_proj." in n]:
            plain[name] = plain[name][order.to(plain[name].device)].contiguous()  # rows of every kind
    if "lm_head.weight" not in plain and not cfg.tie_word_embeddings:
        raise KeyError("lm_head.weight missing and tie_word_embeddings is false")
    if cfg.tie_word_embeddings:
        plain.pop("lm_head.weight", None)  # the model ties it to embed_tokens
    return plain
