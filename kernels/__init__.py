"""Kernels for the paged engine, and the plan that says which of them runs.

The engine uses what this module exports: a `KernelPlan`, chosen once when a runner starts
(FAIRGATE_KERNELS, the device, what built here; see plan.py) and kept by it, whose methods are
the per-operation dispatch and the builders of the layers and programs below; and the value
types those take. The rooms, by tier:

- `ops/`: per-operation kernels, each with its torch reference (`ops/reference.py`): paged
  attention, KV write (and its quantized formats), RMSNorm, SwiGLU, argmax, the weight formats;
- `layers/`: layer objects swapped into the model: panel and oneDNN linears, quantized linears,
  the greedy LM head;
- `programs/`: whole-model programs, each with the per-operation path as its reference: the
  decoder layer stack and the draft model's decode round in one native call;
- `native/`: the C sources with their shared header, their build, and `abi.py`, the one module
  that loads them and declares every entry point and struct; the OpenMP runtime and huge pages;
- `triton/`: the Triton kernels (CUDA; under TRITON_INTERPRET=1 on the CPU, for tests).

Tests: `python -m pytest -q tests/kernels` (Triton under the interpreter on CPU, real kernels on
CUDA). GPU check and timings: `python bench/kernels_gpu.py`.
"""

from __future__ import annotations

from fairgate.kernels.layers.greedy_head import GreedyHead
from fairgate.kernels.layers.quant_linear import QuantLinear
from fairgate.kernels.native import hugepages
from fairgate.kernels.native.openmp import release_pool
from fairgate.kernels.ops.kv_quant import KV_FORMATS, SCALE_DTYPE, cache_shape
from fairgate.kernels.ops.quant_format import QuantizedWeight, QuantMethod, quantize_weight
from fairgate.kernels.ops.reference import apply_rope
from fairgate.kernels.plan import (
    GEMM_CHOICES,
    KERNEL_MODES,
    OPERATIONS,
    Choice,
    KernelPlan,
    kernel_mode,
)
from fairgate.kernels.programs.draft_round import DecodeRound, LayerWeights
from fairgate.kernels.programs.layer_stack import NativeStack, StackLayer, StepRows

__all__ = [
    "GEMM_CHOICES", "KERNEL_MODES", "KV_FORMATS", "OPERATIONS", "SCALE_DTYPE", "Choice", "DecodeRound", "GreedyHead",
    "KernelPlan", "LayerWeights", "NativeStack", "QuantLinear", "QuantMethod", "QuantizedWeight", "StackLayer",
    "StepRows", "apply_rope", "cache_shape", "hugepages", "kernel_mode", "quantize_weight", "release_pool",
]
