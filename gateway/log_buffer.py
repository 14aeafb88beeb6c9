"""`fairgate serve`'s log handler: lines formatted when logged, written to the stream in batches.

Every request logs one info line (gateway/request/request_log.py). A plain `StreamHandler` writes and
flushes each line on its own — one write(2) per request, a few µs of CPU each at thousands of
requests a second. This handler keeps the formatted lines (timestamps are taken when the line
is logged) and writes them together at most `interval_s` later, or at once when `max_lines`
are waiting or a WARNING or worse arrives (after the lines before it: the order is kept).
`flush()` and `close()` (logging.shutdown at exit) write what is left.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import IO, Any


class BufferedStreamHandler(logging.StreamHandler):
    def __init__(self, stream: IO[str] | None = None, interval_s: float = 0.1, max_lines: int = 256) -> None:
        super().__init__(stream)
        self.interval_s = interval_s
        self.max_lines = max_lines
        self._lines: list[str] = []
        self._waiting = threading.Event()  # set when the first line of a batch is kept
        self._writer: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:  # called under the handler's lock
        try:
            self._lines.append(self.format(record) + self.terminator)
        except Exception:  # noqa: BLE001 - logging's own contract: report, never raise
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING or len(self._lines) >= self.max_lines:
            self._write()
        elif len(self._lines) == 1:
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name="fairgate-log-writer", daemon=True)
                self._writer.start()
            self._waiting.set()

    def flush(self) -> None:
        self.acquire()
        try:
            self._write()
        finally:
            self.release()

    def _write(self) -> None:
        if not self._lines:
            return
        lines, self._lines = self._lines, []
        try:
            self.stream.write("".join(lines))
            self.stream.flush()
        except Exception:  # noqa: BLE001 - e.g. a closed stream at exit
            self.handleError(_lost(len(lines)))

    def _run(self) -> None:
        while True:
            self._waiting.wait()
            self._waiting.clear()
            time.sleep(self.interval_s)  # let a batch gather
            self.flush()


class SecondFormatter(logging.Formatter):
    """`logging.Formatter` with the default timestamp's date and time formatted once a second
    (the milliseconds are still each record's own); a `datefmt` is formatted as usual."""

    def __init__(self, fmt: str | None = None, datefmt: str | None = None) -> None:
        super().__init__(fmt, datefmt)
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        if datefmt is not None or self.default_msec_format is None:
            return super().formatTime(record, datefmt)
        second, stamp = self._second
        if int(record.created) != second:  # time zones and their changes fall on whole seconds
            stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = (int(record.created), stamp)
        return self.default_msec_format % (stamp, record.msecs)


def _lost(n: int) -> logging.LogRecord:
    return logging.LogRecord("fairgate.log", logging.ERROR, __file__, 0, "%d log lines could not be written",
                             (n,), None)


# What a LogRecord looks up when it is made, and the switch that skips it (logging HOWTO,
# "Optimization"), for a format that shows none of it.
_RECORD_EXTRAS = (("logThreads", ("%(thread)", "%(threadName)")), ("logProcesses", ("%(process)",)),
                  ("logMultiprocessing", ("%(processName)",)),
                  ("_srcfile", ("%(pathname)", "%(filename)", "%(module)", "%(lineno)", "%(funcName)")))


def install(level: str, fmt: str, **kwargs: Any) -> BufferedStreamHandler:
    """`logging.basicConfig(level, format)` with this handler on stderr; a record skips finding
    its caller, thread and process when `fmt` shows none of them."""
    for switch, fields in _RECORD_EXTRAS:
        if not any(f in fmt for f in fields):
            setattr(logging, switch, None if switch == "_srcfile" else False)
    handler = BufferedStreamHandler(**kwargs)
    handler.setFormatter(SecondFormatter(fmt))
    logging.basicConfig(level=level, handlers=[handler])
    return handler
