"""EngineConfig: the `fairgate engine` flags it is built from, and what it refuses."""

from __future__ import annotations

import argparse

import pytest

from fairgate.backends.local.engine.config import EngineConfig
from fairgate.gateway.cli import _engine_args


def _parse(*argv: str) -> EngineConfig:
    parser = argparse.ArgumentParser()
    _engine_args(parser)
    return EngineConfig.from_args(parser.parse_args(["--model", "some-folder", *argv]))


def test_the_gemm_flag_reaches_the_config():
    assert _parse().gemm == "auto"
    assert _parse("--gemm", "torch").gemm == "torch"
    assert _parse("--gemm", "onednn").gemm == "onednn"


def test_an_unknown_gemm_is_refused_by_name():
    with pytest.raises(ValueError, match="gemm must be auto, native, onednn or torch, not 'mkl'"):
        EngineConfig("some-folder", gemm="mkl").validate()
    EngineConfig("some-folder", gemm="torch").validate()
