"""Pre-packed CPU linears (kernels/layers/panel_linear.py): oneDNN's against F.linear, the native panel
ones (cpu_gemm.c) against oneDNN's bits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fairgate.kernels.layers import panel_linear as cpu_linear

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
    assert cpu_linear.pack_linears(model, kind="onednn") == 2
    assert isinstance(model[0], cpu_linear.PackedLinear) and isinstance(model[2][0], cpu_linear.PackedLinear)
    assert type(model[3]) is nn.Linear  # bf16 stays as it was
    torch.testing.assert_close(model[2](model[1](model[0](x))), expected, atol=1e-5, rtol=1e-5)
    assert not any(name.endswith("weight") for name, _ in model[0].named_parameters())  # the copy is dropped


def test_packed_linear_refuses_other_dtypes():
    with pytest.raises(ValueError, match="float32 CPU"):
        cpu_linear.PackedLinear(nn.Linear(4, 4).to(torch.float16))


native = pytest.mark.skipif(cpu_linear.load_gemm() is None, reason="no C compiler for cpu_gemm.c")


def _linear(in_features: int, out_features: int, bias: bool, seed: int) -> nn.Linear:
    gen = torch.Generator().manual_seed(seed)
    linear = nn.Linear(in_features, out_features, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(out_features, in_features, generator=gen) * 0.05)
        if bias:
            linear.bias.copy_(torch.randn(out_features, generator=gen))
    return linear


@native
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("in_features", "out_features"), [
    (96, 80), (512, 48), (513, 64), (768, 2304), (1024, 16), (1025, 1040), (3072, 768), (4096, 256),
])
def test_panel_linear_gives_onednns_bits(in_features, out_features, bias):
    # The same sums in the same order (blocks of onednn_block(K) inputs): equal bits, not close
    # ones, so either path can run any step and greedy output does not change with the choice.
    linear = _linear(in_features, out_features, bias, seed=in_features + out_features)
    onednn, panels = cpu_linear.PackedLinear(linear), cpu_linear.PanelLinear(linear)
    gen = torch.Generator().manual_seed(1)
    for rows in (1, 2, 5, 6, 7, 64, 129):
        x = torch.randn(rows, in_features, generator=gen)
        assert torch.equal(panels(x), onednn(x)), rows
    torch.testing.assert_close(panels(x), F.linear(x, linear.weight, linear.bias), atol=1e-4, rtol=1e-4)


@native
def test_panel_linear_row_bits_do_not_depend_on_the_batch_or_threads():
    linear = _linear(3072, 128, True, seed=3)
    panels = cpu_linear.PanelLinear(linear)
    x = torch.randn(40, 3072, generator=torch.Generator().manual_seed(2))
    alone = torch.cat([panels(x[i : i + 1]) for i in range(40)])
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one_thread = panels(x)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(panels(x), alone) and torch.equal(one_thread, alone)
    assert torch.equal(panels(x[7]), alone[7])  # a 1-D row too
    assert torch.equal(panels(x[:, None, :]).squeeze(1), alone)  # [rows, 1, K]


@native
def test_the_avx2_build_gives_the_same_bits():
    # CI machines may lack AVX-512: the narrower build tiles differently, the sums stay the same.
    from fairgate.kernels.native import abi

    narrow = abi.load(abi.GEMM, ("-mno-avx512f",))
    if narrow is None:
        pytest.skip("this compiler cannot build without AVX-512")
    linear = _linear(768, 208, True, seed=4)
    panels = cpu_linear.PanelLinear(linear)
    for rows in (1, 2, 3, 13, 200):  # 1-2 rows take wider tiles there; 200: above the prefetch's rows
        x = torch.randn(rows, 768, generator=torch.Generator().manual_seed(rows))
        out = torch.empty(rows, 208)
        narrow.exact_linear(x.data_ptr(), rows, 768, panels.packed.data_ptr(), 208, panels.bias.data_ptr(),
                            out.data_ptr(), panels.block, 2)
        assert torch.equal(out, panels(x)), rows
    gate_up = cpu_linear.PanelLinear(_linear(768, 256, False, seed=6), swiglu=True)
    for rows in (1, 7):
        x = torch.randn(rows, 768, generator=torch.Generator().manual_seed(rows))
        out = torch.empty(rows, 128)
        assert narrow.exact_linear_swiglu(x.data_ptr(), rows, 768, gate_up.packed.data_ptr(), 256, 0,
                                          out.data_ptr(), gate_up.block, 2) == 0
        assert torch.equal(out, gate_up(x)), rows


@native
def test_pack_linears_auto_takes_panels_where_the_width_allows():
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
    x = torch.randn(3, 8)
    expected = model(x)
    assert cpu_linear.pack_linears(model) == 2
    assert isinstance(model[0], cpu_linear.PanelLinear)
    assert isinstance(model[2], cpu_linear.PackedLinear)  # 4 outputs: not a multiple of 16
    torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="multiple of 16"):
        cpu_linear.pack_linears(nn.Sequential(nn.Linear(8, 4)), kind="native")


@native
def test_panel_linear_refuses_what_it_cannot_run():
    with pytest.raises(ValueError, match="multiple of 16"):
        cpu_linear.PanelLinear(nn.Linear(8, 20))
    panels = cpu_linear.PanelLinear(nn.Linear(8, 16))
    with pytest.raises(ValueError, match="float32"):
        panels(torch.randn(2, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\[\.\.\., 8\]"):
        panels(torch.randn(2, 9))


@native
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("in_features", "inter"), [(768, 3072), (1025, 64), (96, 192)])
def test_swiglu_panel_linear_gives_the_bits_of_the_separate_activation(in_features, inter, bias):
    # The activation runs on each panel's sums in the kernel; the result must be the bits of the
    # plain projection followed by cpu_fused.c's silu_mul, at every row count (prefetching and
    # not: the kernel prefetches up to 96 rows).
    from fairgate.kernels.ops import cpu_fused

    linear = _linear(in_features, 2 * inter, bias, seed=in_features + inter)
    plain, fused = cpu_linear.PanelLinear(linear), cpu_linear.PanelLinear(linear, swiglu=True)
    gen = torch.Generator().manual_seed(6)
    for rows in (1, 5, 6, 13, 96, 97, 200):
        x = torch.randn(rows, in_features, generator=gen) * 3
        out = fused(x)
        assert out.shape == (rows, inter)
        assert torch.equal(out, cpu_fused.silu_mul(plain(x))), rows
    gate, up = F.linear(x, linear.weight, linear.bias).chunk(2, dim=-1)
    torch.testing.assert_close(out, F.silu(gate) * up, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="multiple of 128"):
        cpu_linear.PanelLinear(nn.Linear(8, 96), swiglu=True)


@native
def test_pack_linears_fuses_the_swiglu_of_a_gate_up_projection():
    from types import SimpleNamespace

    from fairgate.backends.local.model.llama import MLP
    from fairgate.kernels import KernelPlan

    mlp = MLP(SimpleNamespace(hidden_size=64, intermediate_size=128, mlp_bias=False),  # what MLP reads
              KernelPlan.choose("cpu", mode="auto"))
    x = torch.randn(9, 64, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        expected = mlp(x)
        assert cpu_linear.pack_linears(mlp) == 2
        assert mlp.gate_up_proj.fused_swiglu and not mlp.down_proj.fused_swiglu
        torch.testing.assert_close(mlp(x), expected, atol=1e-5, rtol=1e-5)
