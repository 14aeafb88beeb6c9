"""Load a recorded `fairgate advise` scenario (tools/record_advise_scenarios.py) into a database."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.tables import UsageRecord

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "advise"


class Scenario:
    def __init__(self, name: str) -> None:
        d = FIXTURES / name
        self.rows: list[dict[str, Any]] = json.loads((d / "usage.json").read_text())
        self.before = (d / "metrics_before.txt").read_text()
        self.after = (d / "metrics_after.txt").read_text()
        self.until = datetime.fromisoformat(json.loads((d / "meta.json").read_text())["until"])

    def load(self, url: str) -> None:
        """Migrate the database at `url` and insert the scenario's usage rows."""
        upgrade(url)
        engine = make_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(insert(UsageRecord), [self._row(r) for r in self.rows])
        finally:
            engine.dispose()

    @staticmethod
    def _row(r: dict[str, Any]) -> dict[str, Any]:
        row = dict(r, created_at=datetime.fromisoformat(r["created_at"]), key_prefix="fg-rec",
                   total_tokens=r["prompt_tokens"] + r["completion_tokens"])
        return row
