"""Weight-only quantization of the decoder's linears (int8 per channel, int4 per group).

Two ways in, one result: a float checkpoint quantized while it loads (`--quantization int8`),
or a folder written by `fairgate quantize` (codes and scales in safetensors, the method in
config.json's `quantization_config`). Either way the runner gets one `QuantLinear` per decoder
linear, each expert's included (Mixtral, Qwen3-MoE); the embedding, the LM head and an MoE
router (a few KiB that decide which experts run) stay in the model's dtype.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from fairgate.backends.local.model.loader import weight_files
from fairgate.kernels import KernelPlan, QuantizedWeight, QuantLinear, QuantMethod, quantize_weight

# Our module names of the decoder's linears (after the loader's q/k/v and gate/up fusion).
LINEAR_NAMES = ("attn.qkv_proj", "attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")
_EXPERT_LINEAR = re.compile(r"^layers\.\d+\.mlp\.experts\.\d+\.(gate_up_proj|down_proj)$")


@runtime_checkable
class _PackedWeight(Protocol):
    """A PackedLinear or PanelLinear (kernels/): a float32 [out, in] weight in a packed layout."""

    packed: object
    in_features: int
    out_features: int


def linear_paths(num_layers: int, state: dict[str, torch.Tensor] | None = None) -> list[str]:
    """The decoder linears' module paths; with `state`, those it holds (an MoE layer has no dense
    MLP) and every expert's."""
    paths = [f"layers.{i}.{name}" for i in range(num_layers) for name in LINEAR_NAMES]
    if state is None:
        return paths
    stems = {key.rpartition(".")[0] for key in state}
    return [p for p in paths if p in stems] + sorted(s for s in stems if _EXPERT_LINEAR.match(s))


def quantized_linears(
    state: dict[str, torch.Tensor], num_layers: int, method: QuantMethod, prequantized: bool,
    device: torch.device, kernels: KernelPlan,
) -> dict[str, nn.Module]:
    """Take every decoder linear's tensors out of `state` and return QuantLinear modules by path.

    `prequantized`: `state` holds codes (`.qweight`, `.scales`, `.minimum`), as saved by
    `save_quantized_state`; otherwise float `.weight`s that are quantized here. `kernels`: the
    runner's plan, which says whether they run on the native CPU kernels.
    """
    native = kernels.native_quant_linears
    out: dict[str, nn.Module] = {}
    for path in linear_paths(num_layers, state):
        bias = state.pop(f"{path}.bias", None)
        if prequantized:
            minimum = state.pop(f"{path}.minimum", None)
            qweight, scale = state.pop(f"{path}.qweight"), state.pop(f"{path}.scales")
            in_features = qweight.shape[1] * (2 if method.bits == 4 else 1)
            qw = QuantizedWeight(method, qweight, scale, minimum, in_features)
        else:
            qw = quantize_weight(state.pop(f"{path}.weight"), method)
        if not native:
            qw = QuantizedWeight(qw.method, qw.qweight.to(device), qw.scale.to(device),
                                 None if qw.minimum is None else qw.minimum.to(device), qw.in_features)
        out[path] = kernels.quant_linear(qw, bias)
    return out


def quantized_tensors(name: str, weight: torch.Tensor, method: QuantMethod) -> dict[str, torch.Tensor]:
    """An HF weight `...proj.weight` as the tensors `fairgate quantize` stores for it."""
    stem = name.removesuffix(".weight")
    qw = quantize_weight(weight, method)
    out = {f"{stem}.qweight": qw.qweight, f"{stem}.scales": qw.scale}
    if qw.minimum is not None:
        out[f"{stem}.minimum"] = qw.minimum
    return out


def weight_bytes(model: nn.Module) -> int:
    """Bytes of every weight the model holds (parameters, packed and quantized layers; a tied
    tensor counted once)."""
    seen: set[int] = set()
    total = 0
    for module in model.modules():
        if isinstance(module, QuantLinear):
            total += module.weight_bytes()
            continue
        if isinstance(module, _PackedWeight):  # has `packed`: a float32 weight in a packed layout
            total += module.in_features * module.out_features * 4
        for t in module.parameters(recurse=False):
            if t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                total += t.numel() * t.element_size()
    return total


_HF_LINEAR = re.compile(r"^model\.layers\.\d+\.(self_attn\.(qkv|[qkvo])_proj|mlp\.(experts\.\d+\.)?(gate_up|gate|up|down)_proj"
                        r"|block_sparse_moe\.experts\.\d+\.w[123])\.weight$")


def quantize_folder(model_dir: str | Path, out_dir: str | Path, method: QuantMethod) -> dict[str, int]:
    """Write a quantized copy of a Hugging Face folder: decoder linears as codes and scales in
    one `model.safetensors`, everything else as it was, and `quantization_config` in config.json.

    Returns byte counts {"linear_bytes_before", "linear_bytes_after", "tensors"}.
    """
    src, out = Path(model_dir), Path(out_dir)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    if config.get("quantization_config"):
        raise ValueError(f"{src} is already quantized")
    out.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    before = after = 0
    for path in weight_files(src):
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no __iter__
                tensor = f.get_tensor(name)
                if _HF_LINEAR.match(name) is None:
                    tensors[name] = tensor.contiguous()
                    continue
                parts = quantized_tensors(name, tensor, method)
                before += tensor.numel() * 4
                after += sum(t.numel() * t.element_size() for t in parts.values())
                tensors.update(parts)
    for item in src.iterdir():  # tokenizer, generation config, eval set, model card
        if item.suffix != ".safetensors" and item.name not in ("config.json", "model.safetensors.index.json"):
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, out / item.name)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config["quantization_config"] = {"quant_method": "fairgate", "method": method.name,
                                     "bits": method.bits, "group_size": method.group or None}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return {"linear_bytes_before": before, "linear_bytes_after": after, "tensors": len(tensors)}


def run_quantize(args: argparse.Namespace) -> int:
    """`fairgate quantize --model DIR --out DIR --method int8|int4[-gN]`."""
    try:
        method = QuantMethod.parse(args.method)
        sizes = quantize_folder(args.model, args.out, method)
    except (ValueError, OSError, KeyError) as exc:
        print(f"fairgate quantize: {exc}", file=sys.stderr)
        return 2
    ratio = sizes["linear_bytes_after"] / max(1, sizes["linear_bytes_before"])
    print(f"wrote {args.out} ({method.name}): decoder linears {sizes['linear_bytes_before'] / 2**20:.1f}"
          f" MiB fp32 -> {sizes['linear_bytes_after'] / 2**20:.1f} MiB (x{ratio:.3f})")
    return 0
