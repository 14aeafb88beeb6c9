"""A private redis-server started and stopped by a test: a free loopback port, and on request a
password, a unix socket, or a TLS port with its own CA (made here with `cryptography`).

    with redis_server(tmp_path, password="pw", tls=True, unix=True) as srv:
        srv.url                      # redis://:pw@127.0.0.1:<port>/0
        srv.tls_url                  # rediss://:pw@localhost:<tls port>/0?ssl_ca_certs=<ca.pem>
        srv.unix_url                 # unix://:pw@<tmp>/redis.sock
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis

from tests.helpers.procs import stop_process


def missing_reason() -> str | None:
    return None if shutil.which("redis-server") else "redis-server is not installed (apt-get install redis-server)"


@dataclass(slots=True)
class RedisServer:
    port: int
    password: str | None
    tls_port: int | None = None
    ca_file: Path | None = None
    unix_path: Path | None = None

    @property
    def auth(self) -> str:
        return f":{self.password}@" if self.password else ""

    @property
    def url(self) -> str:
        return f"redis://{self.auth}127.0.0.1:{self.port}/0"

    @property
    def tls_url(self) -> str:
        return f"rediss://{self.auth}localhost:{self.tls_port}/0?ssl_ca_certs={self.ca_file}"

    @property
    def unix_url(self) -> str:
        return f"unix://{self.auth}{self.unix_path}"

    def admin(self) -> redis.Redis:
        """A plain synchronous client for the test's own setup and checks."""
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def redis_server(workdir: Path, password: str | None = None, tls: bool = False, unix: bool = False,
                 port: int | None = None) -> Iterator[RedisServer]:
    """`port`: listen there (a restart of an earlier server); default a free one."""
    srv = RedisServer(port or _free_port(), password)
    cmd = ["redis-server", "--port", str(srv.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
           "--dir", str(workdir)]
    if password:
        cmd += ["--requirepass", password]
    if unix:
        srv.unix_path = workdir / "redis.sock"
        cmd += ["--unixsocket", str(srv.unix_path)]
    if tls:
        srv.tls_port, srv.ca_file = _free_port(), workdir / "ca.pem"
        cert, key = write_certificates(workdir)
        cmd += ["--tls-port", str(srv.tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(srv.ca_file), "--tls-auth-clients", "no"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(srv, proc)
        yield srv
    finally:
        stop_process(proc, 10)


def _wait_ready(srv: RedisServer, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.time() + 20
    while True:
        try:
            with srv.admin() as r:
                r.ping()
            return
        except redis.ConnectionError:
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("redis-server did not start") from None
            time.sleep(0.05)


def write_certificates(workdir: Path) -> tuple[Path, Path]:
    """A self-signed CA (`ca.pem`) and a server certificate it signed for localhost and
    127.0.0.1 (`server.pem`, `server.key`); returns (certificate, key) paths."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fairgate test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    (workdir / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (workdir / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (workdir / "server.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return workdir / "server.pem", workdir / "server.key"
