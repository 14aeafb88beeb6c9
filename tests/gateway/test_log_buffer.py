"""`fairgate serve`'s log handler: every line reaches the stream, in order, formatted when it
was logged; info lines in batches, a warning at once (with the lines before it)."""

from __future__ import annotations

import io
import logging
import time

from fairgate.gateway.log_buffer import BufferedStreamHandler


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)


def logger_with(handler: logging.Handler, name: str) -> logging.Logger:
    log = logging.getLogger(name)
    log.propagate = False
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    return log


def wait_for(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_info_lines_are_written_together_and_all_of_them_arrive() -> None:
    stream = CountingStream()
    handler = BufferedStreamHandler(stream, interval_s=0.05)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logger_with(handler, "test.log_buffer.batch")
    for i in range(50):
        log.info("request %d", i)
    wait_for(lambda: stream.getvalue().count("\n") == 50)  # the writer thread, without a flush
    assert stream.getvalue().splitlines() == [f"INFO request {i}" for i in range(50)]
    assert stream.writes < 10  # batches, not one write per line


def test_a_warning_is_written_at_once_after_the_lines_before_it() -> None:
    stream = CountingStream()
    handler = BufferedStreamHandler(stream, interval_s=3600)  # the writer thread would never come
    log = logger_with(handler, "test.log_buffer.warning")
    log.info("first")
    log.info("second")
    assert stream.getvalue() == ""
    log.warning("trouble")
    assert stream.getvalue().splitlines() == ["first", "second", "trouble"]


def test_a_full_buffer_and_a_flush_write_what_is_kept() -> None:
    stream = CountingStream()
    handler = BufferedStreamHandler(stream, interval_s=3600, max_lines=10)
    log = logger_with(handler, "test.log_buffer.full")
    for i in range(25):
        log.info("line %d", i)
    assert stream.getvalue().count("\n") == 20 and stream.writes == 2
    handler.flush()  # what logging.shutdown does at exit
    assert stream.getvalue().splitlines() == [f"line {i}" for i in range(25)]


def test_timestamps_read_as_the_standard_formatter_writes_them() -> None:
    from fairgate.gateway.log_buffer import SecondFormatter

    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    ours, theirs = SecondFormatter(fmt), logging.Formatter(fmt)
    base = time.time()
    for offset in (0.0, 0.0004, 0.5, 0.9996, 1.0, 1.0001, 59.999, 3600.25, -86400.7, 0.1):
        record = logging.LogRecord("fairgate.requests", logging.INFO, __file__, 1, "request %s", ("r1",), None)
        record.created = base + offset
        record.msecs = int((record.created - int(record.created)) * 1000) + 0.0
        assert ours.format(record) == theirs.format(record), offset
