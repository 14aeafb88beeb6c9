"""Triton weight-only quantized matmul: y = x W^T (+ b) with W as int8 codes and a scale per
output channel, or 4-bit codes with a scale and a minimum per group of inputs.

Same contract as `kernels.ops.reference.quant_linear`; W in the logical layout of
`kernels.ops.quant_format` (what `fairgate quantize` saves). Each program computes a [BM, BN] tile
of y, widening a [BN, BK] tile of codes to float in registers per step: the float weight never
exists in memory, so a decode step reads 1 (int8) or ~0.56 (int4) bytes per weight.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from fairgate.kernels.ops.quant_format import QuantizedWeight
from fairgate.kernels.triton.common import cdiv, check_device


@triton.jit
def _quant_matmul_kernel(
    x_ptr, w_ptr, scale_ptr, min_ptr, bias_ptr, y_ptr,
    M, N, K, stride_x_m, stride_w_n, stride_s_n, stride_y_m,
    GROUP: tl.constexpr, BITS: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        mask_k = offs_k < K
        x = tl.load(x_ptr + offs_m[:, None].to(tl.int64) * stride_x_m + offs_k[None, :],
                    mask=mask_m[:, None] & mask_k[None, :], other=0.0).to(tl.float32)  # [BM, BK]
        w_mask = mask_n[:, None] & mask_k[None, :]
        if BITS == 8:
            w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_w_n + offs_k[None, :],
                        mask=w_mask, other=0).to(tl.float32)  # [BN, BK] codes
        else:
            packed = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_w_n + offs_k[None, :] // 2,
                             mask=w_mask, other=0).to(tl.int32)
            codes = (packed >> ((offs_k[None, :] % 2) * 4)) & 15  # even k in the low nibble
            g = offs_k[None, :] // GROUP
            s_off = offs_n[:, None].to(tl.int64) * stride_s_n + g
            scale = tl.load(scale_ptr + s_off, mask=w_mask, other=0.0)
            minimum = tl.load(min_ptr + s_off, mask=w_mask, other=0.0)
            w = codes.to(tl.float32) * scale + minimum
        acc += tl.dot(x, tl.trans(w), input_precision="ieee")
    if BITS == 8:  # per-channel scale once, after the sum
        acc = acc * tl.load(scale_ptr + offs_n, mask=mask_n, other=0.0)[None, :]
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_n, mask=mask_n, other=0.0)[None, :]
    y_ptrs = y_ptr + offs_m[:, None].to(tl.int64) * stride_y_m + offs_n[None, :]
    tl.store(y_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])


def quant_linear(x: torch.Tensor, qw: QuantizedWeight, bias: torch.Tensor | None = None,
                 block_m: int = 16, block_n: int = 64, block_k: int = 64) -> torch.Tensor:
    """y = x W^T + b; x [..., K] -> [..., N] in x's dtype. See `kernels.ops.reference.quant_linear`."""
    check_device(x, _quant_matmul_kernel)
    shape = x.shape
    x2 = x.reshape(-1, qw.in_features)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    m, n, k = x2.shape[0], qw.out_features, qw.in_features
    y = torch.empty(m, n, dtype=torch.float32, device=x.device)
    if m:
        group = qw.method.group if qw.method.bits == 4 else 1
        minimum = qw.minimum if qw.minimum is not None else qw.scale
        _quant_matmul_kernel[(cdiv(m, block_m), cdiv(n, block_n))](
            x2, qw.qweight, qw.scale, minimum, bias if bias is not None else qw.scale, y,
            m, n, k, x2.stride(0), qw.qweight.stride(0), qw.scale.stride(0), y.stride(0),
            GROUP=group, BITS=qw.method.bits, HAS_BIAS=bias is not None,
            BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        )
    return y.view(*shape[:-1], n).to(x.dtype)
