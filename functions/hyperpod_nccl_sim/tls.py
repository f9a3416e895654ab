"""Throwaway certificate authorities for the emulated EKS API server.

An EKS API server speaks https with a certificate signed by the cluster's own CA, which
eks:DescribeCluster returns as `certificateAuthority.data`. The emulation does the same: one CA
and one server certificate for 127.0.0.1 are generated per process (a test session), kept in
memory (the key touches disk only in a private temporary directory while ssl loads it), and a
second, unrelated CA stands in for a wrong or stale `certificateAuthority.data` (or a
TLS-intercepting proxy).
"""

from __future__ import annotations

import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Valid from a day ago (clock skew between the test and the certificate) for a week.
_VALIDITY = timedelta(days=7)
_LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServerTls:
    """A CA's PEM (what eks:DescribeCluster returns, base64-encoded) and the server side of TLS
    with the certificate it signed."""

    ca_pem: bytes
    server_context: ssl.SSLContext


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA (EKS names its cluster CA `kubernetes`)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


@cache
def cluster_tls() -> ServerTls:
    """The cluster CA and the API server's certificate for 127.0.0.1 (one per process)."""
    ca_key, ca = _ca("kubernetes")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(_LOOPBACK)), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # ssl loads a chain from files only; they live just long enough to be read.
    with tempfile.TemporaryDirectory(prefix="emulated-kube-tls-") as folder:
        cert_file, key_file = Path(folder) / "apiserver.crt", Path(folder) / "apiserver.key"
        cert_file.write_bytes(_pem(certificate))
        key_file.touch(mode=0o600)
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context.load_cert_chain(cert_file, key_file)
    return ServerTls(ca_pem=_pem(ca), server_context=context)


@cache
def unrelated_ca_pem() -> bytes:
    """A CA that signed nothing the emulation serves: a wrong or stale cluster CA."""
    return _pem(_ca("kubernetes")[1])
