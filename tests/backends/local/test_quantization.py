"""Weight-only quantization end to end: load-time, `fairgate quantize` folders, the eval gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fairgate.backends.local.engine.types import (
    RunnerInput,
    SamplingParams,
)
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.gateway.cli import main
from fairgate.kernels.layers.quant_linear import QuantLinear

DEMO = Path(__file__).resolve().parents[3] / "models" / "fairgate-demo"
GREEDY = SamplingParams(temperature=0.0)


def _logits(runner: ModelRunner, ids: list[int]) -> torch.Tensor:
    return runner.forward_logits([RunnerInput("r", ids, 0, list(range(4)), False, GREEDY)])[0]


def _linear_bytes(runner: ModelRunner) -> int:
    return sum(m.weight_bytes() for m in runner.model.modules() if isinstance(m, QuantLinear))


@pytest.mark.parametrize("method", ["int8", "int4-g32"])
def test_load_time_quantization_stays_close_to_float(tiny_qwen2_dir: Path, method: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIRGATE_QUANT_PANELS", "off")  # the codes' bytes: no float32 panels kept beside them
    ids = [5, 17, 3, 99, 42, 8, 23, 64]
    base = ModelRunner(tiny_qwen2_dir, num_kv_blocks=8, seed=0)
    quant = ModelRunner(tiny_qwen2_dir, num_kv_blocks=8, seed=0, quantization=method)
    assert quant.quantization_name == method and base.quantization_name == "none"
    layers = [m for m in quant.model.modules() if isinstance(m, QuantLinear)]
    assert len(layers) == 4 * quant.config.num_layers and layers[0].bias is not None  # qkv bias kept
    ref, got = _logits(base, ids), _logits(quant, ids)
    rel = ((got - ref).norm() / ref.norm()).item()
    assert rel < (0.05 if method == "int8" else 0.4), rel  # random weights: int4 is coarse
    cfg = quant.config
    fp32 = 4 * cfg.num_layers * cfg.hidden_size * (cfg.q_size + 2 * cfg.kv_size + cfg.q_size
                                                   + 3 * cfg.intermediate_size)
    assert _linear_bytes(quant) / fp32 <= (0.27 if method == "int8" else 0.19)
    assert quant.weight_bytes < base.weight_bytes


def test_quantized_folder_loads_as_saved(tiny_model_dir: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "q"
    assert main(["quantize", "--model", str(tiny_model_dir), "--out", str(out), "--method", "int4-g32"]) == 0
    assert "int4-g32" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["quantization_config"] == {"quant_method": "fairgate", "method": "int4-g32",
                                             "bits": 4, "group_size": 32}
    assert (out / "tokenizer.json").is_file()
    saved = ModelRunner(out, num_kv_blocks=8, seed=0)
    dynamic = ModelRunner(tiny_model_dir, num_kv_blocks=8, seed=0, quantization="int4-g32")
    assert saved.quantization_name == "int4-g32"
    ids = [1, 2, 3, 4, 5, 6]
    torch.testing.assert_close(_logits(saved, ids), _logits(dynamic, ids), atol=0, rtol=0)
    with pytest.raises(ValueError, match="saved as int4-g32"):
        ModelRunner(out, num_kv_blocks=8, quantization="int8")
    assert main(["quantize", "--model", str(out), "--out", str(tmp_path / "again"), "--method", "int8"]) == 2
    assert main(["quantize", "--model", str(tiny_model_dir), "--out", str(tmp_path / "x"), "--method", "int3"]) == 2


def _demo_eval(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["eval", "--model", str(DEMO), "--progress", "off", "--max-heldout-tokens", "2048",
                 "--agreement-prompts", "4", "--max-tokens", "12", *argv])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_eval_gate_passes_int8_weights_on_the_demo_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, m = _demo_eval(capsys, "--quantization", "int8", "--max-ppl-delta-pct", "1",
                         "--max-pass-rate-drop", "100", "--min-greedy-agreement", "0.8")
    assert code == 0, m
    assert "weights int8" in m["config"] and "int8" not in m["baseline"]
    assert abs(m["perplexity_delta_pct"]) <= 1.0


def test_eval_gate_exits_1_when_int4_crosses_a_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    code, m = _demo_eval(capsys, "--quantization", "int4-g128", "--max-ppl-delta-pct", "0.001",
                         "--max-pass-rate-drop", "100")
    assert code == 1
    assert m["perplexity_delta_pct"] > 0.001 and not m["passed"]
    assert any(v.startswith("perplexity") for v in m["violations"])
