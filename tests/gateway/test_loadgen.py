"""The pure parts of `fairgate bench`: workloads, the schedule, the figures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairgate.gateway.cli import main
from fairgate.gateway.loadgen.cli import v1_url
from fairgate.gateway.loadgen.client import RequestResult, Target
from fairgate.gateway.loadgen.fit import byte_bound, fit_scale, need
from fairgate.gateway.loadgen.runner import LoadLevel, RunPlan, schedule, slices
from fairgate.gateway.loadgen.stats import (
    Slo,
    bucket_of,
    cdf,
    distribution,
    error_messages,
    group,
    level_figures,
)
from fairgate.gateway.loadgen.workloads import WorkloadSource
from tests.helpers.upstream import UpstreamBehaviour, UpstreamServer, words_of


def _result(ttft: float | None, e2e: float | None, out: int, itl: list[float], ok: bool = True,
            level: str = "c=1", prompt: int | None = 10) -> RequestResult:
    return RequestResult("t", level, 0, "chat", 0.0, ok=ok, error=None if ok else "http_500", ttft=ttft,
                         e2e=e2e, itl=itl, prompt_tokens=prompt if ok else None, output_tokens=out if ok else 0)


def test_workloads_repeat_exactly_and_rag_shares_its_system_prompt() -> None:
    a, b = WorkloadSource("rag", seed=3, scale=0.1), WorkloadSource("rag", seed=3, scale=0.1)
    assert a.spec(7) == b.spec(7) and a.spec(7) != a.spec(8)
    assert a.spec(1).messages[0] == a.spec(2).messages[0]  # byte-identical shared prefix
    assert a.spec(1).messages[1] != a.spec(2).messages[1]
    assert WorkloadSource("long", max_tokens=5).spec(0).max_tokens == 5
    assert WorkloadSource("long").spec(0).max_tokens == 1024
    mixed = {WorkloadSource("mixed").spec(i).workload for i in range(60)}
    assert mixed == {"chat", "rag", "long", "extraction"}
    with pytest.raises(ValueError, match="unknown workload"):
        WorkloadSource("nope")


@pytest.mark.parametrize("name", ["chat", "rag", "long", "extraction", "mixed"])
def test_fitting_shrinks_a_workload_until_its_largest_request_fits(name: str) -> None:
    """Issue 37: prompt + max_tokens of every mix within the budget, at the largest scale (within
    the 3% step) that does it; a workload that fits is left alone, never grown."""
    source = WorkloadSource(name, seed=1)
    fitted = fit_scale(source, 512, byte_bound)
    assert need(source, byte_bound) > 512 >= need(fitted, byte_bound)
    assert need(WorkloadSource(name, seed=1, scale=fitted.scale * 1.1), byte_bound) > 512
    # the largest of the sampled specs stands for all of them within a few percent (fit.MARGIN's 10%)
    assert max(byte_bound(fitted.spec(i)) + fitted.spec(i).max_tokens for i in range(1000)) <= 512 * 1.05
    assert fit_scale(fitted, 512, byte_bound) == fitted
    small = WorkloadSource(name, scale=0.01)
    assert fit_scale(small, 10_000, byte_bound) == small
    capped = fit_scale(WorkloadSource(name, max_tokens=100), 512, byte_bound)  # only the prompts shrink
    assert {capped.spec(i).max_tokens for i in range(5)} == {100} and need(capped, byte_bound) <= 512


def test_budget_slices_and_alternating_order() -> None:
    assert slices(7, 3) == [3, 2, 2] and slices(2.0, 2) == [1.0, 1.0] and slices(None, 2) == [None, None]
    targets = [Target("A", "u", "m"), Target("B", "u", "m")]
    plan = RunPlan([LoadLevel("concurrency", 1), LoadLevel("concurrency", 4)], WorkloadSource("chat"),
                   requests=5, rounds=2)
    order = [(t, lv.label, n) for t, lv, _r, n, _d in schedule(targets, plan)]
    assert order == [(0, "c=1", 3), (1, "c=1", 3), (1, "c=1", 2), (0, "c=1", 2),
                     (0, "c=4", 3), (1, "c=4", 3), (1, "c=4", 2), (0, "c=4", 2)]


def test_distribution_cdf_and_buckets() -> None:
    d = distribution([1.0, 2.0, 3.0, 4.0])
    assert d["count"] == 4 and d["mean"] == 2.5 and d["p50"] == 2.5 and d["max"] == 4.0
    assert d["p99"] == pytest.approx(3.97)
    assert distribution([])["p50"] is None
    assert cdf([3.0, 1.0, 2.0]) == [[1.0, 1 / 3], [2.0, 2 / 3], [3.0, 1.0]]
    many = cdf([float(i) for i in range(1000)], points=10)
    assert len(many) == 10 and many[-1] == [999.0, 1.0] and many[0][0] == 0.0
    assert [bucket_of(n) for n in (None, 0, 63, 64, 5000, 20000)] == [
        "unknown", "0-63", "0-63", "64-255", "4096-16383", ">=16384"]


def test_goodput_counts_requests_meeting_every_objective() -> None:
    rs = [_result(0.1, 1.0, 11, [0.09] * 10), _result(0.5, 1.0, 11, [0.05] * 10),
          _result(0.1, 3.0, 11, [0.29] * 10), _result(None, None, 0, [], ok=False)]
    slo = Slo(ttft=0.2, itl=0.1)
    assert [slo.met(r) for r in rs] == [True, False, False, False]  # TPOT 0.09 ok, TTFT, TPOT 0.29
    fig = level_figures(rs, 2.0, slo)
    assert (fig["sent"], fig["completed"], fig["errors"], fig["slo_met"]) == (4, 3, 1, 1)
    assert fig["request_throughput"] == 1.5 and fig["goodput"] == 0.5 and fig["output_throughput"] == 16.5
    assert fig["slo_attainment"] == pytest.approx(1 / 3)
    assert group(rs)["itl"]["count"] == 30 and group(rs)["tpot"]["count"] == 3
    assert Slo().met(rs[2]) and not Slo().met(rs[3])


def test_base_urls() -> None:
    assert v1_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/v1"
    assert v1_url("http://h:1/") == "http://h:1/v1"
    assert v1_url("https://api.example.com/openai/v1/") == "https://api.example.com/openai/v1"


def test_bench_against_an_external_api_measures_its_pace_and_cost(tmp_path: Path, capsys) -> None:
    """An external API played by our loopback server: 5 words, one chunk each, 20 ms apart, and a
    LiteLLM-style cost header. Everything the bench reports follows from that."""
    paced = UpstreamBehaviour(token_delay_s=0.02, stream_headers=[(b"x-litellm-response-cost", b"0.002")])
    out = tmp_path / "r"
    with UpstreamServer(paced) as up:
        argv = ["bench", "--base-url", up.base_url, "--label", "ext", "--model", "up-model", "--requests", "6",
                "--concurrency", "2", "--max-tokens", "5", "--warmup", "0", "--out", str(out), "--progress", "off"]
        assert main(argv) == 0
        received = list(up.received)
    assert len(received) == 6  # no probe: a server that lists no max_model_len gets the workload as is
    assert "could not tell the served context length of ext" in capsys.readouterr().out
    assert all(b["stream"] and b["stream_options"] == {"include_usage": True} and b["max_tokens"] == 5
               for b in received)
    tf = json.loads((out / "bench.json").read_text())["targets"]["ext"]
    g = tf["levels"]["c=2"]
    assert (g["sent"], g["completed"], g["output_tokens"]) == (6, 6, 30)
    assert g["prompt_tokens"] == sum(words_of(b) for b in received)  # the server's usage chunk
    assert g["itl"]["count"] == 6 * 4 and g["ttft"]["p50"] >= 0.02  # a pause precedes every chunk
    assert g["itl"]["p50"] >= 0.015 and g["tpot"]["count"] == 6
    assert set(tf["by_route"]) == {"up-model"}  # no gateway header: the answer's model field
    assert tf["cost"]["cost"] == pytest.approx(0.012)
    assert tf["cost"]["cost_per_million_output_tokens"] == pytest.approx(0.012 / 30 * 1e6)


def test_a_failing_run_says_why_on_the_terminal(tmp_path: Path, capsys) -> None:
    """Issue 37: the first distinct errors, with status, code and message, in the printed
    summary (not only counts, not only inside report.html), in the order they came."""
    upstream = UpstreamBehaviour(fail_next=[503, 500, 503])
    with UpstreamServer(upstream) as up:
        argv = ["bench", "--base-url", up.base_url, "--label", "ext", "--model", "up-model", "--requests", "5",
                "--max-tokens", "3", "--warmup", "0", "--out", str(tmp_path / "r"), "--progress", "off"]
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "ext: 3 errors; the first kinds:\n      2 x http_503: injected 503\n      1 x http_500: injected 500\n" \
        in printed
    tf = json.loads((tmp_path / "r" / "bench.json").read_text())["targets"]["ext"]
    assert tf["error_messages"] == [{"error": "http_503", "code": "", "message": "injected 503", "count": 2},
                                    {"error": "http_500", "code": "", "message": "injected 500", "count": 1}]
    coded = [RequestResult("t", "c=1", 0, "chat", float(i), error="http_400", error_code="context_length_exceeded",
                           error_detail="too long") for i in range(7)]
    assert error_messages(coded, limit=1) == [{"error": "http_400", "code": "context_length_exceeded",
                                               "message": "too long", "count": 7}]


def _default_sigint() -> None:
    """In the child before exec: SIGINT unblocked and at its default, whatever the test process
    inherited or set (an ignored or blocked signal carries over exec), as in a terminal."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_still_writes_a_consistent_report(tmp_path: Path) -> None:
    """SIGINT in the middle of a run: the report is written, cut-off requests count as errors."""
    out = tmp_path / "r"
    with UpstreamServer(UpstreamBehaviour(token_delay_s=0.05)) as up:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fairgate.gateway.cli", "bench", "--base-url", up.base_url, "--model", "up-model",
             "--duration", "60", "--concurrency", "3", "--max-tokens", "20", "--warmup", "0", "--out", str(out),
             "--progress", "off"], env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=_default_sigint)
        deadline = time.time() + 120
        while len(up.received) < 6 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            pytest.fail(f"the bench ran on after SIGINT; its output:\n{output[-2000:]}")
    assert proc.returncode == 130, output
    doc = json.loads((out / "bench.json").read_text())
    assert doc["interrupted"] is True
    tf = next(iter(doc["targets"].values()))
    g = tf["levels"]["c=3"]
    assert g["sent"] == g["completed"] + g["errors"] >= 6
    assert tf["errors"].get("cancelled", 0) >= 1 and g["completed"] >= 3
    assert "Interrupted" in (out / "report.html").read_text()
