"""`POST /admin/classify`: a dry run of the personal-data detectors for operators tuning tenant
patterns and keywords. Admin token only. Nothing is stored or logged: the text is classified
in the classifier's worker and only kinds and spans (offsets into the given text) come back.

Body: {"text": str, "patterns"?: [str], "keywords"?: [str], "tenant_id"?: str}; with a
tenant id, that tenant's saved patterns and keywords are added.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin.routes import admin_route
from fairgate.gateway.admin.routing import _json_body
from fairgate.gateway.admin.state import admin_state
from fairgate.gateway.request.classification import classifier_for
from fairgate.policies.detection_options import DEFAULT_OPTIONS
from fairgate.policies.sensitivity import classify, validate_tenant_patterns

MAX_TEXT = 1 << 20


def _strings(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WireError(400, f"`{name}` must be a list of strings.", "invalid_value", name)
    return value


@admin_route
async def post_classify(request: Request) -> Any:
    body = await _json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        raise WireError(400, "`text` (a string) is required.", "invalid_value", "text")
    text = body["text"]
    if len(text) > MAX_TEXT:
        raise WireError(400, f"`text` is longer than {MAX_TEXT} characters.", "invalid_value", "text")
    patterns, keywords = _strings(body, "patterns"), _strings(body, "keywords")
    errors = validate_tenant_patterns(patterns)
    if errors:
        raise WireError(400, "; ".join(errors), "invalid_pattern", "patterns")
    tid, options = body.get("tenant_id"), DEFAULT_OPTIONS
    if tid is not None:
        own = admin_state(request.app).router.tenants.get(str(tid))
        if own is not None:
            patterns, keywords, options = [*patterns, *own.patterns], [*keywords, *own.keywords], own.options
    classifier = classifier_for(admin_state(request.app))
    try:
        result = await asyncio.wait_for(asyncio.to_thread(classify, text, patterns, keywords, options),
                                        classifier.timeout_s)
    except TimeoutError:
        classifier.fail_closed.labels("timeout").inc()
        return {"object": "classification", "sensitive": True, "timed_out": True, "kinds": [], "findings": []}
    except re.error as exc:
        raise WireError(400, f"Tenant pattern refused: {exc}", "invalid_pattern", "patterns") from None
    return {"object": "classification", "sensitive": result.sensitive, "timed_out": False,
            "kinds": list(result.kinds),
            "findings": [{"kind": f.kind, "start": f.start, "end": f.end} for f in result.findings]}


def routes() -> list[Route]:
    return [Route("/admin/classify", post_classify, methods=["POST"])]
