"""What an evaluation's error becomes in the scaler's Degraded condition."""

from __future__ import annotations

from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import BackendRejected
from presage_scaler.backends.timesfm import ForecasterUnreachable
from presage_scaler.clients.prometheus import PrometheusError
from presage_scaler.controller.reconcile import _failure_of


def test_a_backends_own_error_names_the_forecast_backend_and_keeps_its_reason():
    failure = _failure_of(ForecasterUnreachable("cannot reach presage-forecaster at http://f:8000"), "tfm")
    assert failure.reason == Reason.BACKEND_UNREACHABLE
    assert failure.message == "ForecastBackend 'tfm': cannot reach presage-forecaster at http://f:8000"
    rejected = _failure_of(BackendRejected("history holds NaN"), "default")
    assert rejected.reason == Reason.BACKEND_REJECTED
    assert rejected.message == "ForecastBackend 'default': history holds NaN"


def test_other_errors_are_reported_as_they_are():
    failure = _failure_of(PrometheusError("query returned 3 series"), "tfm")
    assert (failure.reason, failure.message) == (Reason.PROMETHEUS_ERROR, "query returned 3 series")
    timeout = _failure_of(TimeoutError(), "tfm")
    assert timeout.reason == Reason.EVALUATION_TIMEOUT
    # Before the spec named a backend (it did not parse), there is none to name.
    assert _failure_of(BackendRejected("x"), None).message == "x"
