"""The Triton kernels with exactly the signatures of `kernels.ops.reference`.

Importing this module imports triton and builds the kernels; `kernels` (the dispatch) does that
lazily, the first time a kernel call wants the Triton path.
"""

from __future__ import annotations

from fairgate.kernels.triton.cache import write_kv
from fairgate.kernels.triton.decode import paged_decode_attention
from fairgate.kernels.triton.prefill import paged_prefill_attention
from fairgate.kernels.triton.quant import quant_linear

__all__ = ["write_kv", "paged_decode_attention", "paged_prefill_attention", "quant_linear"]
