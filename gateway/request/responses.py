"""POST /v1/responses: the Responses API on the gateway's chat path.

The body is read as a chat body (backends/openai_wire/responses_request.py) before anything else
looks at it, so the key, quotas, KVKK classification of `instructions` and `input`, routing
(sensitive input only to local backends), the reservation and the usage row (route
`/v1/responses`, keyed by the `resp_…` id the client gets) are exactly the chat path's; the answer goes back as a `response` object or
Responses events (responses_output.py), whichever backend served it.
"""

from __future__ import annotations

from typing import Any

from fairgate.backends.openai_wire import WireError
from fairgate.backends.openai_wire.responses_output import ResponsesOutput
from fairgate.backends.openai_wire.responses_request import as_responses_error, responses_to_chat
from fairgate.backends.types import Receive, Scope
from fairgate.gateway.request.admission import Admitted, admit
from fairgate.gateway.request.completions import CompletionsEndpoint
from fairgate.gateway.request.state import RequestState

ROUTE = "/v1/responses"
ID_PREFIX = "resp_"  # the answer's `id` is the usage row's, the audit row's and x-request-id's


class ResponsesEndpoint(CompletionsEndpoint):
    def __init__(self) -> None:
        super().__init__("chat")

    async def admit(self, state: RequestState, scope: Scope, receive: Receive) -> Admitted:
        asked: dict[str, Any] = {}

        def to_chat(body: dict[str, Any]) -> dict[str, Any]:
            asked.update(body)  # the Response object echoes what was asked
            return responses_to_chat(body)

        try:
            adm = await admit(state, "chat", scope, receive, to_chat, ID_PREFIX)
        except WireError as err:
            raise as_responses_error(err) from None
        adm.route, adm.output = ROUTE, ResponsesOutput(asked, adm.gen.request_id)
        return adm
