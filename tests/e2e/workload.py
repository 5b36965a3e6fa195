"""One workload under presage for an end-to-end test: its namespace, Deployment, demand and scaler.

The demand is a Prometheus gauge the test sets (:class:`~tests.harness.live_values.LiveValues`,
scraped every second) on top of three hours of backfilled history at the same level, so the
forecast has its history from the start. At the default level (5 units, 10 per replica) the demand
needs one replica, so ``policy.minReplicas`` decides the recommendation exactly; raising the gauge
moves it through the forecast and the reactive floor instead.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from tests.harness.autoscaling import Autoscaling
from tests.harness.live_values import LiveValues
from tests.harness.presage_cluster import REPO, apply, condition, deployment, eventually, get, predictive_scaler
from tests.harness.prometheus import PrometheusServer, Series

NAME = "web"
PER_REPLICA = 10.0
QUIET_DEMAND = 5.0  # half a replica's worth: the policy's minReplicas decides
INTERVAL_SECONDS = 5
SCALE_DOWN_WINDOW_SECONDS = 10
MAX_REPLICAS = 30


def flat_history(value: float, hours: float = 3.0) -> list[tuple[datetime, float]]:
    """One sample a minute up to now, all ``value``."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    return [(now - timedelta(minutes=m), value) for m in range(int(hours * 60), -1, -1)]


@dataclass
class Workload:
    """Deployment ``web`` and PredictiveScaler ``web`` in ``namespace``, with the demand ``demand``."""

    stack: Autoscaling
    namespace: str
    backend: str
    demand: LiveValues
    prometheus: PrometheusServer

    # -- the cluster's objects

    def deploy(self, replicas: int) -> None:
        apply(self.stack.plane, deployment(NAME, replicas), self.namespace)

    def scaler(self, *, mode: str, min_replicas: int) -> None:
        """Create or update PredictiveScaler ``web``: minReplicas, mode, and a policy that applies any step."""
        policy = {
            "minReplicas": min_replicas,
            "maxReplicas": MAX_REPLICAS,
            # Deterministic steps: no uncertainty guard, any size of step, a short scale-down window.
            "scaleDownUncertaintyGuard": {"enabled": False},
            "stabilization": {
                "scaleDownWindow": f"{SCALE_DOWN_WINDOW_SECONDS}s",
                "maxScaleUpRate": MAX_REPLICAS,
                "maxScaleDownRate": "100%",
            },
        }
        body = predictive_scaler(
            NAME,
            NAME,
            self.prometheus.url,
            "max(demand)",
            self.backend,
            mode=mode,
            interval=f"{INTERVAL_SECONDS}s",
            leadTime={"static": "1m"},
            capacity={"perReplica": PER_REPLICA},
            policy=policy,
        )
        apply(self.stack.plane, body, self.namespace)

    def scaled_object(self, *flags: str) -> dict[str, Any]:
        """What `presage scaledobject web` prints for this namespace, pointed at the test's presage."""
        argv = [
            sys.executable,
            "-m",
            "presage_scaler.cli.main",
            "scaledobject",
            NAME,
            f"--namespace={self.namespace}",
            f"--kubeconfig={self.stack.plane.kubeconfig}",
            f"--scaler-address={self.stack.presage.grpc_address}",
            *flags,
        ]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
        assert result.returncode == 0, result.stderr
        [scaled_object] = yaml.safe_load_all(result.stdout)
        return scaled_object

    def apply_scaled_object(self, scaled_object: dict[str, Any]) -> None:
        self.stack.plane.kubectl("apply", "--validate=strict", "-f", "-", input=json.dumps(scaled_object))

    # -- what the cluster says

    def replicas(self) -> int:
        return int(get(self.stack.plane, "deployment", NAME, self.namespace)["spec"]["replicas"])

    def status(self) -> dict[str, Any]:
        return get(self.stack.plane, "predictivescaler", NAME, self.namespace).get("status") or {}

    def recommended(self) -> int | None:
        return self.status().get("recommendedReplicas")

    def scaled_object_status(self, name: str = NAME) -> dict[str, Any]:
        return get(self.stack.plane, "scaledobject", name, self.namespace).get("status") or {}

    def hpa_condition(self, kind: str, scaled_object: str = NAME) -> dict[str, Any] | None:
        """Condition ``kind`` (AbleToScale, ScalingActive, ScalingLimited) of the HPA KEDA made."""
        return condition(get(self.stack.plane, "hpa", f"keda-hpa-{scaled_object}", self.namespace), kind)

    def hpa_read(self, scaled_object: str = NAME) -> list[int]:
        """The external metric values the HPA that KEDA made for ``scaled_object`` read last, one per trigger.

        The HPA reports an AverageValue metric per pod (value / status.replicas, rounded up to a
        thousandth); this multiplies it back and rounds to the count it was.
        """
        status = get(self.stack.plane, "hpa", f"keda-hpa-{scaled_object}", self.namespace).get("status") or {}
        pods = status.get("currentReplicas") or 0
        return [
            round(_quantity(m["external"]["current"]["averageValue"]) * pods)
            for m in status.get("currentMetrics") or []
            if m.get("type") == "External" and "averageValue" in (m["external"].get("current") or {})
        ]

    # -- waiting

    async def settles_at(self, replicas: int, timeout: float = 90.0) -> None:
        """presage recommends ``replicas`` and the Deployment runs exactly that many."""
        await eventually(
            lambda: (self.recommended(), self.replicas()),
            lambda pair: pair == (replicas, replicas),
            timeout=timeout,
            what=f"(recommended, replicas) == ({replicas}, {replicas}) in {self.namespace}",
        )

    async def holds(self, probe: Callable[[], Any], check: Callable[[Any], bool], seconds: float, what: str) -> None:
        """``check`` holds on every probe for ``seconds`` (a probe about every half second)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = await asyncio.to_thread(probe)
            assert check(value), f"{what} stopped holding: {value!r}"
            await asyncio.sleep(0.5)


def failures_and_fallback(status: dict[str, Any]) -> tuple[int, bool]:
    """From a ScaledObject's status: its metric's failure count, and whether its Fallback condition is True."""
    counts = [h.get("numberOfFailures") or 0 for h in (status.get("health") or {}).values()]
    fallback = [c["status"] for c in status.get("conditions") or [] if c["type"] == "Fallback"]
    return max(counts, default=0), fallback == ["True"]


async def watch_until_fallback(web: Workload, timeout: float) -> list[tuple[int, bool, int]]:
    """(failures, fallback, replicas) for every version of the ScaledObject stored, until the fallback is on.

    A watch, not a poll: KEDA's operator loop and its metrics adapter both count failures, so two
    can land within one poll of each other, and a poll would miss the count between them.
    """
    argv = web.stack.plane.kubectl_argv("get", "scaledobject", NAME, "-n", web.namespace, "-o", "json", "--watch")
    watch = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    assert watch.stdout is not None
    seen: list[tuple[int, bool, int]] = []
    try:
        async with asyncio.timeout(timeout):
            async for status in _watched_statuses(watch.stdout):
                failures, fallback = failures_and_fallback(status)
                seen.append((failures, fallback, await asyncio.to_thread(web.replicas)))
                if fallback:
                    return seen
        raise AssertionError(f"the watch ended before the fallback; seen (failures, fallback, replicas): {seen}")
    except TimeoutError:
        last = seen[-20:]
        raise AssertionError(f"no fallback within {timeout:.0f}s; seen (failures, fallback, replicas) {last}") from None
    finally:
        watch.kill()
        await watch.wait()


async def _watched_statuses(stream: asyncio.StreamReader) -> AsyncIterator[dict[str, Any]]:
    """The ``status`` of each object `kubectl get -o json --watch` prints (one JSON document after another)."""
    decoder = json.JSONDecoder()
    buffered = ""
    while chunk := await stream.read(65536):
        buffered += chunk.decode()
        while buffered.strip():
            try:
                document, end = decoder.raw_decode(buffered.lstrip())
            except json.JSONDecodeError:
                break  # the rest of this document has not arrived yet
            buffered = buffered.lstrip()[end:]
            yield document.get("status") or {}


def _quantity(text: str) -> float:
    """A Kubernetes quantity as the HPA writes metric values: plain, or in thousandths (``1100m``)."""
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def demand_series() -> Series:
    """The backfilled part of the demand (the scraped part carries the same name and labels plus instance)."""
    return Series("demand", {"job": "live"}, flat_history(QUIET_DEMAND))
