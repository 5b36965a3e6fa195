"""The connection ``--prometheus`` is read with, from the flags
:func:`presage_scaler.backtest.command.add_connection_arguments` declares: headers, basic auth and TLS
material from files, checked as a PredictiveScaler's are (the same header rules, the same TLS loading).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.prometheus_query import PrometheusHeader
from presage_scaler.backtest.command import PASSWORD_ENVIRONMENT
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.clients.prometheus import Connection, TLSSettings
from presage_scaler.clients.prometheus_connection import basic_authorization

_FLAGS = {
    "header": "--header",
    "basic_auth": "--basic-auth",
    "basic_auth_password_file": "--basic-auth-password-file",
    "ca_file": "--ca-file",
    "cert_file": "--cert-file",
    "key_file": "--key-file",
    "insecure_skip_verify": "--insecure-skip-verify",
}


def connection_flags(args: argparse.Namespace) -> list[str]:
    """The connection flags given, by name (for refusing them where they do not apply)."""
    return [flag for dest, flag in _FLAGS.items() if getattr(args, dest, None)]


def connection_from_flags(args: argparse.Namespace) -> Connection:
    """The headers and TLS the flags give; :class:`BacktestError` naming the flag when one is unusable (a TLS
    file that is not PEM is refused when the client is made, naming the file)."""
    headers = [_header(raw) for raw in args.header or ()]
    names = [name.lower() for name, _ in headers]
    if len(set(names)) != len(names):
        raise BacktestError("--header: each header name may be given once (in any case)")
    credentials = "--header Authorization" if "authorization" in names else None
    if args.basic_auth is not None:
        if "authorization" in names:
            raise BacktestError("--header Authorization and --basic-auth both set Authorization; give one")
        if ":" in args.basic_auth or not args.basic_auth:
            raise BacktestError("--basic-auth: give a username without a colon")
        headers.insert(0, ("Authorization", basic_authorization(args.basic_auth, _password(args))))
        credentials = f"--basic-auth {args.basic_auth}"
    elif args.basic_auth_password_file is not None:
        raise BacktestError("--basic-auth-password-file needs --basic-auth USER")
    if (args.cert_file is None) != (args.key_file is None):
        raise BacktestError("--cert-file and --key-file go together: give both for a client certificate")
    tls = TLSSettings(
        ca=_read(args.ca_file, "--ca-file") if args.ca_file else None,
        cert=_read(args.cert_file, "--cert-file") if args.cert_file else None,
        key=_read(args.key_file, "--key-file") if args.key_file else None,
        insecure_skip_verify=args.insecure_skip_verify,
        ca_from=f"--ca-file {args.ca_file}",
        cert_from=f"--cert-file {args.cert_file} and --key-file {args.key_file}",
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


def _password(args: argparse.Namespace) -> str:
    if args.basic_auth_password_file is not None:
        text = _read(args.basic_auth_password_file, "--basic-auth-password-file")
        try:
            return text.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise BacktestError(f"--basic-auth-password-file {args.basic_auth_password_file}: not UTF-8 text") from None
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
