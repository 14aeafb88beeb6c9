"""The engine's periodic stats line (figures of an interval from two snapshots; a real engine
logging while it works and once when it goes idle) and the model-loading progress bar."""

from __future__ import annotations

import asyncio
import logging
import re
import time

import torch

from fairgate.backends.local.engine.async_engine import AsyncEngine
from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.output import EngineStats
from fairgate.backends.local.engine.stats_log import EngineStatsLogger, interval
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.model.config import ModelConfig
from fairgate.backends.local.model.loader import load_weights

LOGGER = "fairgate.engine.stats"


def test_interval_figures_from_two_snapshots():
    before = EngineStats(tokens_computed=100, generation_tokens=10, prefix_cache_queries=64, prefix_cache_hits=16,
                         preemptions=1, spec_draft_tokens=8, spec_accepted_tokens=2)
    after = EngineStats(running=3, waiting=2, kv_blocks_used=30, kv_blocks_total=120, tokens_computed=700,
                        generation_tokens=110, prefix_cache_queries=264, prefix_cache_hits=116, preemptions=4,
                        spec_draft_tokens=28, spec_accepted_tokens=17)
    f = interval(before, after, 2.0)
    assert f.prompt_tps == (600 - 100) / 2 and f.generation_tps == 100 / 2
    assert (f.running, f.waiting, f.kv_used, f.hit_rate, f.preemptions) == (3, 2, 0.25, 0.5, 3)
    assert f.spec_acceptance == 15 / 20
    assert f.line("m") == ("engine m: prompt 250.0 tokens/s, generation 50.0 tokens/s, running 3, waiting 2, "
                           "KV cache 25.0% used, prefix cache hit rate 50.0%, preemptions 3, spec acceptance 75.0%")
    stalled = interval(after, after, 10.0)  # requests held but no token made: still worth a line
    assert stalled.busy and stalled.hit_rate is None and stalled.spec_acceptance is None
    done = EngineStats(kv_blocks_total=120, tokens_computed=700, generation_tokens=110)
    assert not interval(done, done, 10.0).busy


async def test_a_working_engine_logs_its_stats_then_one_idle_line(tiny_model_dir, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, stats_interval_s=0.1,
                                      served_model_name="tiny"))
    try:
        out = await engine.generate("the quick brown fox jumps over the lazy dog " * 3,
                                    SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True))
        assert len(out.token_ids) == 40
        await asyncio.sleep(0.6)  # a few intervals of idleness: one idle line, then silence
        lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        busy = [line for line in lines if not line.startswith("engine tiny: prompt 0.0 tokens/s, generation 0.0")]
        assert busy, lines
        generated = [float(m.group(1)) for line in busy if (m := re.search(r"generation ([\d.]+) tokens/s", line))]
        assert sum(generated) > 0
        assert all(re.search(r"running \d+, waiting \d+, KV cache [\d.]+% used, prefix cache hit rate", line)
                   for line in lines)
        assert lines[-1].startswith("engine tiny: prompt 0.0 tokens/s, generation 0.0 tokens/s, running 0, waiting 0")
        seen = len(lines)
        await asyncio.sleep(0.4)
        assert len([r for r in caplog.records if r.name == LOGGER]) == seen  # idle: nothing more
    finally:
        await engine.aclose()


def test_stats_logger_off_and_stopped(tiny_model_dir):
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, stats_interval_s=0))
    try:
        assert not engine._stats_log._thread.is_alive()  # 0: no thread at all
        logger = EngineStatsLogger(engine, "x", 0.05).start()
        time.sleep(0.1)
        logger.stop()
        assert not logger._thread.is_alive()
    finally:
        engine.close()


def test_loading_shows_a_progress_bar_over_the_tensors(tiny_model_dir, capsys):
    cfg = ModelConfig.from_dir(tiny_model_dir)
    state = load_weights(tiny_model_dir, cfg, torch.float32, progress=True)
    err = capsys.readouterr().err
    assert f"Loading {tiny_model_dir.name}" in err and "100%" in err and "tensor" in err
    assert state  # the weights themselves, as without the bar
    load_weights(tiny_model_dir, cfg, torch.float32, progress=False)
    assert capsys.readouterr().err == ""


def test_engine_and_serve_flags():
    from fairgate.gateway.cli import build_parser

    args = build_parser().parse_args(["engine", "--model", "m", "--stats-interval", "2.5", "--log-level", "debug"])
    assert EngineConfig.from_args(args).stats_interval_s == 2.5 and args.log_level == "debug"
    assert EngineConfig.from_args(build_parser().parse_args(["engine", "--model", "m"])).stats_interval_s == 10.0
    assert build_parser().parse_args(["serve", "--log-level", "warning"]).log_level == "warning"
