"""How a PredictiveScaler reaches Prometheus: the query, its address, and the connection it declares
(headers, bearer token, basic auth and TLS from Secrets in the scaler's namespace).

Class docstrings are the type descriptions that the reference prints; keep them to one paragraph.
"""

from __future__ import annotations

from typing import Any

from presage_scaler.api.schema import APIModel, Rule, field
from presage_scaler.api.validation_rules import URL


def _secret_name() -> Any:
    return field(
        "Name of the Secret, in the PredictiveScaler's namespace. presage reads only a Secret it was granted "
        "(a Role with resourceNames for it).",
        minLength=1,
        maxLength=253,
    )


def _secret_key(description: str, **default: Any) -> Any:
    """A key of a Secret's data; ``default`` as :func:`field`'s, required when not given."""
    return field(description, **default, minLength=1, maxLength=253)


class SecretKeyRef(APIModel):
    """SecretKeyRef selects a key of a Secret in the PredictiveScaler's own namespace."""

    key: str = _secret_key("Key of the Secret's data to read.")
    name: str = _secret_name()


class BasicAuthSecretRef(APIModel):
    """BasicAuthSecretRef names a Secret holding a username and a password for HTTP basic authentication,
    as KEDA's basic authMode reads them."""

    name: str = _secret_name()
    password_key: str = _secret_key(
        "PasswordKey is the key of the Secret's data that holds the password.", default="password"
    )
    username_key: str = _secret_key(
        "UsernameKey is the key of the Secret's data that holds the username.", default="username"
    )


class TLSSecretRef(APIModel):
    """TLSSecretRef names a Secret holding PEM TLS material: a CA bundle that verifies the server, and a
    client certificate and key for mutual TLS. A kubernetes.io/tls Secret keeps them under ca.crt, tls.crt and
    tls.key."""

    ca_key: str | None = _secret_key(
        "CAKey is the key of the Secret's data holding the PEM CA bundle that verifies the server's certificate, "
        'e.g. "ca.crt". Unset, the system\'s trusted CAs verify it.',
        default=None,
    )
    cert_key: str | None = _secret_key(
        'CertKey is the key of the Secret\'s data holding the PEM client certificate, e.g. "tls.crt", presented '
        "to a server that asks for one (mutual TLS). Set with KeyKey.",
        default=None,
    )
    key_key: str | None = _secret_key(
        "KeyKey is the key of the Secret's data holding the client certificate's unencrypted PEM private key, "
        'e.g. "tls.key". Set with CertKey.',
        default=None,
    )
    name: str = _secret_name()

    cel_rules = (
        Rule(
            cel="has(self.certKey) == has(self.keyKey)",
            message="certKey and keyKey go together: set both for a client certificate, or neither",
            check=lambda t: (t.cert_key is None) == (t.key_key is None),
            field_path=".certKey",
        ),
        Rule(
            cel="has(self.caKey) || has(self.certKey)",
            message="tlsSecretRef needs caKey, or certKey and keyKey, or all three",
            check=lambda t: t.ca_key is not None or t.cert_key is not None,
        ),
    )


class HeaderValueSource(APIModel):
    """HeaderValueSource reads a header's value from a Secret."""

    secret_key_ref: SecretKeyRef = field("SecretKeyRef selects the key of a Secret whose value is the header's.")


HEADER_NAME_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
# Control characters other than a tab end a header line or are refused by servers; a Secret's value is
# checked for them when it is read.
HEADER_VALUE_PATTERN = r"^[^\x00-\x08\x0a-\x1f\x7f]*$"
MAX_HEADERS = 16
RESERVED_HEADERS = (
    "accept",
    "accept-encoding",
    "connection",
    "content-encoding",
    "content-length",
    "content-type",
    "expect",
    "host",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
)
"""Header names presage sets itself or that would break the request, in lower case."""


class PrometheusHeader(APIModel):
    """PrometheusHeader is a request header sent with every query, such as the tenant header X-Scope-OrgID
    that multi-tenant Mimir, Cortex and Thanos read. Exactly one of Value or ValueFrom must be set."""

    name: str = field(
        'Name is the header\'s name, e.g. "X-Scope-OrgID". Headers presage sets itself or that carry the '
        "request's framing (Accept, Accept-Encoding, Connection, Content-Type, Content-Length, Host, "
        "Transfer-Encoding, ...) are refused, and Authorization is refused when bearerTokenSecretRef or "
        "basicAuthSecretRef sets it.",
        minLength=1,
        maxLength=128,
        pattern=HEADER_NAME_PATTERN,
    )
    value: str | None = field(
        "Value is the header's value, written in the spec (a tenant name, not a credential).",
        default=None,
        maxLength=4096,
        pattern=HEADER_VALUE_PATTERN,
    )
    value_from: HeaderValueSource | None = field(
        "ValueFrom reads the header's value from a Secret, for a value that is a credential.", default=None
    )

    cel_rules = (
        Rule(
            cel="has(self.value) != has(self.valueFrom)",
            message="exactly one of value or valueFrom must be set",
            check=lambda h: (h.value is None) != (h.value_from is None),
        ),
        Rule(
            cel="!(self.name.lowerAscii() in [" + ", ".join(f"'{n}'" for n in RESERVED_HEADERS) + "])",
            message="name is a header presage sets itself or that carries the request's framing: "
            + ", ".join(RESERVED_HEADERS)
            + " may not be set",
            check=lambda h: h.name.lower() not in RESERVED_HEADERS,
            field_path=".name",
        ),
    )


_BEARER = "BearerTokenSecretRef optionally supplies an Authorization bearer token."


def _sets_authorization(query: PrometheusQuery) -> bool:
    return query.bearer_token_secret_ref is not None or query.basic_auth_secret_ref is not None


class PrometheusQuery(APIModel):
    """PrometheusQuery is a query against a Prometheus-compatible HTTP API."""

    address: str = field(
        'Address is the base URL of the query endpoint, e.g. "http://vmselect.monitoring:8481/select/0/prometheus".',
        **URL,
    )
    basic_auth_secret_ref: BasicAuthSecretRef | None = field(
        "BasicAuthSecretRef optionally supplies an Authorization header for HTTP basic authentication. At most "
        "one of BearerTokenSecretRef and BasicAuthSecretRef may be set.",
        default=None,
    )
    bearer_token_secret_ref: SecretKeyRef | None = field(_BEARER, default=None)
    headers: list[PrometheusHeader] | None = field(
        "Headers are sent with every request, after presage's own. A multi-tenant Mimir, Cortex or Thanos reads "
        'the tenant from X-Scope-OrgID: {name: X-Scope-OrgID, value: "team-a"}. Names must be unique, in any '
        "case.",
        default=None,
        maxItems=MAX_HEADERS,
    )
    insecure_skip_verify: bool | None = field(
        "InsecureSkipVerify disables TLS verification. Not recommended.", default=None
    )
    query: str = field(
        "Query must evaluate to exactly one series. If it returns more than one, the PredictiveScaler "
        "goes Degraded rather than silently picking one.",
        minLength=1,
        maxLength=16384,
    )
    tls_secret_ref: TLSSecretRef | None = field(
        "TLSSecretRef optionally supplies TLS material for an https:// address: the CA bundle that verifies the "
        "server in place of the system's, and a client certificate and key for mutual TLS. With "
        "InsecureSkipVerify the client certificate is still presented and the server is not verified.",
        default=None,
    )

    notes = (
        "Secrets. Every Secret is read from the PredictiveScaler's own namespace, with get on that one Secret "
        "granted to presage (manifests/examples/secret-reader-role.yaml); values are cached for a minute, so a "
        "rotated password, token or certificate is used within one. Surrounding whitespace of a text value (a "
        "trailing newline) is dropped. A Secret presage may not read, a missing key, or a value it cannot use "
        "(text that is not UTF-8 or holds a line break, PEM that does not parse, a key that does not match its "
        "certificate) marks the scaler Degraded with SecretForbidden, SecretNotFound, SecretKeyNotFound or "
        "SecretInvalid, naming the Secret and the key.",
    )
    cel_rules = (
        Rule(
            cel="!(has(self.bearerTokenSecretRef) && has(self.basicAuthSecretRef))",
            message="set at most one of bearerTokenSecretRef and basicAuthSecretRef",
            check=lambda q: q.bearer_token_secret_ref is None or q.basic_auth_secret_ref is None,
            field_path=".basicAuthSecretRef",
        ),
        Rule(
            cel="!has(self.headers) || self.headers.all(h, self.headers.exists_one(g, "
            "g.name.lowerAscii() == h.name.lowerAscii()))",
            message="header names must be unique (in any case)",
            check=lambda q: len({h.name.lower() for h in q.headers or ()}) == len(q.headers or ()),
            field_path=".headers",
        ),
        Rule(
            cel="!has(self.headers) || !(has(self.bearerTokenSecretRef) || has(self.basicAuthSecretRef))"
            " || !self.headers.exists(h, h.name.lowerAscii() == 'authorization')",
            message="headers may not set Authorization when bearerTokenSecretRef or basicAuthSecretRef sets it",
            check=lambda q: (
                not _sets_authorization(q) or all(h.name.lower() != "authorization" for h in q.headers or ())
            ),
            field_path=".headers",
        ),
    )
