"""Weight-only quantized linears: the formats, the native CPU kernel against the torch reference."""

from __future__ import annotations

import pytest
import torch

from fairgate.kernels.layers.quant_linear import QuantLinear
from fairgate.kernels.native import abi
from fairgate.kernels.ops import reference
from fairgate.kernels.ops.quant_format import (
    QuantizedWeight,
    QuantMethod,
    dequantize_weight,
    int4_codes,
    quantize_weight,
)

needs_native = pytest.mark.skipif(abi.load(abi.QUANT) is None, reason="no C compiler here")


def test_method_parsing() -> None:
    assert QuantMethod.parse("int8") == QuantMethod(8)
    assert QuantMethod.parse("INT4") == QuantMethod(4, 64)
    assert QuantMethod.parse("int4-g32").name == "int4-g32"
    for bad in ("int3", "int8-g64", "int4-g7", "fp8"):
        with pytest.raises(ValueError):
            QuantMethod.parse(bad)


def test_int8_is_per_channel_symmetric() -> None:
    w = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.25, -0.125]])
    qw = quantize_weight(w, QuantMethod(8))
    assert qw.qweight.dtype == torch.int8 and qw.qweight[0].tolist() == [64, -127, 32]
    assert qw.scale.tolist() == pytest.approx([2 / 127, 0.25 / 127])
    assert (dequantize_weight(qw) - w).abs().max() <= qw.scale.max() / 2 + 1e-7


def test_int4_codes_pack_two_per_byte_and_bound_the_error() -> None:
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(5, 64, generator=gen)
    qw = quantize_weight(w, QuantMethod(4, 32))
    assert qw.qweight.shape == (5, 32) and qw.scale.shape == (5, 2) and qw.minimum is not None
    codes = int4_codes(qw.qweight)
    assert codes.shape == (5, 64) and int(codes.max()) <= 15
    assert int(codes[0, 1]) == int(qw.qweight[0, 0]) >> 4  # odd k in the high nibble
    err = (dequantize_weight(qw) - w).abs().view(5, 2, 32).amax(-1)
    assert bool((err <= qw.scale / 2 + 1e-6).all())
    with pytest.raises(ValueError):
        quantize_weight(torch.randn(4, 48), QuantMethod(4, 32))


@needs_native
@pytest.mark.parametrize("method", ["int8", "int4-g32", "int4-g64", "int4-g128"])
@pytest.mark.parametrize(("n", "k"), [(16, 128), (40, 256), (17, 384), (2304, 128)])
@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 13, 64])
def test_native_matches_reference(method: str, n: int, k: int, m: int) -> None:
    gen = torch.Generator().manual_seed(n * 1000 + k + m)
    w, b, x = torch.randn(n, k, generator=gen), torch.randn(n, generator=gen), torch.randn(m, k, generator=gen)
    qw = quantize_weight(w, QuantMethod.parse(method))
    layer = QuantLinear(qw, b, native=True)
    assert layer.qw is None  # packed for the native kernel, logical codes dropped
    torch.testing.assert_close(layer(x), reference.quant_linear(x, qw, b), atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(layer(x[None]), reference.quant_linear(x, qw, b)[None], atol=2e-4, rtol=1e-4)


@needs_native
@pytest.mark.parametrize("method", ["int8", "int4-g32", "int4-g128"])
@pytest.mark.parametrize(("m", "n", "k"), [(16, 40, 640), (130, 17, 256), (70, 2304, 384)])
def test_wide_batches_give_the_bits_of_narrow_ones(method: str, m: int, n: int, k: int) -> None:
    """From 16 rows int4 widens each block of codes once for all row tiles (cpu_quant.c's
    `item_blocked`); every output still sums in input order, so the rows of a wide batch are
    bit for bit those of the same rows sent a few at a time (row chunks past 64, partial input
    blocks and partial panels included)."""
    gen = torch.Generator().manual_seed(m + n + k)
    w, b, x = torch.randn(n, k, generator=gen), torch.randn(n, generator=gen), torch.randn(m, k, generator=gen)
    layer = QuantLinear(quantize_weight(w, QuantMethod.parse(method)), b, native=True)
    wide = layer(x)
    narrow = torch.cat([layer(x[i:i + 5]) for i in range(0, m, 5)])
    assert torch.equal(wide, narrow)


@needs_native
def test_native_handles_strided_rows_and_no_bias() -> None:
    gen = torch.Generator().manual_seed(3)
    qw = quantize_weight(torch.randn(24, 96, generator=gen), QuantMethod(8))
    x = torch.randn(6, 200, generator=gen)[:, 10:106]  # rows 200 floats apart
    layer = QuantLinear(qw, None, native=True)
    torch.testing.assert_close(layer(x), reference.quant_linear(x, qw), atol=2e-4, rtol=1e-4)
    assert layer(x[:0]).shape == (0, 24)


def test_reference_path_keeps_codes() -> None:
    qw = quantize_weight(torch.randn(8, 64), QuantMethod(4, 32))
    layer = QuantLinear(qw, None, native=False)
    x = torch.randn(3, 64)
    assert layer.qw is qw
    torch.testing.assert_close(layer(x), x @ dequantize_weight(qw).T, atol=1e-5, rtol=1e-5)
    assert layer.weight_bytes() == 8 * 32 + 2 * (8 * 2 * 4)


@pytest.mark.parametrize("method", ["int8", "int4-g32", "int4-g64", "int4-g128"])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 16, 128), (5, 70, 256), (33, 24, 384)])
def test_triton_matches_reference(method: str, m: int, n: int, k: int, device: torch.device) -> None:
    pytest.importorskip("triton")
    from fairgate.kernels.triton.quant import quant_linear

    gen = torch.Generator().manual_seed(m + n + k)
    w, b, x = torch.randn(n, k, generator=gen), torch.randn(n, generator=gen), torch.randn(m, k, generator=gen)
    qw = quantize_weight(w, QuantMethod.parse(method))
    on_device = QuantizedWeight(qw.method, qw.qweight.to(device), qw.scale.to(device),
                                None if qw.minimum is None else qw.minimum.to(device), qw.in_features)
    got = quant_linear(x.to(device), on_device, b.to(device), block_m=16, block_n=16, block_k=32)
    torch.testing.assert_close(got.cpu(), reference.quant_linear(x, qw, b), atol=2e-4, rtol=1e-4)
    no_bias = quant_linear(x.to(device)[None], on_device)
    torch.testing.assert_close(no_bias.cpu()[0], reference.quant_linear(x, qw), atol=2e-4, rtol=1e-4)


@needs_native
@pytest.mark.parametrize("method", ["int8", "int4", "int4-g32"])
def test_the_avx2_build_gives_the_same_bits(method: str) -> None:
    # The AVX2 build keeps its sums in halves of 8 lanes (tile8, tile_block8) where AVX-512 keeps
    # 16: the same FMA chain per output, so the same bits, at every row count (1-4 rows: item's
    # small tiles; 16+: int4's blocked loop), with a bias and a last panel cut short.
    narrow = abi.load(abi.QUANT, ("-mno-avx512f",))
    if narrow is None:
        pytest.skip("this compiler cannot build without AVX-512")
    gen = torch.Generator().manual_seed(9)
    n, k = 200, 256
    layer = QuantLinear(quantize_weight(torch.randn(n, k, generator=gen), QuantMethod.parse(method)),
                        torch.randn(n, generator=gen), True)
    native = layer._lib
    for rows in (1, 2, 3, 5, 13, 16, 40):
        x = torch.randn(rows, k, generator=gen)
        expected, out = torch.empty(rows, n), torch.empty(rows, n)
        layer.run_native(x, expected)
        layer._lib = narrow
        try:
            layer.run_native(x, out)
        finally:
            layer._lib = native
        assert torch.equal(out, expected), rows
