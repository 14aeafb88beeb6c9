"""The fault suite's report: every scenario records its figures with `fault_report(...)`, and
the session ends with one table (served, refused, rows written, rows lost, reservations leaked,
time to recover). Rows lost and reservations leaked are asserted to be 0 by each scenario."""

from __future__ import annotations

import json

import pytest

from tests.faults.figures import Figures
from tests.helpers.upstream import UpstreamServer

_KEY = pytest.StashKey[list[Figures]]()


@pytest.fixture(scope="module")
def upstream():
    with UpstreamServer() as up:
        up.behaviour.record = False  # long loads: keep no request bodies
        yield up


@pytest.fixture
def fault_report(request: pytest.FixtureRequest):
    def report(fig: Figures) -> Figures:
        request.config.stash.setdefault(_KEY, []).append(fig)
        return fig

    return report


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    figures = config.stash.get(_KEY, [])
    if not figures:
        return
    terminalreporter.section("fault scenarios")
    for line in Figures.table(figures):
        terminalreporter.write_line(line)
    terminalreporter.write_line(json.dumps([f.as_dict() for f in figures]))


@pytest.fixture(scope="session")
def long_model_dir(tmp_path_factory: pytest.TempPathFactory):
    """The tiny Llama with a 4,096-token context: long answers to leave in the middle of."""
    from tests.helpers.tiny_models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-long"), "llama", max_position_embeddings=4096)
