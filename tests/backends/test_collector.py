"""The collector settings of a serving process (backends/collector.py, issue 36): what startup
built is frozen out of full collections, and the thresholds make full collections, which stop the
process, ten times rarer."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from fairgate.backends.collector import DEFAULT_THRESHOLD, parse_threshold, settle
from fairgate.gateway.cli import build_parser
from fairgate.gateway.settings import Settings


def test_thresholds_are_parsed_and_checked() -> None:
    assert parse_threshold("700,10,100") == (700, 10, 100)
    assert parse_threshold(" 5000, 20 ,50") == (5000, 20, 50)
    assert parse_threshold([1, 2, 3]) == (1, 2, 3)
    for bad in ("700,10", "700,10,10,10", "a,b,c", "0,10,10", "700,-1,10", ""):
        with pytest.raises(ValueError, match="gc threshold"):
            parse_threshold(bad)


def test_settle_freezes_what_startup_built_and_sets_the_thresholds() -> None:
    before = gc.get_threshold()
    try:
        kept = [{"startup": i} for i in range(1000)]  # long-lived containers, as a loaded model's
        frozen_before = gc.get_freeze_count()
        settle((900, 12, 80))
        assert gc.get_threshold() == (900, 12, 80)
        assert gc.get_freeze_count() >= frozen_before + len(kept)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_engine_server_and_the_gateway_take_the_setting() -> None:
    args = build_parser().parse_args(["engine", "--model", "m"])
    assert args.gc_threshold == DEFAULT_THRESHOLD == (700, 10, 100)
    args = build_parser().parse_args(["engine", "--model", "m", "--gc-threshold", "2000,10,50"])
    assert args.gc_threshold == (2000, 10, 50)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["engine", "--model", "m", "--gc-threshold", "700,10"])

    assert parse_threshold(Settings().gc_threshold) == DEFAULT_THRESHOLD
    assert Settings(gc_threshold="700,10,10").gc_threshold == "700,10,10"
    with pytest.raises(ValidationError, match="gc threshold"):
        Settings(gc_threshold="seven hundred")


# A backlog that grows: containers that stay alive, arriving in bursts, as a flood's waiting
# requests do. Counted in a fresh interpreter (this one's heap would hide the quarter rule).
GROWING_BACKLOG = """
import gc, json, sys
from fairgate.backends.collector import settle
settle(tuple(int(x) for x in sys.argv[1].split(",")))
full = []
gc.callbacks.append(lambda phase, info: full.append(1) if phase == "stop" and info["generation"] == 2 else None)
backlog = []
for request in range(20000):
    backlog.append({"id": request, "tokens": [request] * 4, "stream": {"chunks": []}, "links": [None]})
    for _ in range(8):  # what serving the request made and dropped
        scratch = {"step": [request]}
        scratch["self"] = scratch
print(json.dumps({"full_collections": len(full)}))
"""


def _full_collections(threshold: str) -> int:
    out = subprocess.run([sys.executable, "-c", GROWING_BACKLOG, threshold], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return int(json.loads(out)["full_collections"])


def test_a_growing_backlog_sets_off_fewer_full_collections() -> None:
    python_own = _full_collections("700,10,10")
    ours = _full_collections(",".join(map(str, DEFAULT_THRESHOLD)))
    assert python_own >= 3  # the quarter rule alone lets them follow one another
    assert ours * 3 <= python_own, (ours, python_own)
