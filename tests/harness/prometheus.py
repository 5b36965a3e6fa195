"""A real Prometheus server, backfilled with test-provided series, for integration tests.

The data is written as OpenMetrics text, turned into TSDB blocks with
``promtool tsdb create-blocks-from openmetrics`` and loaded by a fresh ``prometheus`` process on
a free loopback port. Backfilled blocks are only read when Prometheus starts, so new data means
a restart (:meth:`PrometheusServer.start` rebuilds the data directory when the series changed).
Retention is 100 years so that old fixed timestamps are never dropped. It can also scrape live
targets (:meth:`PrometheusServer.add_scrape_target`), such as the scaler's own ``/metrics``, and serve
behind basic authentication, TLS and client certificates (:class:`WebConfig`, Prometheus's own
``--web.config.file``).

The binaries come from ``PATH`` or, failing that, from Debian's ``prometheus`` package
(:func:`ensure_prometheus`, through :mod:`tests.harness.debian`).
"""

from __future__ import annotations

import base64
import json
import math
import shutil
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import bcrypt
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.harness.certs import Pem, issue
from tests.harness.debian import PackageUnavailable, ensure_binaries
from tests.harness.process import LoopbackServer, free_port, run_checked


class PrometheusUnavailable(RuntimeError):
    """Prometheus could not be installed, backfilled or started."""


def ensure_prometheus() -> tuple[str, str]:
    """Paths of ``prometheus`` and ``promtool``: from PATH, else installed with apt (as root)."""
    try:
        prometheus, promtool = ensure_binaries("prometheus", ("prometheus", "promtool"))
    except PackageUnavailable as exc:
        raise PrometheusUnavailable(str(exc)) from None
    return prometheus, promtool


# --- the server ----------------------------------------------------------------------------


@dataclass
class Series:
    """One series to backfill: samples are ``(time, value)``, time an aware datetime or Unix seconds.

    Values may be NaN or +-Inf. A gap is made by leaving samples out.
    """

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    samples: list[tuple[datetime | float, float]] = field(default_factory=list)


@dataclass(frozen=True)
class WebConfig:
    """Prometheus's web configuration (the exporter toolkit's ``--web.config.file``): users that must
    authenticate with basic auth (name to password; written as bcrypt hashes, as Prometheus wants them),
    TLS with ``server``'s certificate (issued for 127.0.0.1), and client certificates signed by
    ``client_ca``, required and verified."""

    users: Mapping[str, str] = field(default_factory=dict)
    server: Pem | None = None
    client_ca: Pem | None = None

    def write(self, folder: Path) -> Path:
        """The configuration file, its certificates beside it."""
        config: dict[str, object] = {}
        if self.users:
            # Cost 4, bcrypt's least: Prometheus checks the hash on each request.
            config["basic_auth_users"] = {
                user: bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()
                for user, password in self.users.items()
            }
        if self.server is not None:
            self.server.write(folder / "web-server.crt", folder / "web-server.key")
            tls: dict[str, str] = {
                "cert_file": str(folder / "web-server.crt"),
                "key_file": str(folder / "web-server.key"),
            }
            if self.client_ca is not None:
                (folder / "web-client-ca.crt").write_bytes(self.client_ca.cert)
                tls["client_ca_file"] = str(folder / "web-client-ca.crt")
                tls["client_auth_type"] = "RequireAndVerifyClientCert"
            config["tls_server_config"] = tls
        path = folder / "web.yml"
        path.write_text(json.dumps(config))  # JSON is YAML
        return path

    def readiness(self, folder: Path) -> tuple[ssl.SSLContext | bool, dict[str, str]]:
        """What the harness's own readiness check sends: a client certificate of its own when one is
        required (the server's is not verified: the check is that it is up), and the first user's
        credentials."""
        verify: ssl.SSLContext | bool = False
        if self.client_ca is not None:
            mine = issue("presage-harness", self.client_ca, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
            mine.write(folder / "harness.crt", folder / "harness.key")
            verify = ssl.create_default_context()
            verify.check_hostname = False
            verify.verify_mode = ssl.CERT_NONE
            verify.load_cert_chain(folder / "harness.crt", folder / "harness.key")
        headers = {}
        for user, password in list(self.users.items())[:1]:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        return verify, headers


class PrometheusServer(LoopbackServer):
    """A Prometheus process serving backfilled series on ``127.0.0.1:<port>``.

    Add series, then :meth:`start`. :meth:`stop` and :meth:`start` again keep the port (so
    ``url`` stays valid) and the data, unless series were added or :meth:`clear` was called, in
    which case the data directory is rebuilt. With ``web``, it serves behind that
    :class:`WebConfig` (``url`` is ``https://`` with a server certificate). Usable as a context manager.
    """

    name = "prometheus"
    error = PrometheusUnavailable

    def __init__(self, workdir: Path | None = None, *, port: int | None = None, web: WebConfig | None = None) -> None:
        self.prometheus, self.promtool = ensure_prometheus()
        super().__init__(workdir, port=port)
        self.web = web
        self._port_chosen = port is None
        self._series: list[Series] = []
        self._dirty = True
        self._generation = 0
        self._scrape_targets: list[tuple[str, str, str]] = []

    def add_series(self, name: str, labels: dict[str, str], samples: Iterable[tuple[datetime | float, float]]) -> None:
        """Queue a series for the next :meth:`start` (takes effect only after a restart)."""
        self._series.append(Series(name, dict(labels), list(samples)))
        self._dirty = True

    def add_scrape_target(self, job: str, address: str, interval: str = "1s") -> None:
        """Scrape ``http://<address>/metrics`` every ``interval`` (takes effect at the next start)."""
        self._scrape_targets.append((job, address, interval))

    def clear(self) -> None:
        """Forget all series; the next :meth:`start` serves an empty TSDB."""
        self._series.clear()
        self._dirty = True

    def start(self, timeout: float = 60.0) -> None:
        """Backfill (when the series changed), start Prometheus and wait until it is ready.

        On the first start only, a port we picked that someone else took in the meantime is
        replaced by another free port; later starts keep the port so that ``url`` stays valid.
        """
        self.stop()  # before the data directory changes under it
        began = time.monotonic()
        if self._dirty:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._generation += 1
            self._backfill(self._data_dir)
            self._dirty = False
        for attempt in range(3):
            try:
                self._launch(began + timeout)
                break
            except PrometheusUnavailable:
                retry = self._port_chosen and self.startup_seconds is None and attempt < 2
                if not retry or "address already in use" not in self.log_tail():
                    raise
                self.port = free_port()
        self.startup_seconds = time.monotonic() - began

    def _launch(self, deadline: float) -> None:
        config = self.workdir / "prometheus.yml"
        config.write_text(json.dumps(self._config()))  # JSON is YAML
        command = [
            self.prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={self._data_dir}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        if self.web is not None:
            command.append(f"--web.config.file={self.web.write(self.workdir)}")
        self.launch(command, ["/-/ready"], deadline)

    @property
    def url(self) -> str:
        scheme = "https" if self.web is not None and self.web.server is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def wait(self, path: str, deadline: float) -> None:
        if self.web is None or self._process is None:
            super().wait(path, deadline)
            return
        verify, headers = self.web.readiness(self.workdir)
        self._process.wait_http(f"{self.url}{path}", deadline, verify=verify, headers=headers)

    def _config(self) -> dict[str, object]:
        scrapes = [
            {
                "job_name": job,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "static_configs": [{"targets": [address]}],
            }
            for job, address, interval in self._scrape_targets
        ]
        return {"global": {"scrape_interval": "1m", "evaluation_interval": "1m"}, "scrape_configs": scrapes}

    @property
    def _data_dir(self) -> Path:
        return self.workdir / f"data-{self._generation}"

    def _backfill(self, data_dir: Path) -> None:
        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
        if not self._series:
            return
        source = self.workdir / f"backfill-{self._generation}.om"
        source.write_text(openmetrics(self._series))
        run_checked(
            # promtool reads the whole file once per output block: its default 2h blocks make a
            # month at 1m take ~30s; 31d blocks (the largest Prometheus makes itself) take <1s.
            [
                self.promtool,
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "--max-block-duration=744h",
                str(source),
                str(data_dir),
            ],
            error=PrometheusUnavailable,
            what=f"promtool backfill of {source}",
            timeout=600,
        )


def openmetrics(series: Iterable[Series]) -> str:
    """OpenMetrics text for ``series``: one gauge family per name, samples sorted by time, ``# EOF``."""
    families: dict[str, list[Series]] = {}
    for one in series:
        families.setdefault(one.name, []).append(one)
    lines: list[str] = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} gauge")
        for one in members:
            selector = name + _labels(one.labels)
            points = sorted((_seconds(at), value) for at, value in one.samples)
            lines.extend(f"{selector} {_value(value)} {at:.3f}" for at, value in points)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    pairs = (f'{key}="{_escape(value)}"' for key, value in sorted(labels.items()))
    return "{" + ",".join(pairs) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _seconds(at: datetime | float) -> float:
    if isinstance(at, datetime):
        if at.tzinfo is None:
            raise ValueError(f"sample times must be timezone-aware, got {at!r}")
        return at.timestamp()
    return float(at)


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))
