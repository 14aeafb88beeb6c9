"""Usage rows are stamped in naive UTC."""

from __future__ import annotations

from datetime import UTC, datetime

from fairgate.gateway.store.tables import utcnow


def test_utcnow_is_naive_utc_to_the_microsecond() -> None:
    before = datetime.now(UTC).replace(tzinfo=None)
    now = utcnow()
    after = datetime.now(UTC).replace(tzinfo=None)
    assert now.tzinfo is None and before <= now <= after
