"""The connection ``--prometheus`` is read with: headers, basic auth and TLS material from files,
checked as a PredictiveScaler's are (the same header rules, the same TLS loading).

:class:`ConnectionOptions` holds what the command line was given (``presage backtest`` and
``presage tune`` share the flags); :func:`connection_of` checks it and reads the files, naming the
flag at fault.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.prometheus_query import PrometheusHeader
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.clients.prometheus import Connection, TLSSettings
from presage_scaler.clients.prometheus_connection import basic_authorization

PASSWORD_ENVIRONMENT = "PRESAGE_PROMETHEUS_PASSWORD"
"""Where ``--basic-auth``'s password is read from when no ``--basic-auth-password-file`` is given."""


@dataclass(frozen=True)
class ConnectionOptions:
    """The connection flags as given, nothing checked or read yet (each field is the flag of its name)."""

    header: tuple[str, ...] = ()
    basic_auth: str | None = None
    basic_auth_password_file: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    insecure_skip_verify: bool = False

    def given(self) -> list[str]:
        """The flags given, by name (for refusing them where they do not apply)."""
        return ["--" + field.name.replace("_", "-") for field in fields(self) if getattr(self, field.name)]


def connection_of(options: ConnectionOptions) -> Connection:
    """The headers and TLS the flags give; :class:`BacktestError` naming the flag when one is unusable (a TLS
    file that is not PEM is refused when the client is made, naming the file)."""
    headers = [_header(raw) for raw in options.header]
    names = [name.lower() for name, _ in headers]
    if len(set(names)) != len(names):
        raise BacktestError("--header: each header name may be given once (in any case)")
    credentials = "--header Authorization" if "authorization" in names else None
    if options.basic_auth is not None:
        if "authorization" in names:
            raise BacktestError("--header Authorization and --basic-auth both set Authorization; give one")
        if ":" in options.basic_auth or not options.basic_auth:
            raise BacktestError("--basic-auth: give a username without a colon")
        headers.insert(0, ("Authorization", basic_authorization(options.basic_auth, _password(options))))
        credentials = f"--basic-auth {options.basic_auth}"
    elif options.basic_auth_password_file is not None:
        raise BacktestError("--basic-auth-password-file needs --basic-auth USER")
    if (options.cert_file is None) != (options.key_file is None):
        raise BacktestError("--cert-file and --key-file go together: give both for a client certificate")
    tls = TLSSettings(
        ca=_read(options.ca_file, "--ca-file") if options.ca_file else None,
        cert=_read(options.cert_file, "--cert-file") if options.cert_file else None,
        key=_read(options.key_file, "--key-file") if options.key_file else None,
        insecure_skip_verify=options.insecure_skip_verify,
        ca_from=f"--ca-file {options.ca_file}",
        cert_from=f"--cert-file {options.cert_file} and --key-file {options.key_file}",
    )
    return Connection(tuple(headers), tls, credentials)


def _header(raw: str) -> tuple[str, str]:
    name, equals, value = raw.partition("=")
    if not equals:
        raise BacktestError(f"--header {raw!r}: write it NAME=VALUE, e.g. X-Scope-OrgID=team-a")
    try:
        header = parse(PrometheusHeader, {"name": name.strip(), "value": value.strip()}, path=f"--header {raw!r}")
    except SpecError as err:
        raise BacktestError(str(err)) from None
    return header.name, header.value or ""


def _password(options: ConnectionOptions) -> str:
    if options.basic_auth_password_file is not None:
        text = _read(options.basic_auth_password_file, "--basic-auth-password-file")
        try:
            return text.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise BacktestError(
                f"--basic-auth-password-file {options.basic_auth_password_file}: not UTF-8 text"
            ) from None
    password = os.environ.get(PASSWORD_ENVIRONMENT)
    if password is None:
        raise BacktestError(
            f"--basic-auth needs a password: --basic-auth-password-file FILE, or the {PASSWORD_ENVIRONMENT} "
            "environment variable"
        )
    return password


def _read(path: Path, flag: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise BacktestError(f"{flag} {path}: cannot read it ({err.strerror})") from None
