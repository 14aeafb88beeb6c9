"""Greedy tokens from a float32 panel LM head without every float32 logit (cpu_greedy.c).

A greedy row only needs the argmax of its logits. `GreedyHead` screens the whole vocabulary
with bfloat16 copies of the hidden row and the head's weights (twice the float32 rate on half
the bytes; on the AMX tile unit where the CPU has one, at the rate the weights stream in),
keeps the rows whose screened score could still be the largest, and recomputes those in float32
in exact_linear's summation order. The token is the one `argmax(lm_head(hidden))` gives, by the
bound below, not by luck: tests compare the two on random and adversarial heads.

The bound. With u = 2^-8 (bfloat16 rounds to 8 significant bits) and g = K 2^-24 / (1 - K 2^-24)
(a float32 sum of K terms), the screened score s of a row w and the float32 logit f satisfy

    |s - f| <= [(2u + u^2) + g (2 (1 + u)^2 + 1)] sum_i |x_i w_i| + slack <= c |x| |w| + slack = B:

rounding x and w to bfloat16 moves each product by at most (2u + u^2)|x_i w_i|; the screen's sum
of those exact products adds g times their magnitudes in any order it takes (taken twice here:
the AMX tile unit's order and internal rounding of a pair's sum are not documented, and 2g
covers a sum rounded at half the precision), the float32 logit's own sum g times
sum |x_i w_i|; Cauchy-Schwarz gives |x| |w|. `slack` covers what the dot-product instruction's
flush of subnormals to zero can lose (at most 2^-126 a term and a partial sum, times the
weights). The true argmax v* has f_v* >= f_u for all u, so s_v* >= max_u s_u - 2 B_max (B_max
with the largest weight norm): only rows scoring that much are recomputed. `c` takes a further
0.1% for the float64 arithmetic of the test, the norm is rounded up and the cut rounded down, so
the test errs only towards keeping a row.
"""

from __future__ import annotations

import ctypes
import sys
import time

import torch

from fairgate.kernels.layers.panel_linear import PANEL, PanelLinear
from fairgate.kernels.native import abi, hugepages

SUBNORMAL = 2.0**-126


class GreedyHead:
    """`head(hidden)` -> the greedy token of each row of `hidden` [M, K] float32 under the panel
    LM head it was built from, or None when a row is not finite (the caller computes logits)."""

    def __init__(self, lib: ctypes.CDLL, head: PanelLinear, weight: torch.Tensor) -> None:
        self._lib = lib
        self._head = head
        self._block = head.block  # exact_linear's summation blocks, which the recompute follows
        self._rows = weight.contiguous()  # [N, K] float32: a recomputed row is one contiguous read
        n, k = weight.shape
        self._bf16 = pack_bf16_panels(weight)
        self.norm_max = float(weight.double().norm(dim=1).max()) * (1 + 2.0**-40)  # rounded up
        u, g = 2.0**-8, k * 2.0**-24 / (1 - k * 2.0**-24)
        self.bound_factor = ((2 * u + u * u) + g * (2 * (1 + u) ** 2 + 1)) * 1.001
        self.slack = 4.0 * k * SUBNORMAL * max(1.0, float(weight.abs().max()))
        self.in_features, self.out_features = k, n
        self._scratch = torch.empty(0)  # screened scores and bfloat16 rows, grown to the largest step
        # Steps of more rows than this take the float32 head and its argmax instead (`calibrate`).
        self.screen_rows_max = sys.maxsize

    @classmethod
    def build(cls, head: PanelLinear, extra_flags: tuple[str, ...] = ()) -> GreedyHead | None:
        """For a bias-free float32 panel head with an even input width and finite weights whose
        library builds here, else None (greedy rows then take the full logits). `extra_flags`:
        see `abi.load`."""
        if type(head) is not PanelLinear or head.bias is not None or head.fused_swiglu or head.in_features % 2:
            return None
        weight = unpack_panels(head.packed, head.out_features, head.in_features)
        if not bool(torch.isfinite(weight).all()):
            return None
        lib = abi.load(abi.GREEDY, extra_flags)
        return None if lib is None else cls(lib, head, weight)

    @property
    def screen(self) -> str:
        """The unit the screen runs on here: "amx", "avx512_bf16" or "fma"."""
        return ("fma", "avx512_bf16", "amx")[self._lib.greedy_screen(self.in_features)]

    def calibrate(self, rows: tuple[int, ...] = (4, 16, 64), reps: int = 3) -> int:
        """Time the screen against the float32 head and its argmax at each row count (best of
        `reps`) and keep the screen for steps up to the last count of an unbroken run of wins from
        the first; returns that (0: never). The screen computes in float32 FMAs where the CPU has
        no bfloat16 dot product, so it only saves bytes: it lost from 16 rows on a Zen 1 box
        (32000 x 768 head, 64 rows: 53 against 45 ms) and tied from 32 on a Zen 3 one. Both give
        the same tokens; only the time differs."""
        self.screen_rows_max = sys.maxsize
        kept = 0
        gen = torch.Generator().manual_seed(0)
        for m in rows:
            x = torch.randn(m, self.in_features, generator=gen)
            screen, exact = float("inf"), float("inf")
            for _ in range(reps):
                t = time.perf_counter()
                self._screened(x)
                screen = min(screen, time.perf_counter() - t)
                t = time.perf_counter()
                self._exact(x)
                exact = min(exact, time.perf_counter() - t)
            if screen >= exact:
                break
            kept = m
        self.screen_rows_max = kept if kept < rows[-1] else sys.maxsize
        return self.screen_rows_max

    def __call__(self, hidden: torch.Tensor) -> list[int] | None:
        if hidden.dtype != torch.float32 or hidden.dim() != 2 or hidden.shape[1] != self.in_features:
            raise ValueError(f"GreedyHead takes float32 [M, {self.in_features}], not {hidden.dtype} {tuple(hidden.shape)}")
        x = hidden.contiguous()
        return self._screened(x) if x.shape[0] <= self.screen_rows_max else self._exact(x)

    def _exact(self, x: torch.Tensor) -> list[int] | None:
        """argmax of the float32 head's logits (first index on ties), or None for a row whose
        logits are not all finite."""
        logits = self._head(x)
        peak, tokens = logits.max(dim=1)
        if not bool(torch.isfinite(peak).all()):  # (max propagates a NaN)
            return None
        return tokens.tolist()

    def _screened(self, x: torch.Tensor) -> list[int] | None:
        rows = x.shape[0]
        tokens = torch.empty(rows, dtype=torch.int64)
        need = rows * (self.out_features + self.in_features)
        if self._scratch.numel() < need:
            self._scratch = torch.empty(need, dtype=torch.float32)
        rc = self._lib.greedy_tokens(
            x.data_ptr(), x.shape[0], self.in_features, self._bf16.data_ptr(), self._rows.data_ptr(),
            self.norm_max, self.out_features, self._block, self.bound_factor, self.slack,
            tokens.data_ptr(), self._scratch.data_ptr(), torch.get_num_threads())
        return None if rc else tokens.tolist()


def unpack_panels(packed: torch.Tensor, n: int, k: int) -> torch.Tensor:
    """`cpu_linear.pack_panels` undone: [N, K] from panels of PANEL columns, each [K, width]."""
    rows = []
    for n0 in range(0, n, PANEL):
        width = min(PANEL, n - n0)
        rows.append(packed[n0 * k:(n0 + width) * k].view(k, width).t())
    return torch.cat(rows)


def pack_bf16_panels(weight: torch.Tensor) -> torch.Tensor:
    """[N, K] float32 -> bfloat16 (round to nearest even) panels of PANEL columns, each
    [K / 2, width, 2]: input pairs together, as cpu_greedy.c's screen reads them."""
    n, k = weight.shape
    w = weight.to(torch.bfloat16)
    parts = [w[n0:n0 + PANEL].reshape(-1, k // 2, 2).permute(1, 0, 2).contiguous().flatten()
             for n0 in range(0, n, PANEL)]
    return torch.cat(parts, out=hugepages.zeros((n * k,), torch.bfloat16)).view(torch.int16)  # streamed each step
