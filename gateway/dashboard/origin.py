"""Cross-site form posts refused: the login forms are a target of login CSRF (another site posts
its own key, and the victim works in the attacker's tenant), logout of a nuisance one.

The browser says where a request comes from: `Sec-Fetch-Site` (every current browser) decides
when sent, `same-origin` or `none` (typed, a bookmark) pass; without it, `Origin` must name this
host. A request with neither is not a browser's cross-site post (curl, scripts, old browsers on
their own forms) and passes. The same rule as Go's net/http CrossOriginProtection (Go 1.25),
which needs no token in the form; the session cookie's SameSite=Strict already keeps other
sites' requests from riding a session.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers

SAME = ("same-origin", "none")


def cross_site(headers: Headers) -> bool:
    """Whether a state-changing request came from another site's page."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site.strip().lower() not in SAME
    origin = headers.get("origin")
    if origin is None:
        return False
    host = headers.get("host", "")
    try:
        return origin == "null" or urlsplit(origin).netloc.lower() != host.lower() or not host
    except ValueError:  # not a URL at all
        return True
