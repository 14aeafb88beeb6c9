"""Per-backend TLS for the upstream client (backends/http1.py): which CAs to trust, whether to
verify at all, and a client certificate for upstreams that ask for one (mTLS).

`TLSSettings` is a plain value (it keys the pool's idle connections and its cached contexts);
`TLSSettings.context()` builds the `ssl.SSLContext`, and `tls_failure` turns a handshake error
into a message that says which setting to change. Like httpx: `ca_bundle` replaces the default
trust store (it does not add to it), and `verify=False` checks neither the chain nor the name.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class TLSSettings:
    verify: bool = True  # False: any certificate is accepted (a lab box, never the internet)
    ca_bundle: str | None = None  # a PEM file of the CAs to trust instead of the system's
    client_cert: str | None = None  # a PEM certificate (and key, unless client_key names one)
    client_key: str | None = None

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_TLS

    def context(self) -> ssl.SSLContext:
        """The client context; ValueError naming the setting whose file cannot be loaded (the
        message carries the error's kind, never the file's contents)."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca_bundle if self.verify else None)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot load the backend's ca_bundle ({_why(exc)})") from None
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert:
            try:
                ctx.load_cert_chain(self.client_cert, self.client_key)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"cannot load the backend's client_cert/client_key ({_why(exc)})") from None
        return ctx


DEFAULT_TLS = TLSSettings()


def _why(exc: BaseException) -> str:
    detail = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def tls_failure(exc: ssl.SSLError, host: str) -> str:
    """What a failed handshake means for the operator, naming the backend setting to change."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"TLS: the certificate of {host} is not trusted ({exc.verify_message}); set the backend's "
                "ca_bundle to the CA that signed it, or tls_verify to false")
    reason = exc.reason or type(exc).__name__
    if "CERTIFICATE_REQUIRED" in reason.upper() or "HANDSHAKE_FAILURE" in reason.upper():
        return f"TLS: {host} refused the handshake ({reason}); it may require a client certificate (client_cert)"
    return f"TLS: handshake with {host} failed ({reason})"
