"""int8 linears on the AMX tile unit (cpu_quant.c's quant_amx.h, kernels/layers/quant_tiles.py).

What holds on every CPU: the tile layout round trip, the decision rule, the setting. What needs
AMX-INT8 and a kernel that grants the tile state (Sapphire Rapids and later) is skipped elsewhere
with the reason: the sums against float64, a row's bits at every row count, the stack against the
per-op layers, the plan's choice.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from fairgate.kernels import QuantMethod, quantize_weight
from fairgate.kernels.choices import quant_panels
from fairgate.kernels.layers import quant_tiles
from fairgate.kernels.layers.quant_linear import QuantLinear, tile_layout
from fairgate.kernels.native import abi
from fairgate.kernels.ops.quant_format import dequantize_weight
from tests.backends.local.paged_driver import PagedDriver
from tests.helpers.tiny_models import make_tiny_model
from tests.kernels.test_cpu_stack import run_both, runner_for, step_inputs


def tile_unit_here() -> bool:
    lib = abi.load(abi.QUANT)
    return lib is not None and lib.quant_amx_path(64) == 1


needs_tiles = pytest.mark.skipif(not tile_unit_here(), reason="no AMX-INT8 tile unit granted on this CPU "
                                                               "(Sapphire Rapids or later, Linux 5.16+)")


def layer(n: int, k: int, bias: bool, seed: int = 0) -> QuantLinear:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen) * 0.05
    b = torch.randn(n, generator=gen) if bias else None
    return QuantLinear(quantize_weight(w, QuantMethod.parse("int8")), b, native=True)


def test_the_tile_layout_is_the_same_bytes_and_comes_back() -> None:
    panels = torch.randint(-128, 128, (3, 128, 16), dtype=torch.int8)
    tiles = tile_layout(panels, to_tiles=True)
    assert tiles.shape == panels.shape and not tiles.equal(panels)
    # tile row r of step k holds channel n's inputs 4r .. 4r+3 side by side
    assert tiles[1].reshape(32, 16, 4)[5, 7].tolist() == panels[1, 20:24, 7].tolist()
    assert tile_layout(tiles, to_tiles=False).equal(panels)


@pytest.mark.parametrize(("timings", "wins"), [
    ({1: (1.0, 1.05), 8: (1.0, 0.5), 16: (2.0, 0.9), 128: (10.0, 4.0)}, True),
    ({1: (1.0, 1.2), 8: (1.0, 0.5), 16: (2.0, 0.9), 128: (10.0, 4.0)}, False),  # a lone row 20% slower
    ({1: (1.0, 0.9), 8: (1.0, 0.99), 16: (2.0, 1.95), 128: (10.0, 9.8)}, False),  # within the margin
    ({1: (1.0, 0.9)}, False),  # nothing measured at many rows
])
def test_the_tile_unit_must_win_at_many_rows_and_not_lose_a_lone_row(timings: dict, wins: bool) -> None:
    assert quant_tiles.tiles_win(timings) is wins


def test_a_bad_setting_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "yes")
    with pytest.raises(ValueError, match="FAIRGATE_QUANT_TILES"):
        quant_tiles.setting()


def test_a_layer_that_cannot_take_the_tile_unit_stays_on_the_vector_kernel() -> None:
    q = layer(32, 96, False)  # 96 inputs: not whole 64-input steps
    before = q.panels.clone()
    assert not q.tile_unit_fits() and not q.use_tile_unit(True)
    assert q.cpu_kind == 0 and q.panels.equal(before)


@needs_tiles
@pytest.mark.parametrize(("n", "k", "bias"), [(48, 64, True), (64, 192, False), (200, 1088, True)])
def test_the_tile_unit_sums_like_float64_and_a_rows_bits_are_its_own(n: int, k: int, bias: bool) -> None:
    q = layer(n, k, bias)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(40, k, generator=gen)
    x[3, 5] = 300.0  # a row with an outlier: its digits' scale is large
    x[4] = 0.0
    vector = q(x)
    assert q.use_tile_unit(True) and q.cpu_kind == 2
    tiles = q(x)
    w = dequantize_weight(quantize_weight(torch.randn(n, k, generator=torch.Generator().manual_seed(0)) * 0.05,
                                          QuantMethod.parse("int8"))).double()
    exact = x.double() @ w.T + (q.bias.double() if q.bias is not None else 0)
    scale = exact.abs().amax(dim=1, keepdim=True).clamp_min(1e-6)
    assert ((tiles.double() - exact).abs() / scale).max() < 2e-5
    assert ((vector.double() - exact).abs() / scale).max() < 2e-5
    if q.bias is not None:
        assert tiles[4].equal(q.bias)  # a zero row: the bias alone
    for m in (1, 5, 16, 17, 33):  # tiles of 1, 5, 16, 9 + 8, 11 x 3 rows
        assert q(x[:m]).equal(tiles[:m])
    assert q(x[7:8]).equal(tiles[7:8])
    assert not q.use_tile_unit(False) and q(x).equal(vector)  # repacked back: the vector kernel's bits again


@needs_tiles
def test_a_row_that_is_not_finite_gives_nans_and_leaves_the_others() -> None:
    q = layer(32, 64, True)
    q.use_tile_unit(True)
    x = torch.randn(3, 64)
    clean = q(x)
    x[1, 9] = float("nan")
    out = q(x)
    assert out[1].isnan().all() and out[0].equal(clean[0]) and out[2].equal(clean[2])


@needs_tiles
@pytest.mark.parametrize(("value", "on"), [("on", True), ("off", False)])
def test_the_setting_forces_either_path_without_measuring(monkeypatch: pytest.MonkeyPatch, value: str,
                                                          on: bool) -> None:
    layers = [[layer(64, 128, True, seed=2 * i), layer(128, 64, False, seed=2 * i + 1)] for i in range(2)]
    monkeypatch.setattr(quant_tiles, "measure", lambda *a, **k: pytest.fail("measured"))
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", value)
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "1")
    choice = quant_panels(layers, native=True)
    assert choice is not None
    assert all(q.tile_unit is on and (q.panels_f32 is None) is on for row in layers for q in row)
    assert ("AMX tile unit at every row count, 4 linears" in choice.why) is on


@needs_tiles
@pytest.mark.parametrize("wins", [True, False])
def test_auto_takes_the_tile_unit_where_the_measurement_says(monkeypatch: pytest.MonkeyPatch, wins: bool) -> None:
    layers = [[layer(64, 128, True, seed=2 * i), layer(128, 64, False, seed=2 * i + 1)] for i in range(2)]
    seen: list[tuple[int, int]] = []

    def timings(first: list[QuantLinear], every: list[QuantLinear]) -> dict:
        seen.append((len(first), len(every)))
        return {1: (1.0, 1.0), 16: (2.0, 1.0 if wins else 2.0)}

    monkeypatch.setattr(quant_tiles, "measure", timings)
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "auto")
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "off")
    choice = quant_panels(layers, native=True)
    assert seen == [(2, 4)]  # the first layer's shapes, every layer at one row
    assert all(q.tile_unit is wins for row in layers for q in row)
    assert choice is not None and ("16 rows 2000.00 / " in choice.why)
    assert ("does not win" in choice.why) is not wins


@needs_tiles
def test_the_real_measurement_leaves_the_layers_on_the_vector_kernel() -> None:
    q = layer(64, 128, False)
    codes = q.panels.clone()
    timings = quant_tiles.measure([q], [q], counts=(1, 8), reps=1)
    assert sorted(timings) == [1, 8] and all(a > 0 and b > 0 for a, b in timings.values())
    assert not q.tile_unit and q.panels.equal(codes)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiles-llama"), "llama", seed=3)


@needs_tiles
@pytest.mark.parametrize("kind", ["decode", "prefill", "mixed"])
def test_the_stack_on_the_tile_unit_gives_the_per_op_bits(tiny_dir: Path, kind: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "on")
    runner = runner_for(tiny_dir, quantization="int8")
    if runner.model.native_stack is None:
        pytest.skip("the native CPU kernels did not build here")
    assert runner.model.layers[0].attn.qkv_proj.tile_unit
    assert "on its AMX tile unit path at every row count" in runner.kernels.choice("layer_stack").why
    h_native, h_per_op, kv_native, kv_per_op = run_both(runner, step_inputs(kind))
    assert h_native.equal(h_per_op) and kv_native.equal(kv_per_op)
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "off")
    vector = runner_for(tiny_dir, quantization="int8")
    h_vector, _, _, _ = run_both(vector, step_inputs(kind))
    assert not h_vector.equal(h_native)  # other sums ...
    assert ((h_vector - h_native).abs().max() / h_vector.abs().max()).item() < 1e-4  # ... of the same values


@needs_tiles
def test_staggered_batches_on_the_tile_unit_take_the_per_op_tokens(tiny_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "on")
    stack = runner_for(tiny_dir, quantization="int8")
    per_op = runner_for(tiny_dir, quantization="int8")
    per_op.model.native_stack = None
    rng = random.Random(5)
    prompts = [[rng.randrange(3, stack.config.vocab_size) for _ in range(rng.randint(3, 30))] for _ in range(6)]
    max_new = [rng.randint(4, 12) for _ in prompts]
    native = PagedDriver(stack, chunk=5, seed=2, stop_at_eos=False).generate(prompts, max_new, stagger=2)
    alone = [PagedDriver(per_op, chunk=5, seed=2, stop_at_eos=False).generate([p], [n])[0]
             for p, n in zip(prompts, max_new, strict=True)]
    assert native == alone  # batched with others or alone, a sequence's greedy tokens are the same


def test_the_one_row_pass_reads_enough_codes_and_no_more() -> None:
    layers = [layer(32, 64, False, seed=i) for i in range(5)]  # 2 KiB of codes each
    assert quant_tiles.streamed(layers, most=4096) == layers[:2]
    assert quant_tiles.streamed(layers, most=4097) == layers[:3]
    assert quant_tiles.streamed(layers) == layers
