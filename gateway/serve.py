"""`fairgate serve`: migrate, then run the gateway under uvicorn (uvloop + httptools, no access
log: the access log would cost more CPU than the rest of the request path)."""

from __future__ import annotations

import argparse
import logging

import uvicorn

from gateway.app import create_app
from gateway.settings import load_settings


def run_gateway(args: argparse.Namespace) -> int:
    settings = load_settings(args.config, model=args.model, host=args.host, port=args.port)
    logging.basicConfig(level=settings.log_level.upper())
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, loop="uvloop", http="httptools",
                access_log=False, log_level=settings.log_level, lifespan="on")
    return 0
