"""The file of requests out (gateway/billing/open_requests.py): a killed process's rows are
recovered by the next start; a live process's never are; the file stays small."""

from __future__ import annotations

import os
from pathlib import Path

from fairgate.gateway.billing.open_requests import OpenRequests


def _die(o: OpenRequests) -> None:
    """What a SIGKILL does to it: the fds go (and the kernel frees the lock), the files stay."""
    os.close(o._fd)
    os.close(o._slot_lock)
    o._fd = o._slot_lock = -1


def test_a_dead_process_rows_are_recovered_and_a_live_one_is_left_alone(tmp_path: Path) -> None:
    base = tmp_path / "usage.journal.open"
    dead, live = OpenRequests(base), OpenRequests(base)
    assert (dead.path.name, live.path.name) == ("usage.journal.open.0", "usage.journal.open.1")
    dead.opened("a", {"request_id": "a", "prompt_tokens": 7})
    dead.opened("b", {"request_id": "b"})
    live.opened("c", {"request_id": "c"})
    with dead.path.open("ab") as f:
        f.write(b'{"request_id": "torn')  # killed in the middle of a write
    _die(dead)
    nxt = OpenRequests(base)  # takes the free slot 0 and recovers it; slot 1 is live
    assert nxt.path == dead.path
    assert [r["request_id"] for r in nxt.left] == ["a", "b"] and nxt.left[0]["prompt_tokens"] == 7
    _die(nxt)  # died again before billing them: the next one still finds them
    again = OpenRequests(base)
    assert [r["request_id"] for r in again.left] == ["a", "b"]
    again.recovered()
    assert again.left == [] and not list(tmp_path.glob("*.recovering"))
    _die(live)
    last = OpenRequests(base)  # slot 0 is free again, slot 1's process died: both are read
    assert [r["request_id"] for r in last.left] == ["c"]
    last.close()
    again.close()


def test_the_file_keeps_only_the_requests_out_once_it_is_past_its_bound(tmp_path: Path) -> None:
    o = OpenRequests(tmp_path / "j", max_bytes=4096)
    for i in range(500):
        o.opened(f"r{i}", {"request_id": f"r{i}", "pad": "x" * 40})
        if i != 250:
            o.closed(f"r{i}")
    assert o.path.stat().st_size <= 4096 + 100 and o.out == 1
    _die(o)
    assert "r250" in [r["request_id"] for r in OpenRequests(tmp_path / "j").left]


def test_a_clean_stop_with_nothing_out_leaves_no_rows(tmp_path: Path) -> None:
    o = OpenRequests(tmp_path / "j")
    o.opened("a", {"request_id": "a"})
    o.closed("a")
    o.close()
    assert OpenRequests(tmp_path / "j").left == []


def test_an_unwritable_folder_never_fails_a_request(tmp_path: Path) -> None:
    o = OpenRequests(tmp_path / "no-such-dir" / "j")
    o.opened("a", {"request_id": "a"})  # nothing on disk, and no exception
    o.closed("a")
    o.close()
    assert o.left == [] and not (tmp_path / "no-such-dir").exists()


def test_a_clean_stop_leaves_no_files(tmp_path: Path) -> None:
    a, b = OpenRequests(tmp_path / "j"), OpenRequests(tmp_path / "j")
    a.opened("x", {"request_id": "x"})
    a.closed("x")
    a.close()
    b.close()
    assert list(tmp_path.iterdir()) == []


def test_a_row_is_in_the_file_as_soon_as_it_is_opened(tmp_path: Path) -> None:
    """Copied into the shared map, a row is in the page cache at once: another reader of the file
    sees it while this process lives, with nothing flushed or closed (what a SIGKILL leaves)."""
    o = OpenRequests(tmp_path / "j", max_bytes=4096)
    o.opened("a", {"request_id": "a", "prompt_tokens": 3})
    o.opened("b", {"request_id": "b"})
    data = o.path.read_bytes()
    assert len(data) == 4096 and data.rstrip(b"\0").splitlines() == [
        b'{"request_id":"a","prompt_tokens":3}', b'{"request_id":"b"}']
    for i in range(100):  # past the map's end: rewritten with the rows still out, a and b
        o.opened(f"r{i}", {"request_id": f"r{i}", "pad": "x" * 40})
        o.closed(f"r{i}")
    rows = o.path.read_bytes().rstrip(b"\0").splitlines()
    assert rows[:2] == [b'{"request_id":"a","prompt_tokens":3}', b'{"request_id":"b"}']
    _die(o)
    assert [r["request_id"] for r in OpenRequests(tmp_path / "j").left][:2] == ["a", "b"]
