"""JSON schemas for structured-output tests and benches: nested objects, arrays, enums, bounded
numbers, required fields. Strings and arrays are bounded so a random-weight model (which never
chooses to stop) still finishes inside max_tokens."""

from __future__ import annotations

from typing import Any

S = {"type": "string", "maxLength": 6}
INT = {"type": "integer", "minimum": 0, "maximum": 500}


def obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props) if required is None else required,
            "additionalProperties": False}


SCHEMAS: list[dict[str, Any]] = [
    obj({"name": S}),
    obj({"age": INT}),
    obj({"ok": {"type": "boolean"}}),
    obj({"colour": {"enum": ["red", "green", "blue"]}}),
    obj({"score": {"type": "number", "minimum": -1, "maximum": 1}}),
    obj({"name": S, "age": INT, "admin": {"type": "boolean"}}),
    obj({"tags": {"type": "array", "items": S, "maxItems": 3}}),
    obj({"ids": {"type": "array", "items": INT, "minItems": 1, "maxItems": 4}}),
    obj({"user": obj({"name": S, "id": INT})}),
    obj({"a": obj({"b": obj({"c": {"enum": ["x", "y"]}})})}),
    obj({"points": {"type": "array", "items": obj({"x": INT, "y": INT}), "maxItems": 2}}),
    obj({"status": {"enum": ["open", "closed"]}, "count": {"type": "integer", "minimum": 1, "maximum": 9}}),
    obj({"name": S, "nick": S}, required=["name"]),
    obj({"level": {"type": "integer", "minimum": -5, "maximum": 5}, "unit": {"const": "cm"}}),
    obj({"matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0,
                                                                                  "maximum": 9}, "maxItems": 2},
                    "maxItems": 2}}),
    obj({"answer": {"enum": ["yes", "no", "maybe"]}, "why": S}),
    obj({"price": {"type": "number", "minimum": 0, "maximum": 100}, "currency": {"enum": ["TRY", "EUR"]}}),
    obj({"items": {"type": "array", "items": obj({"sku": S, "qty": INT}), "minItems": 1, "maxItems": 2},
         "total": INT}),
    obj({"flag": {"type": "boolean"}, "meta": obj({"v": {"type": "integer", "minimum": 1, "maximum": 3}})}),
    obj({"kind": {"enum": ["a", "b"]}, "data": obj({"k": S, "n": INT}), "list": {"type": "array", "items":
                                                                                     {"enum": [1, 2, 3]},
                                                                                     "maxItems": 3}}),
    obj({"city": {"enum": ["Istanbul", "Ankara", "Izmir"]}, "temp": {"type": "integer", "minimum": -30,
                                                                          "maximum": 50}}),
]
