"""A throwaway CA with a server certificate for 127.0.0.1/localhost and a client certificate,
written as PEM files (made with `cryptography`, nothing read from disk or the network).

    pki = make_pki(tmp_path)
    pki.ca, pki.server_cert, pki.server_key, pki.client_cert, pki.client_key   # file paths
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(slots=True)
class PKI:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> str:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return str(path)


def _write_cert(cert: x509.Certificate, path: Path) -> str:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


def _issue(ca_key: ec.EllipticCurvePrivateKey, ca_name: x509.Name, cn: str, usage: x509.ObjectIdentifier,
           sans: list[x509.GeneralName]) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca_name).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_pki(folder: Path) -> PKI:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("fairgate test CA")
    now = dt.datetime.now(dt.UTC)
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    server, server_key = _issue(ca_key, ca_name, "127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH,
                                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    client, client_key = _issue(ca_key, ca_name, "fairgate gateway", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return PKI(ca=_write_cert(ca, folder / "ca.pem"), server_cert=_write_cert(server, folder / "server.pem"),
               server_key=_write_key(server_key, folder / "server.key"),
               client_cert=_write_cert(client, folder / "client.pem"),
               client_key=_write_key(client_key, folder / "client.key"))
