"""Test certificates: CAs and the server and client certificates they sign, as PEM.

Keys are EC P-256: generated in microseconds, unlike RSA.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pem:
    """A certificate and its private key, PEM-encoded."""

    cert: bytes
    key: bytes

    def write(self, cert_path: Path, key_path: Path) -> None:
        """Write the certificate and the key (readable by the owner only)."""
        cert_path.write_bytes(self.cert)
        key_path.write_bytes(self.key)
        key_path.chmod(0o600)


def private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """``key`` as unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def issue(
    subject: str | x509.Name,
    issuer: Pem | None = None,
    *,
    ca: bool = False,
    usage: Sequence[x509.ObjectIdentifier] = (),
    hosts: Sequence[str] = (),
) -> Pem:
    """A new key and a certificate for it, signed by ``issuer`` (self-signed when None).

    ``subject`` is a common name or a whole name; ``usage`` the extended key usages; ``hosts`` the
    DNS names and IP addresses the certificate is valid for.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]) if isinstance(subject, str) else subject
    if issuer is None:
        issuer_name, signing_key = name, key
    else:
        issuer_name = x509.load_pem_x509_certificate(issuer.cert).subject
        signing_key = serialization.load_pem_private_key(issuer.key, password=None)  # type: ignore[assignment]
    # Backdate a little so a clock a few seconds behind never sees a "not yet valid" cert.
    now = datetime.now(UTC) - timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=not ca,
                key_cert_sign=ca,
                crl_sign=ca,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
    cert = builder.sign(signing_key, hashes.SHA256())
    return Pem(cert=cert.public_bytes(serialization.Encoding.PEM), key=private_pem(key))


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
