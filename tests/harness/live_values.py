"""Numbers a test changes while real servers read them over HTTP, on a loopback port.

``/metrics`` serves them as Prometheus gauges (for a Prometheus that scrapes the test) and
``/json`` as one JSON object (for KEDA's ``metrics-api`` trigger, whose ``valueLocation`` names the
key). Setting a value takes effect at the next request. Usable as a context manager.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self


class LiveValues:
    """Gauges by name, served on ``127.0.0.1:<port>`` until :meth:`stop`."""

    def __init__(self, **values: float) -> None:
        self._values = dict(values)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = server.render(self.path)
                self.send_response(200 if body is not None else 404)
                kind = "text/plain; version=0.0.4" if self.path == "/metrics" else "application/json"
                self.send_header("Content-Type", kind)
                self.end_headers()
                self.wfile.write((body or "").encode())

            def log_message(self, format: str, *args: object) -> None:
                pass  # one line per scrape would drown the test output

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="live-values", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set(self, **values: float) -> None:
        with self._lock:
            self._values.update(values)

    def render(self, path: str) -> str | None:
        """The body for ``path``: the exposition, the JSON object, or None (not found)."""
        with self._lock:
            values = dict(self._values)
        if path == "/metrics":
            return "".join(f"# TYPE {name} gauge\n{name} {value!r}\n" for name, value in values.items())
        if path == "/json":
            return json.dumps(values)
        return None

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
