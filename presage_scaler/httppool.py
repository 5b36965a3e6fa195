"""Connection-pool limits shared by presage's HTTP clients (Kubernetes API, Prometheus).

Few, long-lived connections: httpcore scans every pooled connection on each request, and a
keep-alive limit below the connection limit closes and reopens connections (TLS handshakes
included) under load. Measured in benchmarks/bench_controller.py: 64/32 cost about twice the
CPU per evaluation of 12/12, with no gain in throughput.
"""

from __future__ import annotations

import httpx

POOL_LIMITS = httpx.Limits(max_connections=12, max_keepalive_connections=12)
