"""The OpenAPI 3.1 description of the OpenAI routes both front doors serve, and the two routes
that publish a document: `GET /openapi.json` and `GET /docs` (Swagger UI).

Request schemas say what `parse_request` accepts (bounds included: `n` ≤ 128, `temperature`
0–2, ...); fields OpenAI has and we do not list are still accepted or refused by name, so the
request objects stay open. Every operation documents its success body and, for every other
status, the one OpenAI error object. The gateway (gateway/openapi.py) and the engine server
(backends/local/serving/openapi.py) add their own routes to these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

Schema = dict[str, Any]


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def _num(lo: float, hi: float) -> Schema:
    return nullable({"type": "number", "minimum": lo, "maximum": hi})


_STOP = nullable({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "maxItems": 4}]})
_PART = {"type": "object", "required": ["type"], "properties": {
    "type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}}
_SAMPLING: Schema = {
    "model": {"type": "string", "description": "A model the key may use (GET /v1/models)."},
    "max_tokens": nullable({"type": "integer", "minimum": 1, "maximum": 2**31 - 1}),
    "temperature": _num(0, 2),
    "top_p": _num(0, 1),
    "n": nullable({"type": "integer", "minimum": 1, "maximum": 128}),
    "stream": nullable({"type": "boolean"}),
    "stream_options": nullable({"type": "object", "properties": {"include_usage": {"type": "boolean"}}}),
    "stop": _STOP,
    "seed": nullable({"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1}),
    "presence_penalty": _num(-2, 2),
    "frequency_penalty": _num(-2, 2),
    "user": {"type": "string", "maxLength": 256},
}
_USAGE = {"type": "object", "required": ["prompt_tokens", "completion_tokens", "total_tokens"], "properties": {
    "prompt_tokens": {"type": "integer", "minimum": 0}, "completion_tokens": {"type": "integer", "minimum": 0},
    "total_tokens": {"type": "integer", "minimum": 0}}}
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["message", "type"], "properties": {
        "message": {"type": "string"}, "type": {"type": "string"},
        "code": {"type": ["string", "null"]}, "param": {"type": ["string", "null"]}}}}}


def _completion_object(kind: str, choice: Schema) -> Schema:
    return {"type": "object", "required": ["id", "object", "created", "model", "choices"], "properties": {
        "id": {"type": "string"}, "object": {"const": kind}, "created": {"type": "integer"},
        "model": {"type": "string"}, "choices": {"type": "array", "items": choice}, "usage": ref("Usage")}}


OPENAI_SCHEMAS: dict[str, Schema] = {
    "Error": _ERROR,
    "Usage": _USAGE,
    "ChatMessage": {"type": "object", "required": ["role"], "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "array", "items": _PART}]},
        "name": {"type": "string", "maxLength": 64}, "tool_call_id": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object"}}}},
    "ChatCompletionRequest": {"type": "object", "required": ["messages"], "properties": {
        **_SAMPLING, "messages": {"type": "array", "minItems": 1, "items": ref("ChatMessage")},
        "max_completion_tokens": nullable({"type": "integer", "minimum": 1, "maximum": 2**31 - 1}),
        "logprobs": nullable({"type": "boolean"}),
        "top_logprobs": nullable({"type": "integer", "minimum": 0, "maximum": 20}),
        "response_format": {"type": "object", "required": ["type"], "properties": {
            "type": {"enum": ["text", "json_object", "json_schema"]}}},
        "tools": {"type": "array", "items": {"type": "object"}},
        "tool_choice": {"anyOf": [{"enum": ["none", "auto", "required"]}, {"type": "object"}]}}},
    "CompletionRequest": {"type": "object", "required": ["prompt"], "properties": {
        **_SAMPLING,
        "prompt": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}, "minItems": 1},
                             {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}]},
        "echo": nullable({"type": "boolean"}),
        "logprobs": nullable({"type": "integer", "minimum": 0, "maximum": 5})}},
    "ChatCompletion": _completion_object("chat.completion", {"type": "object", "required": ["index", "message"],
        "properties": {"index": {"type": "integer"}, "finish_reason": {"type": ["string", "null"]},
                       "message": {"type": "object", "required": ["role"], "properties": {
                           "role": {"const": "assistant"}, "content": {"type": ["string", "null"]}}}}}),
    "TextCompletion": _completion_object("text_completion", {"type": "object", "required": ["index", "text"],
        "properties": {"index": {"type": "integer"}, "text": {"type": "string"},
                       "finish_reason": {"type": ["string", "null"]}}}),
    "Model": {"type": "object", "required": ["id", "object", "owned_by"], "properties": {
        "id": {"type": "string"}, "object": {"const": "model"}, "created": {"type": "integer"},
        "owned_by": {"type": "string"},
        "max_model_len": {"type": "integer", "description": "Prompt + completion tokens the model takes, "
                          "where the server knows it (vLLM's field)."}}},
    "ModelList": {"type": "object", "required": ["object", "data"], "properties": {
        "object": {"const": "list"}, "data": {"type": "array", "items": ref("Model")}}},
    # The Responses API on the chat path (openai_wire/responses_request.py): stateless, text parts.
    "ResponsesRequest": {"type": "object", "required": ["input"], "properties": {
        "model": _SAMPLING["model"], "temperature": _num(0, 2), "top_p": _num(0, 1),
        "input": {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "object"}}]},
        "instructions": nullable({"type": "string"}),
        "max_output_tokens": nullable({"type": "integer", "minimum": 1, "maximum": 2**31 - 1}),
        "stream": nullable({"type": "boolean"}), "store": nullable({"const": False}),
        "metadata": nullable({"type": "object", "additionalProperties": {"type": "string"}}),
        "user": _SAMPLING["user"]}},
    "Response": {"type": "object", "required": ["id", "object", "status", "output"], "properties": {
        "id": {"type": "string"}, "object": {"const": "response"}, "created_at": {"type": "integer"},
        "status": {"type": "string"}, "model": {"type": "string"},
        "output": {"type": "array", "items": {"type": "object"}},
        "usage": nullable({"type": "object", "required": ["input_tokens", "output_tokens", "total_tokens"]})}},
    "EmbeddingsRequest": {"type": "object", "required": ["input"], "properties": {
        "model": _SAMPLING["model"],
        "input": {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "string"}},
                            {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}}]},
        "encoding_format": nullable({"enum": ["float", "base64"]}), "user": _SAMPLING["user"]}},
    "EmbeddingList": {"type": "object", "required": ["object", "data", "model", "usage"], "properties": {
        "object": {"const": "list"}, "model": {"type": "string"},
        "data": {"type": "array", "items": {"type": "object", "required": ["object", "index", "embedding"],
                 "properties": {"object": {"const": "embedding"}, "index": {"type": "integer", "minimum": 0},
                                "embedding": {"anyOf": [{"type": "array", "items": {"type": "number"}},
                                                        {"type": "string"}]}}}},
        "usage": {"type": "object", "required": ["prompt_tokens", "total_tokens"]}}},
}


def json_content(schema: Schema) -> Schema:
    return {"application/json": {"schema": schema}}


def responses(ok: Schema | None, status: str = "200", description: str = "OK", media: str = "application/json"
              ) -> Schema:
    """A success response and the OpenAI error object for every other status."""
    out: Schema = {"default": {"description": "An OpenAI error object.", "content": json_content(ref("Error"))}}
    out[status] = {"description": description}
    if ok is not None:
        out[status]["content"] = {media: {"schema": ok}}
    return out


def operation(summary: str, ok: Schema | None, *, body: Schema | None = None, secured: bool = True,
              params: list[Schema] | None = None, status: str = "200") -> Schema:
    op: Schema = {"summary": summary, "responses": responses(ok, status)}
    if body is not None:
        op["requestBody"] = {"required": True, "content": json_content(body)}
    if params:
        op["parameters"] = params
    if not secured:
        op["security"] = []
    return op


def path_param(name: str, schema: Schema | None = None) -> Schema:
    return {"name": name, "in": "path", "required": True, "schema": schema or {"type": "string", "minLength": 1}}


def query_param(name: str, schema: Schema, description: str = "") -> Schema:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _generate(summary: str, request: str, response: str) -> Schema:
    op = operation(summary, ref(response), body=ref(request))
    op["responses"]["200"]["content"]["text/event-stream"] = {
        "schema": {"type": "string", "description": "With `stream: true`: server-sent events, then `data: [DONE]`."}}
    return op


def openai_paths() -> dict[str, Schema]:
    """POST /v1/chat/completions, /v1/completions, /v1/responses, /v1/embeddings; GET /v1/models,
    GET /v1/models/{model}."""
    return {
        "/v1/chat/completions": {"post": _generate("Create a chat completion.", "ChatCompletionRequest",
                                                   "ChatCompletion")},
        "/v1/completions": {"post": _generate("Create a text completion.", "CompletionRequest", "TextCompletion")},
        "/v1/responses": {"post": _generate("Create a response (stateless: `store` must be false).",
                                            "ResponsesRequest", "Response")},
        "/v1/embeddings": {"post": operation("Create embeddings.", ref("EmbeddingList"),
                                             body=ref("EmbeddingsRequest"))},
        "/v1/models": {"get": operation("The models this key may use.", ref("ModelList"))},
        "/v1/models/{model}": {"get": operation("One model.", ref("Model"), params=[path_param("model")])},
    }


def document(title: str, description: str, paths: dict[str, Schema], schemas: dict[str, Schema]) -> Schema:
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": "0.1.0", "description": description},
        "paths": paths,
        "components": {"schemas": {**OPENAI_SCHEMAS, **schemas},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }


_DOCS = """<!doctype html>
<html><head><meta charset="utf-8"><title>%(title)s</title>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css"></head>
<body><div id="ui"><p>The API description: <a href="/openapi.json">/openapi.json</a></p></div>
<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});</script></body></html>
"""


def openapi_routes(build: Callable[[], Schema], title: str) -> list[Route]:
    """`GET /openapi.json` (built once, at the first call) and `GET /docs`; no auth: the document
    holds no secret and no tenant data."""
    cache: list[bytes] = []

    async def spec(request: Request) -> Response:
        if not cache:
            cache.append(orjson.dumps(build()))
        return Response(cache[0], media_type="application/json")

    async def docs(request: Request) -> Response:
        return HTMLResponse(_DOCS % {"title": title})

    return [Route("/openapi.json", spec, methods=["GET"]), Route("/docs", docs, methods=["GET"])]
