"""int8 weights x int8 activations (`int8-a8`): cpu_quant_a8.c, every instruction path this CPU
can run, against the torch reference in kernels/ops/quant_a8.py, exactly."""

from __future__ import annotations

import pytest
import torch

from fairgate.kernels.layers.quant_linear import QuantLinear
from fairgate.kernels.native import abi
from fairgate.kernels.ops.quant_a8 import pack_a8, quantize_rows, reference_a8
from fairgate.kernels.ops.quant_format import QuantizedWeight, QuantMethod, quantize_weight

A8 = QuantMethod.parse("int8-a8")
# Extra compiler flags per path (appended to -march=native): 2 = AVX-512 VNNI, 1 = AVX2, 0 = C.
PATH_FLAGS = {2: (), 1: ("-mno-avx512f",), 0: ("-mno-avx", "-mno-avx2", "-mno-avx512f")}
native = abi.load(abi.QUANT_A8)
BEST = -1 if native is None else native.quant_a8_path()


def path_lib(path: int):
    if path > BEST:
        pytest.skip(f"this CPU or compiler has no path {path} (best here: {BEST})")
    lib = abi.load(abi.QUANT_A8, PATH_FLAGS[path])
    assert lib is not None and lib.quant_a8_path() == path
    return lib


def run(lib, x: torch.Tensor, qw: QuantizedWeight, bias: torch.Tensor | None = None) -> torch.Tensor:
    panels, scale, colsum = pack_a8(qw)
    m, n = x.shape[0], qw.out_features
    y = torch.full((m, n), float("nan"))
    rc = lib.quant_linear_a8(x.data_ptr(), x.stride(0), panels.data_ptr(), scale.data_ptr(), colsum.data_ptr(),
                             0 if bias is None else bias.data_ptr(), y.data_ptr(), y.stride(0), m, n,
                             qw.in_features, 2)
    assert rc == 0
    return y


def test_method_parsing() -> None:
    assert A8 == QuantMethod(8, 0, 8) and A8.name == "int8-a8"
    assert QuantMethod.parse("int8").activations == 0
    for bad in ("int4-a8", "int4-g32-a8", "int8-g64-a8", "int8a8"):
        with pytest.raises(ValueError):
            QuantMethod.parse(bad)


def test_row_quantization() -> None:
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5], [0.3, 0.1, -0.2]])
    codes, scale = quantize_rows(x)
    assert codes.tolist() == [[0, 0, 0], [64, -127, 32], [127, 42, -85]]
    assert scale.tolist() == pytest.approx([0.0, 2 / 127, 0.3 / 127])


@pytest.mark.parametrize("path", [2, 1, 0])
@pytest.mark.parametrize(("n", "k"), [(1, 1), (15, 3), (17, 5), (40, 67), (33, 130), (64, 768)])
def test_kernel_matches_reference_over_odd_shapes(path: int, n: int, k: int) -> None:
    lib = path_lib(path)
    gen = torch.Generator().manual_seed(n * 1000 + k)
    qw = quantize_weight(torch.randn(n, k, generator=gen), A8)
    bias = torch.randn(n, generator=gen)
    wide = torch.randn(70, k + 9, generator=gen)  # rows 9 floats wider than K: strided
    for m in range(1, 71):
        x = wide[:m, :k]
        torch.testing.assert_close(run(lib, x, qw, bias), reference_a8(x, qw, bias), rtol=1e-6, atol=1e-5)
    zero = torch.zeros(3, k)  # a zero row: scale 0, output the bias
    assert torch.equal(run(lib, zero, qw, bias), bias.expand(3, n))


@pytest.mark.parametrize("path", [2, 1, 0])
def test_extreme_values_are_exact(path: int) -> None:
    """Codes at +-127 on both sides: the largest pair sums (2 * 127 * 127 in AVX2's int16 step,
    255 * 127 in VNNI's offset bytes). Rows with |x| max 127 have scale 1 and codes = x, and
    weight scales of 1, so y is the integer dot product itself (exact in float32 below 2^24)."""
    lib = path_lib(path)
    k, n = 1027, 37
    gen = torch.Generator().manual_seed(7)
    signs = torch.randint(0, 2, (6, n, k), generator=gen) * 2 - 1
    weights = [torch.full((n, k), 127), torch.full((n, k), -127), 127 * signs[0], 127 * signs[1],
               torch.randint(-127, 128, (n, k), generator=gen)]
    rows = torch.cat([torch.full((1, k), 127), torch.full((1, k), -127), 127 * signs[2, :4],
                      torch.randint(-127, 128, (3, k), generator=gen)]).float()
    rows[-3:, 0] = 127  # the random rows' absmax is 127 too
    for w in weights:
        qw = QuantizedWeight(A8, w.to(torch.int8), torch.ones(n), None, k)
        want = (rows.double() @ w.double().t()).float()
        assert want.abs().max() < 2**24
        assert torch.equal(run(lib, rows, qw), want)
        assert torch.equal(reference_a8(rows, qw), want)


@pytest.mark.skipif(BEST < 1, reason="no SIMD build of cpu_quant_a8.c here")
def test_layer_uses_the_kernel_and_tracks_float() -> None:
    gen = torch.Generator().manual_seed(3)
    w, b = torch.randn(2304, 768, generator=gen) * 0.02, torch.randn(2304, generator=gen)
    x = torch.randn(2, 5, 768, generator=gen)
    qw = quantize_weight(w, A8)
    layer = QuantLinear(qw, b, native=True)
    assert "int8_activations=True" in repr(layer) and layer.qw is None
    assert layer.weight_bytes() == 2304 * 768 + 2304 * 8  # codes, float32 scales, int32 colsums
    y = layer(x)
    torch.testing.assert_close(y, reference_a8(x, qw, b), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(QuantLinear(qw, b, native=False)(x), y, rtol=1e-6, atol=1e-5)
    exact = x @ w.t() + b
    assert float((y - exact).norm() / (exact - b).norm()) < 0.02  # int8 x int8 stays near float
