"""Pre-packed CPU linears (kernels/cpu_linear.py) against F.linear."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernels import cpu_linear

pytestmark = pytest.mark.skipif(not cpu_linear.packing_available(), reason="torch built without oneDNN")


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows", [1, 3, 64, 300])
def test_packed_matches_f_linear(rows, bias):
    gen = torch.Generator().manual_seed(rows)
    linear = nn.Linear(96, 200, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(200, 96, generator=gen))
        if bias:
            linear.bias.copy_(torch.randn(200, generator=gen))
    x = torch.randn(rows, 96, generator=gen)
    packed = cpu_linear.PackedLinear(linear)
    torch.testing.assert_close(packed(x), F.linear(x, linear.weight, linear.bias), atol=1e-4, rtol=1e-5)
    # a non-contiguous input (a column slice, as the model's gate/up halves are) works too
    wide = torch.randn(rows, 192, generator=gen)
    torch.testing.assert_close(packed(wide[:, ::2]), F.linear(wide[:, ::2], linear.weight, linear.bias),
                               atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("in_features", [768, 3072])  # 3072: oneDNN's lone-row kernel differs there
def test_a_row_has_the_same_bits_in_any_batch(in_features):
    # Speculative verification (k + 1 rows) must give the bits plain decoding (one row) gives.
    gen = torch.Generator().manual_seed(in_features)
    linear = nn.Linear(in_features, 64)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(64, in_features, generator=gen))
    packed = cpu_linear.PackedLinear(linear)
    x = torch.randn(300, in_features, generator=gen)
    alone = torch.cat([packed(x[i : i + 1]) for i in range(8)])  # [8, 64], one row per call
    for rows in (1, 2, 7, 64, 300):
        batch = packed(x[:rows])
        assert torch.equal(batch[: min(rows, 8)], alone[: min(rows, 8)]), rows
    assert torch.equal(packed(x[3]), alone[3])  # a 1-D row too


def test_pack_linears_swaps_float32_cpu_linears_only():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 4, bias=False)),
                          nn.Linear(4, 4).to(torch.bfloat16))
    x = torch.randn(5, 8)
    expected = model[2](model[1](model[0](x)))
    assert cpu_linear.pack_linears(model) == 2
    assert isinstance(model[0], cpu_linear.PackedLinear) and isinstance(model[2][0], cpu_linear.PackedLinear)
    assert type(model[3]) is nn.Linear  # bf16 stays as it was
    torch.testing.assert_close(model[2](model[1](model[0](x))), expected, atol=1e-5, rtol=1e-5)
    assert not any(name.endswith("weight") for name, _ in model[0].named_parameters())  # the copy is dropped


def test_packed_linear_refuses_other_dtypes():
    with pytest.raises(ValueError, match="float32 CPU"):
        cpu_linear.PackedLinear(nn.Linear(4, 4).to(torch.float16))
