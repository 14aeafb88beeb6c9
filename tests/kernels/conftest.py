"""Run the Triton kernels on the CPU through Triton's interpreter when there is no GPU.

`triton.jit` reads TRITON_INTERPRET when a kernel module is imported, so it is set here, at
collection time, before anything of ours imports triton (the dispatch imports it lazily). If
some earlier test in the same process already imported the kernels compiled for CUDA, they are
re-imported under the interpreter. With a GPU the tests run the real kernels on CUDA instead,
and the variable is left alone so other suites' Triton calls are not slowed down.
"""

from __future__ import annotations

import importlib
import os
import sys

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

_TRITON_MODULES = (
    "fairgate.kernels.triton.cache", "fairgate.kernels.triton.decode", "fairgate.kernels.triton.prefill", "fairgate.kernels.triton.quant",
    "fairgate.kernels.triton.ops",
)


def _reimport_if_compiled() -> None:
    """Kernels built before TRITON_INTERPRET was set cannot take CPU tensors: rebuild them."""
    decode = sys.modules.get("fairgate.kernels.triton.decode")
    if HAS_CUDA or decode is None or os.environ.get("TRITON_INTERPRET") != "1":
        return
    from fairgate.kernels.triton.common import is_interpreted

    if is_interpreted(decode._decode_split_kernel):
        return
    for name in _TRITON_MODULES:  # dependency order: triton_ops re-binds the fresh functions
        if name in sys.modules:
            importlib.reload(sys.modules[name])


try:
    import triton  # noqa: F401
except ImportError:  # e.g. macOS: the torch path is all there is; Triton tests importorskip
    pass
else:
    _reimport_if_compiled()


@pytest.fixture
def device() -> torch.device:
    return torch.device("cuda" if HAS_CUDA else "cpu")
