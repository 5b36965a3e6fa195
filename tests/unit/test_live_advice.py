"""Deciding with the advised spec beside the current one: the advised spec is the stored spec with the
patch merged in, it decides exactly as an evaluation of that spec would from the same data, with a
second forecast only where the patch changes what the forecast depends on; what is written, and told,
follows the advice the status holds."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from presage_scaler.api.advice_patch import advised_wire, patch_digest
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec
from presage_scaler.api.predictive_scaler_status import AdviceStatus
from presage_scaler.api.reasons import Reason
from presage_scaler.backends.base import Forecast, ForecastRequest
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.controller import live_advice
from presage_scaler.controller.live_advice import (
    AdvisedSpecs,
    LiveAdvice,
    advised_spec,
    live_fields,
    observe_advice,
    record_live_event,
)
from presage_scaler.engine.advice_live import AdviceLedger
from presage_scaler.engine.evaluator import Recommendation, evaluate
from presage_scaler.engine.policy import PolicyState
from tests.unit.test_status_explains import DAY, START, STEP, TraceSource, sine_with_noise

NOW = START + 15 * DAY * STEP
SPEC: dict[str, Any] = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "signal": {"prometheus": {"address": "http://p:9090", "query": "rate(requests[5m])"}, "history": "336h"},
    "capacity": {"perReplica": 10},
    "policy": {"maxReplicas": 100},
    "interval": "10m",
}


class Counted:
    """The real SeasonalNaive, counting the forecasts asked of it."""

    def __init__(self) -> None:
        self.backend = SeasonalNaive()
        self.calls = 0
        self.identity = self.backend.identity
        self.max_context = self.backend.max_context
        self.max_horizon = self.backend.max_horizon

    async def forecast(self, requests: list[ForecastRequest]) -> list[Forecast]:
        self.calls += 1
        return await self.backend.forecast(requests)


def evaluated(
    spec: dict[str, Any], backend: Any, current: int = 10, state: PolicyState | None = None
) -> Recommendation:
    parsed = parse(PredictiveScalerSpec, spec)
    source = TraceSource(sine_with_noise(16))
    return asyncio.run(evaluate(parsed, backend, source, current, PolicyState(), NOW))


def advice(patch: dict[str, Any], verdict: str = "Advised", **fields: Any) -> AdviceStatus:
    return AdviceStatus.model_validate({"verdict": verdict, "patch": json.dumps(patch), **fields})


def observed(
    spec: dict[str, Any], status: AdviceStatus, backend: Any, target: int = 30
) -> tuple[Recommendation, LiveAdvice | None]:
    """The current spec's evaluation with the target at ``target`` replicas, and the advice observed."""
    current = evaluated(spec, backend, current=target)
    live = asyncio.run(
        observe_advice(
            parse(PredictiveScalerSpec, spec),
            spec,
            status,
            current,
            target,
            backend,
            None,
            "shop/web",
            specs=AdvisedSpecs(),
        )
    )
    return current, live


def test_the_advised_spec_is_the_stored_spec_with_the_patch_merged_in() -> None:
    advised = advised_spec(SPEC, '{"spec":{"policy":{"targetQuantile":"0.8","headroom":null}}}')
    assert advised.policy.target_quantile == 0.8 and advised.policy.max_replicas == 100
    assert advised.scale_target_ref.name == "web"
    for bad in ("not json", '{"metadata":{}}', '{"spec":{"policy":{"targetQuantile":"2"}}}'):
        with pytest.raises(SpecError):
            advised_spec(SPEC, bad)


@pytest.mark.parametrize(
    ("patch", "target", "forecasts"),
    [
        # Nothing the forecast depends on; from a count above demand, which only the advised spec leaves at once.
        ({"policy": {"stabilization": {"scaleDownWindow": "0s"}}}, 30, 0),
        # Another quantile level: the scaler's backend forecasts again, and the advised spec asks for less.
        ({"policy": {"targetQuantile": "0.8"}}, 12, 1),
        # Headroom: sized from the evaluation's own calibrated windows, to a count of its own.
        ({"policy": {"headroom": "40%"}}, 12, 0),
        # Another interval: a longer sizing window, forecast again to cover it.
        ({"interval": "1h"}, 12, 1),
    ],
)
def test_the_advised_spec_decides_as_an_evaluation_of_it_would(
    patch: dict[str, Any], target: int, forecasts: int
) -> None:
    backend = Counted()
    status = advice({"spec": patch})
    current, live = observed(SPEC, status, backend, target)
    assert live is not None and backend.calls == 1 + forecasts
    # Scoring starts from the target's count, with an empty policy state.
    own = evaluated(advised_wire(SPEC, json.dumps({"spec": patch})), SeasonalNaive(), current=target)
    assert live.ledger.replicas == own.replicas != current.replicas  # each spec decides its own way
    assert live.ledger.state == own.state
    [pending] = live.ledger.pending
    assert (pending.advised, pending.current, pending.at) == (own.replicas, current.replicas, NOW)


def test_the_advised_spec_is_parsed_once_while_neither_the_spec_nor_the_patch_changes() -> None:
    specs, spec = AdvisedSpecs(), parse(PredictiveScalerSpec, SPEC)
    patch = '{"spec":{"policy":{"headroom":"40%"}}}'
    first = specs.parsed("shop/web", spec, SPEC, patch)
    assert specs.parsed("shop/web", spec, SPEC, patch) is first
    assert first == advised_spec(SPEC, patch) and first.policy.headroom != spec.policy.headroom
    other = '{"spec":{"policy":{"headroom":"30%"}}}'
    assert specs.parsed("shop/web", spec, SPEC, other) == advised_spec(SPEC, other)  # the patch changed
    changed = {**SPEC, "interval": "5m"}  # a new generation: another parsed spec
    assert specs.parsed("shop/web", parse(PredictiveScalerSpec, changed), changed, other).interval == timedelta(
        minutes=5
    )
    bad = '{"spec":{"policy":{"targetQuantile":"2"}}}'
    raised = []
    for _ in range(2):
        with pytest.raises(SpecError, match="targetQuantile") as caught:
            specs.parsed("shop/web", spec, SPEC, bad)
        raised.append(caught.value)
    assert raised[0] is not raised[1]  # a fresh error each time, whose traceback does not grow


def test_an_evaluation_parses_the_advised_spec_only_when_it_is_new_or_was_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parses = []
    monkeypatch.setattr(live_advice, "advised_spec", lambda *args: parses.append(args) or advised_spec(*args))
    spec, specs, backend = parse(PredictiveScalerSpec, SPEC), AdvisedSpecs(), Counted()
    current = evaluated(SPEC, backend)

    def observe(status: AdviceStatus) -> LiveAdvice | None:
        return asyncio.run(observe_advice(spec, SPEC, status, current, 30, backend, None, "shop/web", specs=specs))

    scored = advice({"spec": {"policy": {"headroom": "40%"}}})
    assert observe(scored) is not None and observe(scored) is not None and len(parses) == 1
    assert observe(advice({"spec": {"policy": {"headroom": "40%"}}}, verdict="Keep")) is None  # not scored: dropped
    assert observe(scored) is not None and len(parses) == 2


def test_an_advised_forecaster_forecasts_with_its_own_seasonal_naive() -> None:
    backend = Counted()
    status = advice(
        {"spec": {"forecast": {"backendRef": "seasonal-naive-24h-x7"}}},
        forecastBackend={"name": "seasonal-naive-24h-x7", "season": "24h", "cycles": 7},
    )
    _, live = observed(SPEC, status, backend)
    assert live is not None and backend.calls == 1  # the scaler's backend forecast only its own
    own = evaluated(SPEC, SeasonalNaive(season=timedelta(hours=24), cycles=7), current=30)
    default = evaluated(SPEC, SeasonalNaive(), current=30)
    assert live.ledger.replicas == own.replicas
    assert own.windows != default.windows  # the advised forecaster does forecast otherwise


def test_what_is_not_scored() -> None:
    patch = {"spec": {"policy": {"targetQuantile": "0.8"}}}
    for spec, status in (
        ({**SPEC, "advice": {"enabled": False}}, advice(patch)),
        ({**SPEC, "mode": "Enforce"}, advice(patch)),
        (SPEC, AdviceStatus.model_validate({"verdict": "Keep"})),
        (SPEC, advice(patch, verdict="HeldOutFailed")),
        (SPEC, advice(patch, verdict="Proven")),  # a verdict its record does not hold
        (SPEC, advice({"spec": {"policy": {"targetQuantile": "7"}}})),  # a patch that makes no valid spec
        (SPEC, AdviceStatus(verdict="Advised", patch='{"spec":' + '{"a":' * 5000 + "1" + "}" * 5001)),  # too deep
    ):
        assert observed(spec, status, Counted())[1] is None, (spec, status)
    assert observed({**SPEC, "mode": "Enforce", "advice": {}}, advice(patch), Counted())[1] is not None


def test_a_judged_record_is_kept_and_its_verdict_put_back_where_the_advice_lost_it() -> None:
    text = json.dumps({"spec": {"policy": {"targetQuantile": "0.8"}}})
    ledger = AdviceLedger.start(patch_digest(text), NOW - timedelta(days=8), 3)
    ledger.samples, ledger.verdict, ledger.proven_time = 900, "Proven", NOW - timedelta(days=1)
    record = ledger.status_patch()
    backend = Counted()
    status = AdviceStatus.model_validate({"verdict": "Advised", "patch": text, "live": record})
    _, live = observed(SPEC, status, backend)
    assert live is not None and live.transition is None and backend.calls == 1  # nothing decided for it
    assert live_fields(status, live) == {"advice": {"live": record, "verdict": "Proven"}}
    proven = AdviceStatus.model_validate({"verdict": "Proven", "patch": text, "live": record})
    assert live_fields(proven, live) == {"advice": {"live": record}}
    # A status whose advice has another patch now (presage advise replaced it): nothing is written.
    assert live_fields(advice({"spec": {}}), live) == {}
    assert live_fields(AdviceStatus(), live) == {} and live_fields(None, live) == {}


class Told:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    async def record(self, involved: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        self.events.append((event_type, reason, message))


def test_the_verdict_is_told_once_the_status_written_holds_it() -> None:
    ledger = AdviceLedger.start("0123456789abcdef", NOW - timedelta(days=7), 3)
    ledger.samples, ledger.misses = 2016, 4
    ledger.replica_seconds, ledger.current_replica_seconds = 900, 1000
    ledger.judge(NOW, prove_for=timedelta(days=7), interval=timedelta(minutes=5), level=0.01)
    live = LiveAdvice(ledger, "Proven", "1%", NOW)
    record = ledger.status_patch()
    written = {"metadata": {"uid": "u"}, "status": {"advice": {"live": record}}}
    told = Told()
    asyncio.run(record_live_event(told, written, live))  # type: ignore[arg-type]
    assert told.events == [
        (
            "Normal",
            Reason.ADVICE_PROVEN,
            "the advised spec met serviceLevel 1% on live demand: under-provisioned 0.20 % of 2016 scored moments "
            "over 7.0 days (the current spec: 0.00 %), using 10.0% fewer replica-hours than the current spec; "
            "status.advice.patch applies it",
        )
    ]
    for other in (
        {"metadata": {"uid": "u"}, "status": {"advice": {"live": {**ledger.status_patch(), "patchDigest": "x"}}}},
        {"metadata": {"uid": "u"}, "status": {}},
    ):
        asyncio.run(record_live_event(told, other, live))  # type: ignore[arg-type]
    asyncio.run(record_live_event(told, written, replace(live, transition=None)))  # type: ignore[arg-type]
    assert len(told.events) == 1
    failed = replace(live, transition="FailedLive")
    record["verdict"] = "FailedLive"
    asyncio.run(record_live_event(told, written, failed))  # type: ignore[arg-type]
    assert told.events[-1][:2] == ("Warning", Reason.ADVICE_FAILED_LIVE)
    assert "missed serviceLevel 1%" in told.events[-1][2] and "not advise it again" in told.events[-1][2]
