"""The CPU kernel set: the native decode and prefill attention (native/cpu_attention.c) with the torch
reference for the rest, exactly the signatures of `kernels.ops.reference`.

Prefill attention is native for a float32 cache (every sequence in one call, no mask tensor;
2-2.5x torch's flash kernel at 256-512-token chunks), torch's SDPA per sequence for the others;
writing KV is one indexed copy either way (quantized rows: a few elementwise ops first).
"""

from __future__ import annotations

from fairgate.kernels.ops.cpu_attention import paged_decode_attention, paged_prefill_attention
from fairgate.kernels.ops.reference import write_kv

__all__ = ["write_kv", "paged_decode_attention", "paged_prefill_attention"]
