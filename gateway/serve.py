"""`fairgate serve`: migrate, apply the declarative configuration if given, then run the gateway
under uvicorn (uvloop + httptools, no access log: the access log would cost more CPU than the
rest of the request path).

Shutdown (SIGTERM/SIGINT): readiness turns 503 at once (`app.state.shutting_down`), the
listener closes, and requests in flight — streams included — get up to `shutdown_grace_s` to
finish before uvicorn cancels what is left; usage rows of finished requests flush on the way out.
"""

from __future__ import annotations

import argparse
import logging
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from backends.http_protocol import limited_protocol
from gateway.app import create_app
from gateway.settings import load_settings


class GracefulServer(uvicorn.Server):
    """uvicorn's server, telling the app when shutdown begins (readiness goes 503)."""

    def __init__(self, config: uvicorn.Config, app: Starlette) -> None:
        super().__init__(config)
        self._app = app

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._app.state.shutting_down = True
        super().handle_exit(sig, frame)


def run_gateway(args: argparse.Namespace) -> int:
    from gateway.declarative import split_config_file

    settings_values, declared = split_config_file(args.config)
    settings = load_settings(None, values=settings_values, model=args.model, host=args.host, port=args.port)
    logging.basicConfig(level=settings.log_level.upper())
    app = create_app(settings, declared=declared)
    # httptools, with the header limits enforced while parsing (backends/http_protocol.py)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, loop="uvloop",
                            http=limited_protocol(settings.header_limits()),
                            access_log=False, log_level=settings.log_level, lifespan="on",
                            timeout_graceful_shutdown=int(settings.shutdown_grace_s))
    GracefulServer(config, app).run()
    return 0
