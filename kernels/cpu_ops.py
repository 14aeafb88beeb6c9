"""The CPU kernel set: the native decode attention (cpu_attention.c) with the torch reference
for the rest, exactly the signatures of `kernels.reference`.

Prefill attention stays on torch's fused flash kernel (its queries come in blocks, which that
kernel handles well); writing KV is one indexed copy either way (quantized rows: a few
elementwise ops first).
"""

from __future__ import annotations

from kernels.cpu_native import paged_decode_attention
from kernels.reference import paged_prefill_attention, write_kv

__all__ = ["write_kv", "paged_decode_attention", "paged_prefill_attention"]
