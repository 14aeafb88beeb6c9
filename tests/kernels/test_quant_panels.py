"""Float32 panels of a weight-only int8 / int4 linear (kernels/layers/quant_panels.py) give the
quantized kernel's bits at any row count, and the plan keeps them from the row count its
(injected) timings say they win from, and never where they do not."""

from __future__ import annotations

import pytest
import torch

from fairgate.kernels import QuantMethod, quantize_weight
from fairgate.kernels.choices import quant_panels
from fairgate.kernels.layers import quant_panels as panels_module
from fairgate.kernels.layers.quant_linear import QuantLinear
from fairgate.kernels.layers.quant_panels import QuantPanels, panel_rows
from fairgate.kernels.native import abi

METHODS = ("int8", "int4-g32", "int4-g64")


@pytest.fixture(autouse=True)
def _vector_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The panels are the vector kernel's companion: an AMX box's tile unit (tests/kernels/test_quant_tiles.py)
    stays off here, so its measurement cannot take the int8 layers away from them."""
    monkeypatch.setenv("FAIRGATE_QUANT_TILES", "off")


def layer(method: str, n: int, k: int, bias: bool, seed: int = 0) -> QuantLinear:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen) * 0.05
    b = torch.randn(n, generator=gen) if bias else None
    q = QuantLinear(quantize_weight(w, QuantMethod.parse(method)), b, native=True)
    if not QuantPanels.fits(q):
        pytest.skip("cpu_quant.c or cpu_gemm.c did not build here")
    return q


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("n", "k", "bias"), [(48, 64, True), (64, 192, False), (256, 1088, True)])
def test_panels_give_the_quantized_kernels_bits(method: str, n: int, k: int, bias: bool) -> None:
    q = layer(method, n, k, bias)
    x = torch.randn(37, k, generator=torch.Generator().manual_seed(1))
    expected = [q(x[:m]) for m in (1, 3, 8, 37)]
    assert q.attach_panels(1) == n * k * 4
    for m, want in zip((1, 3, 8, 37), expected, strict=True):
        assert q(x[:m]).equal(want)


def test_panels_run_from_their_row_count_only(monkeypatch: pytest.MonkeyPatch) -> None:
    q = layer("int8", 32, 64, False)
    q.attach_panels(8)
    assert q.panels_f32 is not None
    calls: list[int] = []
    real = q.panels_f32.__call__
    monkeypatch.setattr(QuantPanels, "__call__", lambda self, x, y: (calls.append(x.shape[0]), real(x, y))[1])
    for m in (1, 7, 8, 20):
        q(torch.randn(m, 64))
    assert calls == [8, 20]
    assert q.attach_panels(None) == 0 and q.panels_f32 is None


@pytest.mark.parametrize(("timings", "rows"), [
    ({8: (1.0, 1.2), 16: (2.0, 2.1), 32: (4.0, 3.0), 64: (8.0, 5.0), 128: (16.0, 9.0)}, 32),
    ({8: (1.0, 0.5), 16: (2.0, 1.0), 32: (4.0, 2.0), 64: (8.0, 4.0), 128: (16.0, 8.0)}, 8),
    ({8: (1.0, 0.5), 16: (2.0, 2.5), 32: (4.0, 3.0), 64: (8.0, 5.0), 128: (16.0, 9.0)}, 32),  # a loss breaks the run
    ({8: (1.0, 0.5), 16: (2.0, 1.0), 32: (4.0, 3.0), 64: (8.0, 9.0), 128: (16.0, 9.0)}, 128),
    ({8: (1.0, 0.5), 16: (2.0, 1.0), 32: (4.0, 3.0), 64: (8.0, 5.0), 128: (16.0, 17.0)}, None),
    ({8: (1.0, 1.5), 16: (2.0, 3.0), 32: (4.0, 6.0), 64: (8.0, 9.0), 128: (16.0, 16.0)}, None),  # a tie: no win
    ({8: (1.0, 1.5), 128: (16.0, 15.5)}, None),  # within the margin: 4x the bytes for 3%
])
def test_the_decision_takes_the_panels_from_their_first_unbroken_win(timings: dict, rows: int | None) -> None:
    assert panel_rows(timings) == rows


def two_layers(method: str = "int8") -> list[list[QuantLinear]]:
    return [[layer(method, 96, 64, True, seed=2 * i), layer(method, 64, 96, False, seed=2 * i + 1)] for i in range(2)]


def test_the_plan_keeps_panels_where_the_injected_timings_say(monkeypatch: pytest.MonkeyPatch) -> None:
    layers = two_layers()
    measured: list[list[QuantLinear]] = []

    def timings(first: list[QuantLinear]) -> dict[int, tuple[float, float]]:
        measured.append(first)
        return {8: (1e-3, 2e-3), 16: (2e-3, 2.5e-3), 32: (4e-3, 3e-3), 64: (8e-3, 5e-3), 128: (16e-3, 9e-3)}

    monkeypatch.setattr("fairgate.kernels.choices.measure", timings)
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "auto")
    choice = quant_panels(layers, native=True)
    assert measured == [layers[0]]  # the first layer's shapes, once
    assert all(q.panels_f32 is not None and q.panels_f32.rows == 32 for layer in layers for q in layer)
    assert choice is not None and "up to 31 rows, float32 panels of the same weights from 32" in choice.why
    assert "32 rows 4.00 / 3.00 ms" in choice.why


def test_the_plan_drops_panels_that_lose(monkeypatch: pytest.MonkeyPatch) -> None:
    layers = two_layers("int4-g32")
    monkeypatch.setattr("fairgate.kernels.choices.measure", lambda first: {8: (1.0, 2.0), 128: (8.0, 9.0)})
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "auto")
    choice = quant_panels(layers, native=True)
    assert all(q.panels_f32 is None for layer in layers for q in layer)
    assert choice is not None and "float32 panels kept off, they do not win" in choice.why


@pytest.mark.parametrize(("value", "rows"), [("off", None), ("1", 1), ("24", 24)])
def test_a_setting_forces_either_path_without_measuring(monkeypatch: pytest.MonkeyPatch, value: str,
                                                       rows: int | None) -> None:
    layers = two_layers()
    monkeypatch.setattr("fairgate.kernels.choices.measure", lambda first: pytest.fail("measured"))
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", value)
    choice = quant_panels(layers, native=True)
    assert choice is not None and f"FAIRGATE_QUANT_PANELS={value}" in choice.why
    assert all((q.panels_f32.rows if q.panels_f32 else None) == rows for layer in layers for q in layer)


def test_a_bad_setting_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "0")
    with pytest.raises(ValueError, match="FAIRGATE_QUANT_PANELS"):
        panels_module.setting()


def test_no_choice_off_the_native_kernels() -> None:
    assert quant_panels(two_layers(), native=False) is None
    assert quant_panels([], native=True) is None


def test_real_measurement_returns_a_time_per_path_and_count() -> None:
    q = layer("int8", 64, 64, False)
    timings = panels_module.measure([q], counts=(1, 4), reps=1)
    assert sorted(timings) == [1, 4] and all(a > 0 and b > 0 for a, b in timings.values())
    assert q.panels_f32 is None  # the trial panels are not kept
    assert abi.load(abi.GEMM) is not None


def test_auto_keeps_no_panels_that_would_take_half_the_free_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model quantized to fit is not given its float32 weights back: auto does not even measure."""
    layers = two_layers()
    need = sum(4 * q.in_features * q.out_features for layer in layers for q in layer)
    monkeypatch.setattr("fairgate.kernels.choices.measure", lambda first: pytest.fail("measured"))
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "auto")
    choice = quant_panels(layers, native=True, free=2 * need - 1)
    assert all(q.panels_f32 is None for layer in layers for q in layer)
    assert choice is not None and "more than half the" in choice.why and "not measured" in choice.why
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "1")  # a row count the operator set is obeyed
    assert quant_panels(layers, native=True, free=2 * need - 1) is not None
    assert all(q.panels_f32 is not None for layer in layers for q in layer)


def test_the_free_memory_is_read() -> None:
    free = panels_module.available_memory()
    assert free is not None and free > 0
