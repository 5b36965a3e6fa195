"""The connection limit shared by presage's aiohttp clients (Kubernetes API, Prometheus).

Few, long-lived connections per endpoint: a controller evaluating hundreds of scalers a second
would otherwise open a connection (and a TLS handshake) per request in flight, loading both sides
for nothing; twelve keep up with bench_controller.py's saturating load.
"""

from __future__ import annotations

MAX_CONNECTIONS = 12
