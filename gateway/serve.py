"""`fairgate serve`: migrate, apply the declarative configuration if given, then run the gateway
under uvicorn (uvloop + httptools, no access log: the access log would cost more CPU than the
rest of the request path).

Shutdown (SIGTERM/SIGINT): readiness turns 503 at once (`app.state.shutting_down`), the
listener closes, and requests in flight — streams included — get up to `shutdown_grace_s` to
finish before uvicorn cancels what is left; usage rows of finished requests flush on the way out.
"""

from __future__ import annotations

import argparse
import gc
import logging
import socket
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from fairgate.backends.http_protocol import limited_protocol
from fairgate.gateway.app import create_app
from fairgate.gateway.first_run import FirstRun, banner, base_url, bootstrap
from fairgate.gateway.log_buffer import install as install_log_handler
from fairgate.gateway.settings import load_settings
from fairgate.gateway.state import state_of
from fairgate.gateway.store.db import make_engine, make_sessionmaker, upgrade
from fairgate.gateway.store.secret_box import box_from_settings

QUIET_LOGGERS = ("alembic", "httpx", "httpcore")


class GracefulServer(uvicorn.Server):
    """uvicorn's server, telling the app when shutdown begins (readiness goes 503), and
    printing where it listens (with the first start's secrets, once) when it does."""

    def __init__(self, config: uvicorn.Config, app: Starlette, first: FirstRun | None = None) -> None:
        super().__init__(config)
        self._app = app
        self._first = first

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        st = state_of(self._app)
        model = st.embedded.name if st.embedded is not None else next(iter(sorted(st.backends)), None)
        banner(base_url(host, port), self._first, model)
        self._first = None  # the secrets are not kept past this
        # What startup loaded (torch, the model, the app) lives as long as the process: frozen
        # out of the collector, a full collection stops scanning it (660 ms -> ~0 ms on a loaded
        # 2-core machine), which otherwise stalled /health for half a second now and then.
        gc.freeze()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._app.state.shutting_down = True
        super().handle_exit(sig, frame)


def run_gateway(args: argparse.Namespace) -> int:
    from fairgate.gateway.config.declarative import split_config_file

    settings_values, declared = split_config_file(args.config)
    settings = load_settings(None, values=settings_values, model=args.model, host=args.host, port=args.port,
                             log_level=getattr(args, "log_level", None))
    # stderr, the per-request lines written in batches (gateway/log_buffer.py)
    install_log_handler(settings.log_level.upper(), "%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.log_level != "debug":  # their info lines say nothing an operator needs
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)
    first = None
    upgrade(settings.database_url, secrets=box_from_settings(settings))
    if not settings.admin_token and (declared is None or not declared.config.tenants):
        db = make_engine(settings.database_url)
        first = bootstrap(make_sessionmaker(db))
        db.dispose()
    app = create_app(settings, migrate=False, declared=declared)
    # httptools, with the header limits enforced while parsing (backends/http_protocol.py)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, loop="uvloop",
                            http=limited_protocol(settings.header_limits()),
                            access_log=False, log_level=settings.log_level, lifespan="on",
                            timeout_graceful_shutdown=int(settings.shutdown_grace_s))
    GracefulServer(config, app, first).run()
    return 0
