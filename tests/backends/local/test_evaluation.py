"""`fairgate eval`: golden checks, comparison and thresholds, and the whole command on a tiny
real model folder through the engine's model runner."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from fairgate.backends.local.evaluation import agreement_prompts
from fairgate.backends.local.evaluation.golden import (
    GoldenSetError,
    cut_at_stop,
    load_golden,
    parse_item,
)
from fairgate.backends.local.evaluation.progress import ProgressBar
from fairgate.backends.local.evaluation.report import (
    SideResult,
    Thresholds,
    compare,
    first_divergence,
    json_line,
)
from fairgate.gateway.cli import main

HELDOUT = """\
The gateway sends each request to the right model, and every tenant has a quota.

Bugün hava çok güzel, İstanbul'da güneş parlıyor ve deniz sakin görünüyor.

def add(a, b):
    return a + b

for i in range(10):
    print(i, add(i, 1))

Kişisel verilerin korunması kanunu, şirketlerin verileri kendi sunucularında tutmasını ister.
"""

GOLDEN = [
    {"id": "any", "prompt": "Hello world!", "regex": "(?s).*", "max_tokens": 4},
    {"id": "never", "prompt": "def add(a, b):", "exact": "this is not what a random model says"},
    {"id": "tr", "prompt": "Günaydın! Nasılsınız?", "regex": ".", "stop": ["\n"], "max_tokens": 6},
]


def test_golden_checks_exact_regex_and_schema() -> None:
    exact = parse_item({"prompt": "p", "exact": " return a + b"}, "x:1")
    assert exact.check("return a + b  ") and not exact.check("return a - b")
    contains = parse_item({"prompt": "p", "contains": "Ankara"}, "x:4")
    assert contains.check("The capital is Ankara.") and not contains.check("ankara")
    regex = parse_item({"prompt": "p", "regex": r"^\s*self\.\w+ ="}, "x:2")
    assert regex.check("  self.name = name") and not regex.check("name = self")
    schema = {"type": "object", "required": ["ad"], "properties": {"ad": {"type": "string"}}}
    js = parse_item({"prompt": "p", "json_schema": schema}, "x:3")
    assert js.check(' {"ad": "Ayşe"} and then some text')
    assert not js.check('{"ad": 3}') and not js.check("not json")


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"exact": "a"}, "prompt"),
        ({"prompt": "p"}, "exactly one"),
        ({"prompt": "p", "exact": "a", "regex": "b"}, "exactly one"),
        ({"prompt": "p", "regex": "("}, "invalid regex"),
        ({"prompt": "p", "json_schema": {"type": "nope"}}, "invalid JSON schema"),
        ({"prompt": "p", "exact": "a", "max_tokens": 0}, "max_tokens"),
    ],
)
def test_golden_rejects_bad_items(obj: dict, message: str) -> None:
    with pytest.raises(GoldenSetError, match=message):
        parse_item(obj, "golden.jsonl:7")


def test_load_golden_skips_comments_and_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('# comment\n\n{"prompt": "a", "exact": "b"}\n{oops\n', encoding="utf-8")
    with pytest.raises(GoldenSetError, match="g.jsonl:4"):
        load_golden(path)
    path.write_text('# comment\n\n{"prompt": "a", "exact": "b", "stop": "\\n"}\n', encoding="utf-8")
    [item] = load_golden(path)
    assert (item.id, item.kind, item.stop) == ("g.jsonl:3", "exact", ["\n"])


def test_cut_at_stop_takes_the_earliest() -> None:
    assert cut_at_stop("a, b\nc)", ["\n", ")"]) == ("a, b", True)
    assert cut_at_stop("abc", ["x"]) == ("abc", False)


def test_first_divergence() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2


def test_compare_reports_deltas_and_thresholds() -> None:
    base = SideResult("base", perplexity=10.0, passed=[True, True, False, True],
                      outputs=[[1, 2], [3, 4], [5]])
    cur = SideResult("cur", perplexity=10.5, passed=[True, False, False, True],
                     outputs=[[1, 2], [3, 9], [6]])
    m = compare(cur, base, Thresholds(max_ppl_delta_pct=2.0, max_pass_rate_drop=1.0))
    assert m["perplexity_delta_pct"] == pytest.approx(5.0)
    assert (m["pass_rate"], m["baseline_pass_rate"]) == (0.5, 0.75)
    assert m["pass_rate_delta_points"] == pytest.approx(-25.0)
    assert m["greedy_agreement"] == pytest.approx(1 / 3)
    assert (m["first_divergence_mean"], m["first_divergence_min"]) == (0.5, 0)
    assert len(m["violations"]) == 2 and m["passed"] is False
    loose = compare(cur, base, Thresholds(max_ppl_delta_pct=6.0, max_pass_rate_drop=30.0,
                                          min_greedy_agreement=0.5))
    assert loose["violations"] == ["greedy agreement 0.333 < 0.5"]
    # Lower perplexity is never a violation; an infinite one is, and prints as null.
    better = compare(SideResult("c", perplexity=9.0), SideResult("b", perplexity=10.0), Thresholds())
    assert better["passed"]
    broken = compare(SideResult("c", perplexity=float("inf")), SideResult("b", perplexity=10.0),
                     Thresholds())
    assert not broken["passed"] and json.loads(json_line(broken))["perplexity"] is None


def test_progress_bar_draws_only_when_enabled() -> None:
    out = io.StringIO()
    with ProgressBar(4, "ppl", stream=out, enabled=True) as bar:
        for _ in range(4):
            bar.update()
    assert "ppl [" in out.getvalue() and "4/4" in out.getvalue() and out.getvalue().endswith("\n")
    quiet = io.StringIO()
    with ProgressBar(4, "ppl", stream=quiet) as bar:  # StringIO is not a terminal
        bar.update(4)
    assert quiet.getvalue() == ""


def test_agreement_prompts_are_spread_over_the_text() -> None:
    prompts = agreement_prompts(HELDOUT, 2)
    assert len(prompts) == 2 and prompts[0].startswith("The gateway")


@pytest.fixture(scope="module")
def eval_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("eval")
    (d / "heldout.txt").write_text(HELDOUT, encoding="utf-8")
    (d / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in GOLDEN), encoding="utf-8")
    return d / "heldout.txt", d / "golden.jsonl"


def _eval(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["eval", "--progress", "off", "--max-tokens", "8", "--ctx", "32", *argv])
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1]), "\n".join(out[:-1])


def test_eval_of_the_engine_against_itself_is_identical(
    tiny_model_dir: Path, eval_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    heldout, golden = eval_files
    code, m, table = _eval(capsys, "--model", str(tiny_model_dir), "--heldout", str(heldout),
                           "--golden", str(golden), "--max-ppl-delta-pct", "0", "--max-pass-rate-drop", "0",
                           "--min-greedy-agreement", "1")
    assert code == 0, table
    assert m["perplexity"] == m["baseline_perplexity"] and m["perplexity"] > 1.0
    assert m["perplexity_delta_pct"] == 0.0 and m["greedy_agreement"] == 1.0
    assert m["first_divergence_mean"] is None
    assert m["golden_items"] == 3 and m["pass_rate"] == m["baseline_pass_rate"] == pytest.approx(2 / 3)
    assert m["greedy_prompts"] == 3 + len(agreement_prompts(HELDOUT, 16))
    assert m["heldout_tokens"] > 30 and "PASS" in table and "perplexity" in table


def test_eval_of_a_16_bit_kv_cache_measures_a_small_delta(
    tiny_model_dir: Path, eval_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    heldout, golden = eval_files
    code, m, table = _eval(capsys, "--model", str(tiny_model_dir), "--kv-cache-dtype", "float16",
                           "--heldout", str(heldout), "--golden", str(golden))
    assert code == 0, table
    assert "KV float16" in table
    assert m["perplexity"] != m["baseline_perplexity"]  # the KV really is rounded to 16 bits
    assert abs(m["perplexity_delta_pct"]) < 0.5


def _perturbed_copy(src: Path, dst: Path) -> Path:
    """The same model with the output projection sharpened and jittered: a broken config."""
    shutil.copytree(src, dst)
    weights = load_file(dst / "model.safetensors")
    gen = torch.Generator().manual_seed(0)
    w = weights["lm_head.weight"]
    weights["lm_head.weight"] = w * 4 + torch.randn(w.shape, generator=gen) * w.std() * 4
    save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


def test_eval_of_a_perturbed_config_reports_the_difference_and_fails(
    tiny_model_dir: Path, eval_files: tuple[Path, Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    heldout, golden = eval_files
    broken = _perturbed_copy(tiny_model_dir, tmp_path / "broken")
    code, m, table = _eval(capsys, "--model", str(broken), "--baseline-model", str(tiny_model_dir),
                           "--heldout", str(heldout), "--golden", str(golden))
    assert code == 1
    assert m["perplexity_delta_pct"] > 2.0 and m["perplexity"] > m["baseline_perplexity"]
    assert m["greedy_agreement"] < 1.0 and m["first_divergence_min"] is not None
    assert m["passed"] is False and m["violations"][0].startswith("perplexity +")
    assert "FAIL" in table


def test_eval_needs_some_data(tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--model", str(tiny_model_dir)]) == 2
    assert "--heldout" in capsys.readouterr().err


@pytest.mark.parametrize("speculative", ["ngram", "self-draft"])
def test_eval_of_speculative_decoding_agrees_with_the_plain_engine(
    speculative: str, tiny_model_dir: Path, eval_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    heldout, golden = eval_files
    spec = f"draft:{tiny_model_dir}" if speculative == "self-draft" else speculative
    code, m, table = _eval(capsys, "--model", str(tiny_model_dir), "--heldout", str(heldout),
                           "--golden", str(golden), "--speculative", spec, "--min-greedy-agreement", "1")
    assert code == 0, table
    assert m["greedy_agreement"] == 1.0 and m["perplexity"] == m["baseline_perplexity"]
    assert "speculative" in m["config"] and "speculative" not in m["baseline"]
    if speculative == "self-draft":  # the target as its own draft: every draft is accepted
        assert m["speculative_acceptance"] == 1.0
    assert "speculative acceptance" in table


@pytest.mark.parametrize("family", ["tiny_qwen3_dir", "tiny_phi3_dir", "tiny_gemma3_dir"])
def test_eval_runs_on_a_new_family_and_reports_the_deltas_of_its_quantized_configs(
    family: str, request: pytest.FixtureRequest, eval_files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The harness on the Qwen3, Phi-3 and Gemma 3 families (Gemma 3's windowed layers on the reference
    attention): int8 weights with an int8 KV cache against the float model."""
    heldout, golden = eval_files
    code, m, table = _eval(capsys, "--model", str(request.getfixturevalue(family)), "--heldout", str(heldout),
                           "--golden", str(golden), "--quantization", "int8", "--kv-cache-dtype", "int8",
                           "--max-ppl-delta-pct", "5", "--max-pass-rate-drop", "100")
    assert code == 0, table
    assert "weights int8" in m["config"] and "KV int8" in m["config"]
    assert m["perplexity"] != m["baseline_perplexity"] and abs(m["perplexity_delta_pct"]) < 5
    assert 0.0 <= m["greedy_agreement"] <= 1.0 and m["heldout_tokens"] > 30
