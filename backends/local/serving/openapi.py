"""The engine server's OpenAPI document: the OpenAI routes plus health, stats, metrics and the
fairness control API (backends/local/serving/server.py). Served at `GET /openapi.json` and `GET /docs`."""

from __future__ import annotations

from typing import Any

from fairgate.backends.openai_wire.openapi import (
    Schema,
    document,
    openai_paths,
    operation,
    responses,
)
from fairgate.scheduler.request import PRIORITY_CLASSES

OBJ: Schema = {"type": "object"}
TENANT_HEADERS = [
    {"name": "X-Tenant", "in": "header", "schema": {"type": "string", "maxLength": 200},
     "description": "The tenant to schedule as (API-key holders only)."},
    {"name": "X-Priority", "in": "header", "schema": {"enum": list(PRIORITY_CLASSES)}},
    {"name": "X-Cache-Salt", "in": "header", "schema": {"type": "string", "maxLength": 200}},
    {"name": "X-Prompt-Version", "in": "header", "schema": {"type": "string", "maxLength": 200}},
]
FAIRNESS: Schema = {"type": "object", "required": ["weights"], "properties": {
    "weights": {"type": "object", "additionalProperties": {"type": "number", "exclusiveMinimum": 0}},
    "version": {"type": ["integer", "null"]}}}


def engine_document() -> dict[str, Any]:
    paths = openai_paths()
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings"):
        paths[path]["post"]["parameters"] = TENANT_HEADERS
    paths |= {
        "/health": {"get": operation("Liveness.", OBJ, secured=False)},
        "/stats": {"get": operation("Engine counters (running, waiting, KV blocks), the measured step costs, and which kernel runs each operation and why.", OBJ, secured=False)},
        "/metrics": {"get": {"summary": "Prometheus metrics (metrics token or the engine's API key).",
                             "responses": responses({"type": "string"}, media="text/plain")}},
        "/control/fairness": {"get": operation("The fairness weights (control secret).", FAIRNESS),
                              "put": operation("Set the fairness weights (control secret).", FAIRNESS,
                                               body=FAIRNESS)},
    }
    return document("fairgate engine", "The paged engine behind an OpenAI-compatible API.", paths, {})
