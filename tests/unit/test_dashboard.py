"""The Grafana dashboard queries only metrics the scaler exports, and shows what the issue asks for."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from presage_scaler.observability.metrics import ScalerMetrics
from presage_scaler.serving.store import RecommendationStore
from presage_scaler.serving.store_metrics import served_metrics
from tests.harness.dashboard import dashboard, expressions, metric_names, panels_of


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('presage_a{namespace="$namespace", scaler="x"}', {"presage_a"}),
        (
            "histogram_quantile(0.95, sum by (le) (rate(presage_h_bucket{a='b'}[$__rate_interval])))",
            {"presage_h_bucket"},
        ),
        (
            "max by (ns, s) (presage_a) * on (ns, s) group_right max by (ns, s, sig) (presage_b)",
            {"presage_a", "presage_b"},
        ),
        ("presage_a offset 5m > bool 1e3 and presage_b", {"presage_a", "presage_b"}),
        (
            'sum without (code) (rate(presage_c_total{code=~"5.."}[5m])) / ignoring (x) presage_d',
            {"presage_c_total", "presage_d"},
        ),
    ],
)
def test_the_tokenizer(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def exported() -> dict[str, str]:
    """Every series name the scaler can export (histogram and counter suffixes included) → its family."""
    metrics = served_metrics(ScalerMetrics(CollectorRegistry()), RecommendationStore())
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}
    return {
        family.name + suffix: family.name
        for family in metrics.registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


# Families without namespace/scaler labels: the scaler's dependencies and its servers.
PROCESS_WIDE = {
    "presage_forecast_request_duration_seconds",
    "presage_prometheus_request_duration_seconds",
    "presage_grpc_requests",
    "presage_grpc_request_duration_seconds",
    "presage_webhook_requests",
    "presage_webhook_request_duration_seconds",
}


def test_every_expression_uses_only_exported_metrics() -> None:
    names_exported = set(exported())
    exprs = expressions()
    assert len(exprs) > 20
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= names_exported, f"{expr!r} uses {sorted(names - names_exported)}, not exported"


def test_it_shows_what_a_user_needs_per_scaler() -> None:
    used = set().union(*(metric_names(e) for e in expressions()))
    for wanted in (
        "presage_signal_observed",  # demand
        "presage_forecast_quantile",  # the forecast band
        "presage_forecast_projected",  # the projected curve, up to the horizon
        "presage_signal_capacity_per_replica",  # capacity
        "presage_recommended_replicas",
        "presage_current_replicas",
        "presage_binding_constraint",
        "presage_shadow_coverage_ratio",
    ):
        assert wanted in used, wanted


def test_variables_and_panels() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert {"datasource", "namespace", "scaler"} <= set(variables)
    assert "$namespace" in variables["scaler"]["query"]["query"]
    panels = list(panels_of(board["panels"]))
    assert len({p["id"] for p in panels}) == len(panels)
    families = exported()
    for panel in (p for p in panels if p["type"] != "row"):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            expr = target["expr"]
            if any(families[name] not in PROCESS_WIDE for name in metric_names(expr)):
                assert 'namespace="$namespace", scaler="$scaler"' in expr, expr


def test_the_projected_demand_panel_puts_offsets_on_its_x_axis() -> None:
    """A trend panel of one instant table query: one column per quantile, the offset as a sorted number."""
    [panel] = [p for p in panels_of(dashboard()["panels"]) if p["title"] == "Projected demand"]
    assert panel["type"] == "trend"
    [target] = panel["targets"]  # groupingToMatrix takes a single frame
    assert (target["instant"], target["format"]) == (True, "table")
    assert metric_names(target["expr"]) == {"presage_forecast_projected", "presage_signal_observed"}
    steps = {t["id"]: t["options"] for t in panel["transformations"]}
    assert list(steps) == ["groupingToMatrix", "organize", "convertFieldType", "sortBy"]
    grouping = steps["groupingToMatrix"]
    assert (grouping["rowField"], grouping["columnField"]) == ("offset_seconds", "quantile")
    assert grouping["valueField"] == "Value"  # the value column of a single query's table
    x = panel["options"]["xField"]
    assert steps["organize"]["renameByName"] == {"offset_seconds\\quantile": x}  # the matrix's first column
    assert steps["convertFieldType"]["conversions"] == [{"targetField": x, "destinationType": "number"}]
    assert steps["sortBy"]["sort"] == [{"field": x, "desc": False}]
