"""Loading traces (formats, gaps, grid errors), resampling, and building the spec and backend."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from presage_scaler.api.parse import SpecError
from presage_scaler.backends.seasonal_naive import SeasonalNaive
from presage_scaler.backends.timesfm import TimesFMClient
from presage_scaler.backtest.config import (
    Overrides,
    backend_spec,
    load_object,
    make_backend,
    scaler_spec,
)
from presage_scaler.backtest.csv_trace import load_csv
from presage_scaler.backtest.errors import BacktestError
from presage_scaler.backtest.trace import Trace

HOUR = timedelta(hours=1)
EXAMPLE = Path(__file__).parents[2] / "examples" / "nab_elb_request_count_5m.csv"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_unix_seconds_with_a_ts_header(tmp_path):
    trace = load_csv(write(tmp_path, "ts,value\n1633478400,1.5\n1633478460,2.5\n1633478520,3\n"))
    assert trace.values.tolist() == [1.5, 2.5, 3.0]
    assert trace.step == timedelta(minutes=1)
    assert trace.start == datetime(2021, 10, 6, tzinfo=UTC)


def test_iso_timestamps_keep_their_offset(tmp_path):
    text = "timestamp,value\n1995-07-01T00:00:00-04:00,42\n1995-07-01T00:01:00-04:00,62\n"
    trace = load_csv(write(tmp_path, text))
    assert trace.start.utcoffset() == timedelta(hours=-4)
    assert trace.time_at(1) == datetime(1995, 7, 1, 0, 1, tzinfo=timezone(timedelta(hours=-4)))


def test_naive_timestamps_are_utc_and_the_header_is_optional(tmp_path):
    trace = load_csv(write(tmp_path, "2014-04-10 00:04:00,94.0\n2014-04-10 00:09:00,56.0\n"))
    assert trace.start == datetime(2014, 4, 10, 0, 4, tzinfo=UTC)
    assert trace.step == timedelta(minutes=5)


def test_missing_points_and_bad_values_are_filled_and_counted(tmp_path):
    text = "timestamp,value\n0,10\n60,NaN\n180,40\n240,x\n300,50\n"
    trace = load_csv(write(tmp_path, text))
    assert trace.values.tolist() == [10.0, 20.0, 30.0, 40.0, 45.0, 50.0]
    assert trace.gaps.tolist() == [False, True, True, False, True, False]


def test_rows_out_of_order_are_sorted(tmp_path):
    trace = load_csv(write(tmp_path, "timestamp,value\n120,3\n0,1\n60,2\n"))
    assert trace.values.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timestamp,value\n0,1\n60,2\n120,3\n150,4\n240,5\n", "not on the 60s grid"),
        ("timestamp,value\n0,1\n60,2\n60,3\n120,4\n", "more than once"),
        ("timestamp,value\n0,1\n", "at least two points"),
        ("time,count\n0,1\n60,2\n", "'value' column"),
        ("timestamp,value\n0,1\nyesterday,2\n", "cannot read a timestamp"),
        ("timestamp,value\n0,a\n60,b\n", "no numeric values"),
        ("timestamp,value\n1e12,1\n1000000000060,2\n", "trace.csv:2: '1e12' is not a time between the years 1"),
        ("timestamp,value\n", "trace.csv: a header and no rows under it"),
        ("timestamp,value\n\n  \n", "trace.csv: a header and no rows under it"),
        ("timestamp,value\n0,1\n60,2,3\n", "not a CSV file: .*Expected 2 fields in line 3"),
        ("", "no rows"),
    ],
)
def test_unusable_traces_are_refused(tmp_path, text, message):
    with pytest.raises(BacktestError, match=message):
        load_csv(write(tmp_path, text))


@pytest.mark.parametrize(
    ("stamp", "unit", "divisor"),
    [("1767225600000", "milliseconds", 1000), ("1767225600000000", "microseconds", 1000000),
     ("1767225600000000000", "nanoseconds", 1000000000)],
)  # fmt: skip
def test_finer_unix_times_are_named_with_what_to_do(tmp_path, stamp, unit, divisor):
    with pytest.raises(BacktestError) as refused:
        load_csv(write(tmp_path, f"timestamp,value\n{stamp},1\n{int(stamp) + 60 * divisor},2\n"))
    assert str(refused.value) == (
        f"{tmp_path / 'trace.csv'}:2: '{stamp}' is not a time between the years 1 and 9999 in Unix seconds; it "
        f"looks like Unix {unit} (2026-01-01T00:00:00+00:00): divide the timestamps by {divisor}"
    )


def jittered(tmp_path: Path, seconds: list[int]) -> Path:
    start = 1767225600  # 2026-01-01T00:00:00Z
    rows = "".join(f"{start + 300 * i + jitter},{10 + i}\n" for i, jitter in enumerate(seconds))
    return write(tmp_path, "timestamp,value\n" + rows)


def test_a_jittered_trace_is_refused_naming_the_option_that_places_it_on_a_grid(tmp_path):
    with pytest.raises(BacktestError, match=r"is not on the \d+s grid of the trace; .* pass --resample 5m$"):
        load_csv(jittered(tmp_path, [0, 2, -3, 1, 0, -1, 3, 0]))


def test_resample_moves_each_row_to_the_nearest_grid_point(tmp_path):
    trace = load_csv(jittered(tmp_path, [0, 2, -3, 1, 0, -1, 3, 0]), resample=timedelta(minutes=5))
    assert trace.step == timedelta(minutes=5)
    assert trace.start == datetime(2026, 1, 1, tzinfo=UTC)
    assert trace.values.tolist() == [10.0 + i for i in range(8)]
    assert not trace.gaps.any()


def test_resample_averages_the_rows_that_meet_and_leaves_empty_points_as_gaps(tmp_path):
    # One-minute rows at 00:00-00:04 and 00:10-00:14: on a 5m grid 00:00 holds 00:00-00:02, 00:05 holds
    # 00:03-00:04 (nearest to 00:05), 00:10 holds 00:08? none, so 00:10-00:12, and 00:15 holds 00:13-00:14.
    minutes = [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    rows = "".join(f"{1767225600 + 60 * m},{m}\n" for m in minutes)
    trace = load_csv(write(tmp_path, "timestamp,value\n" + rows), resample=timedelta(minutes=5))
    assert trace.values.tolist() == [1.0, 3.5, 11.0, 13.5]
    assert not trace.gaps.any()
    sparse = "".join(f"{1767225600 + 300 * i},{i}\n" for i in (0, 1, 3, 4))
    trace = load_csv(write(tmp_path, "timestamp,value\n" + sparse), resample=timedelta(minutes=5))
    assert trace.gaps.tolist() == [False, False, True, False, False]


def test_the_example_trace_loads():
    trace = load_csv(EXAMPLE)
    assert trace.step == timedelta(minutes=5)
    assert len(trace) == 4040  # 4,032 points and 8 missing ones
    assert int(trace.gaps.sum()) == 8


def trace_of(values: list[float], step: timedelta = timedelta(minutes=1)) -> Trace:
    array = np.array(values, dtype=np.float64)
    return Trace(array, step, datetime(2026, 1, 1, tzinfo=UTC), np.zeros(len(array), dtype=bool), "test.csv")


def test_resample_averages_whole_blocks():
    coarse = trace_of([1, 2, 3, 4, 5, 6, 7]).resample(timedelta(minutes=3))
    assert coarse.values.tolist() == [2.0, 5.0]
    assert coarse.step == timedelta(minutes=3)


def test_a_resampled_block_is_a_gap_only_when_all_of_it_was():
    gaps = np.array([True, True, False, True, True, True, False])
    coarse = replace(trace_of([1, 2, 3, 4, 5, 6, 7]), gaps=gaps).resample(timedelta(minutes=2))
    assert coarse.gaps.tolist() == [True, False, True]
    assert coarse.start == datetime(2026, 1, 1, tzinfo=UTC)


def test_resample_to_a_non_multiple_is_refused():
    with pytest.raises(BacktestError, match="not a whole multiple"):
        trace_of([1, 2, 3, 4]).resample(timedelta(seconds=90))


# --- spec and backend ------------------------------------------------------------------------


def test_default_spec_from_flags():
    trace = trace_of([10.0, 95.0, 20.0])
    spec = scaler_spec(trace, None, Overrides(per_replica=10.0, lead_time=timedelta(minutes=20)))
    assert spec.signal is not None and spec.signal.resolution == timedelta(minutes=1)
    assert spec.capacity is not None and spec.capacity.per_replica.value == 10.0
    assert spec.policy.max_replicas == 100  # 10 × the oracle's peak of 10
    assert spec.lead_time.static == timedelta(minutes=20)
    assert spec.lead_time.max == timedelta(minutes=20)  # widened so the lead time is not clamped
    assert str(spec.policy.headroom) == "10%"  # the API's defaults otherwise
    assert spec.policy.target_quantile == 0.9
    assert spec.interval == timedelta(minutes=1)
    coarse = scaler_spec(replace(trace, step=timedelta(minutes=5)), None, Overrides(per_replica=10.0, lead_time=HOUR))
    assert coarse.interval == timedelta(minutes=5)  # never finer than the trace


def test_flags_are_required_without_a_spec():
    with pytest.raises(BacktestError, match="--per-replica and --lead-time"):
        scaler_spec(trace_of([1.0, 2.0]), None, Overrides(per_replica=1.0))


SCALER = """\
apiVersion: scaling.presage.sh/v1alpha1
kind: PredictiveScaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  signal:
    prometheus: {address: "http://prometheus:9090", query: "sum(rate(http_requests_total[1m]))"}
    resolution: 1m
  capacity: {perReplica: 25}
  leadTime: {static: 3m}
  policy: {maxReplicas: 40, targetQuantile: "0.95"}
"""


def test_a_whole_predictive_scaler_or_just_its_spec(tmp_path):
    whole = tmp_path / "whole.yaml"
    whole.write_text(SCALER)
    data = load_object(whole, "PredictiveScaler")
    assert data["policy"]["maxReplicas"] == 40
    only = tmp_path / "spec.yaml"
    only.write_text("policy: {maxReplicas: 3}\n")
    assert load_object(only, "PredictiveScaler") == {"policy": {"maxReplicas": 3}}
    other = tmp_path / "other.yaml"
    other.write_text("kind: ConfigMap\nspec: {}\n")
    with pytest.raises(BacktestError, match="expected one PredictiveScaler"):
        load_object(other, "PredictiveScaler")


def test_overrides_apply_to_the_users_spec(tmp_path):
    path = tmp_path / "scaler.yaml"
    path.write_text(SCALER)
    overrides = Overrides(per_replica=30.0, target_quantile=0.99, headroom="0", max_replicas=7)
    spec = scaler_spec(trace_of([1.0, 2.0]), load_object(path, "PredictiveScaler"), overrides)
    assert spec.capacity is not None and spec.capacity.per_replica.value == 30.0
    assert spec.policy.target_quantile == 0.99
    assert spec.policy.headroom.value == 0.0
    assert spec.policy.max_replicas == 7
    assert spec.lead_time.static == timedelta(minutes=3)


def test_an_invalid_spec_names_the_field(tmp_path):
    path = tmp_path / "scaler.yaml"
    path.write_text(SCALER.replace('targetQuantile: "0.95"', 'targetQuantile: "0.3"'))
    with pytest.raises(SpecError, match="scaleDownQuantile must be less than or equal to targetQuantile"):
        scaler_spec(trace_of([1.0, 2.0]), load_object(path, "PredictiveScaler"), Overrides())


def test_backend_defaults_and_overrides():
    backend = make_backend(backend_spec(None, season=timedelta(hours=24), cycles=2))
    assert isinstance(backend, SeasonalNaive)
    assert (backend.season, backend.cycles) == (timedelta(hours=24), 2)
    default = make_backend(backend_spec(None))
    assert isinstance(default, SeasonalNaive) and default.season == timedelta(hours=168)


def test_a_timesfm_backend_is_its_forecasters_client():
    spec = backend_spec({"type": "TimesFM", "timesFM": {"endpoint": "http://forecaster:8080"}})
    backend = make_backend(spec, "tfm")
    assert isinstance(backend, TimesFMClient) and backend.settings == spec.times_fm
    assert backend.identity.backend == "tfm"
    with pytest.raises(BacktestError, match="SeasonalNaive backend only"):
        backend_spec({"type": "TimesFM", "timesFM": {"endpoint": "http://f:8080"}}, cycles=2)
