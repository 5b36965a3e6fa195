"""The server's Prometheus metrics, in a registry of its own (one per app)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Metrics:
    """Request counts and latency, batch sizes, queue wait, forward-pass time, model state."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "presage_forecaster_requests_total", "HTTP requests by path and status code.", ["path", "code"], registry=r
        )
        self.request_seconds = Histogram(
            "presage_forecaster_request_duration_seconds",
            "Time to answer an HTTP request, by path.",
            ["path"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.series = Counter("presage_forecaster_series_total", "Series forecast.", registry=r)
        self.truncated = Counter(
            "presage_forecaster_series_truncated_total", "Series cut to the most recent maxContext points.", registry=r
        )
        self.batch_size = Histogram(
            "presage_forecaster_batch_size", "Series per forward pass.", buckets=_BATCH_BUCKETS, registry=r
        )
        self.queue_wait = Histogram(
            "presage_forecaster_queue_wait_seconds",
            "Time a series waited in the batching queue before its forward pass began.",
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.forward_seconds = Histogram(
            "presage_forecaster_forward_seconds", "Time of one forward pass.", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.ready = Gauge("presage_forecaster_ready", "1 once the model is loaded and serving.", registry=r)
        self.model_info = Gauge(
            "presage_forecaster_model_info", "The loaded model (value 1).", ["model", "revision"], registry=r
        )
        self.load_seconds = Gauge("presage_forecaster_model_load_seconds", "Time the model took to load.", registry=r)

    def render(self) -> bytes:
        """The text exposition format."""
        return generate_latest(self.registry)
