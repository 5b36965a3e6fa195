"""The API declaration: parsing, defaults, errors that name the field, generated files."""

from __future__ import annotations

import copy
import os
import pickle
import re
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from presage_scaler.api import docgen, quantities
from presage_scaler.api.crdgen import crd, default_sentence
from presage_scaler.api.docgen import render_reference
from presage_scaler.api.forecast_backend import ForecastBackendSpec, SeasonalNaiveBackend
from presage_scaler.api.kinds import FORECAST_BACKEND, PREDICTIVE_SCALER
from presage_scaler.api.parse import SpecError, parse
from presage_scaler.api.predictive_scaler import PredictiveScalerSpec, Signal

REPO = Path(__file__).resolve().parents[2]
# The API contract, copied verbatim into the repo so the test runs in any checkout; while the
# project's shared folder sits beside the clone, the copy is checked against it.
SEED = REPO / "tests" / "fixtures" / "presage-api-reference.seed.md"
SHARED_SEED = REPO.parent / "shared" / "seeds" / "presage-api-reference.md"

MINIMAL = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
    "policy": {"maxReplicas": 10},
    "signal": {"prometheus": {"address": "http://prometheus:9090", "query": "sum(rate(http_requests_total[1m]))"}},
}
NAMED = {"name": "rps", "prometheus": MINIMAL["signal"]["prometheus"], "capacity": {"perReplica": 5}}


def with_(base: dict, path: str, value) -> dict:
    """A deep copy of ``base`` with ``value`` set at a dotted path."""
    import copy

    data = copy.deepcopy(base)
    *parents, leaf = path.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return data


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("336h", 336 * 3600),
        ("1h30m", 5400),
        ("1.5h", 5400),
        ("250ms", 0.25),
        ("7d", 7 * 86400),
        ("1d12h", 36 * 3600),
        ("9999d", 9999 * 86400),
    ],
)
def test_durations(text, seconds):
    assert quantities.parse_duration(text) == timedelta(seconds=seconds)


# Days are whole and lead (what the CRD's CEL turns into hours for Go): no fraction, no second days part.
@pytest.mark.parametrize("text", ["", "5", "5 m", "-5m", "1.5d", "12h1d", "1d1d", "10000d", "7 days", "m5", 300])
def test_bad_durations_quote_the_value(text):
    with pytest.raises(ValueError, match="is not a duration"):
        quantities.parse_duration(text)


@pytest.mark.parametrize("td", [timedelta(seconds=30), timedelta(hours=1, minutes=30), timedelta(hours=336)])
def test_duration_round_trip(td):
    assert quantities.parse_duration(quantities.format_duration(td)) == td


@pytest.mark.parametrize(
    ("text", "wire"),
    [("5m", "5m"), ("60m", "1h"), ("1d12h", "36h"), ("99999h", "99999h"), ("9999d", "9999d"),
     ("9999d99999h99999h99999h99999h", "9999d99999h99999h99999h99999h"),
     ("9999d999999999s999999999s999999m", "9999d999999999s999999999s999999m")],
)  # fmt: skip
def test_a_parsed_duration_goes_back_to_the_wire_in_a_form_the_api_takes(text, wire):
    """The canonical form where the pattern takes it; past 99999h, the text it was read from."""
    parsed = quantities.parse_duration(text)
    written = quantities.wire_duration(parsed)
    assert written == wire
    assert quantities.nanoseconds(quantities.parse_duration(written)) == quantities.nanoseconds(parsed)


@pytest.mark.parametrize("text", ["1500ns", "5m", "336h", "1d12h", "9999d"])
def test_parsed_durations_survive_pickle_and_copy_to_the_nanosecond(text):
    parsed = quantities.parse_duration(text)
    for copied in (pickle.loads(pickle.dumps(parsed)), copy.deepcopy(parsed)):
        assert copied == parsed and quantities.nanoseconds(copied) == quantities.nanoseconds(parsed)
        assert quantities.wire_duration(copied) == quantities.wire_duration(parsed)


@pytest.mark.parametrize(
    ("raw", "value", "percent"), [(3, 3, False), ("3", 3, False), ("10%", 10, True), ("2.5", 2.5, False)]
)
def test_amounts(raw, value, percent):
    amount = quantities.parse_amount(raw)
    assert (amount.value, amount.percent) == (value, percent)


def test_amount_of_base():
    assert quantities.parse_amount("10%").of(250) == 25
    assert quantities.parse_amount(7).of(250) == 7


@pytest.mark.parametrize(("raw", "value"), [("0.9", 0.9), (".5", 0.5), ("0.05", 0.05)])
def test_quantiles(raw, value):
    assert quantities.parse_quantile(raw) == value


@pytest.mark.parametrize("raw", ["0", "1", "1.5", "0.0", "-0.1", "abc", "", None, 1.5, 1, " 0.9", "0.9\n"])
def test_bad_quantiles(raw):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        quantities.parse_quantile(raw)


# An unquoted 0.95 is a number, which the API server refuses for a string field: so does presage, and
# says to quote it (not that 0.95 is no quantile).
@pytest.mark.parametrize(("raw", "quoted"), [(0.95, '"0.95"'), (0.5, '"0.5"'), (1e-05, '"0.00001"')])
def test_a_bare_number_is_told_to_go_in_quotes(raw, quoted):
    with pytest.raises(ValueError, match=f"^{raw!r} must be written in quotes: {quoted}$"):
        quantities.parse_quantile(raw)


def test_defaults_match_the_reference():
    spec = parse(PredictiveScalerSpec, MINIMAL)
    assert spec.mode == "Shadow"
    assert spec.interval == timedelta(minutes=1)
    assert spec.lead_time.source == "Static" and spec.lead_time.static == timedelta(minutes=2)
    assert (spec.lead_time.min, spec.lead_time.max) == (timedelta(seconds=30), timedelta(minutes=15))
    assert spec.signal.history == timedelta(hours=336) and spec.signal.resolution == timedelta(minutes=5)
    policy = spec.policy
    assert (policy.min_replicas, policy.target_quantile, policy.scale_down_quantile) == (1, 0.9, 0.5)
    assert str(policy.headroom) == "10%" and str(policy.reactive_floor.buffer_size) == "10%"
    assert policy.reactive_floor.enabled and policy.scale_down_uncertainty_guard.enabled
    assert policy.scale_down_uncertainty_guard.max_relative_spread == 0.25
    assert str(policy.stabilization.max_scale_down_rate) == "20%"
    assert str(policy.stabilization.max_scale_up_rate) == "100%"
    assert policy.stabilization.scale_down_window == timedelta(minutes=15)
    backend = parse(ForecastBackendSpec, {})
    assert backend.type == "SeasonalNaive"
    assert backend.seasonal_naive_or_default.season == timedelta(hours=168)
    assert backend.seasonal_naive_or_default.cycles == 3
    timesfm = parse(ForecastBackendSpec, {"type": "TimesFM", "timesFM": {"endpoint": "http://f:8080"}}).times_fm
    assert (timesfm.max_context, timesfm.max_horizon, timesfm.use_quantile_head) == (4096, 64, True)
    assert timesfm.model == "google/timesfm-2.5-200m-pytorch" and timesfm.timeout == timedelta(seconds=30)


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "policy.headroom",
            "-5%",
            'spec.policy.headroom: "-5%" is not a non-negative integer, or a string such as "2.5" or "10%"',
        ),
        ("policy.targetQuantile", "1.5", 'spec.policy.targetQuantile: "1.5" is not a quantile strictly between'),
        ("policy.scaleDownQuantile", "0", 'spec.policy.scaleDownQuantile: "0" is not a quantile'),
        ("interval", "soon", 'spec.interval: "soon" is not a duration'),
        ("leadTime.static", "2 minutes", 'spec.leadTime.static: "2 minutes" is not a duration'),
        ("policy.stabilization.maxScaleUpRate", "fast", 'spec.policy.stabilization.maxScaleUpRate: "fast" is not'),
        (
            "policy.scaleDownUncertaintyGuard.maxRelativeSpread",
            "-1",
            'spec.policy.scaleDownUncertaintyGuard.maxRelativeSpread: "-1" is not a non-negative decimal',
        ),
        ("signal.resolution", "0s", "spec.signal: resolution must be at least 1s"),
        ("signal.resolution", "999999999ns", "spec.signal: resolution must be at least 1s"),
        ("leadTime.static", "99999999999h", 'spec.leadTime.static: "99999999999h" is not a duration'),
        ("policy.maxReplicas", 2**31, "spec.policy.maxReplicas: 2147483648 is out of range"),
        ("policy.maxReplicas", "7", 'spec.policy.maxReplicas: "7" is not an integer'),
        ("policy.headroom", 2.5, "spec.policy.headroom: 2.5 is not a non-negative integer, or a string such as"),
        ("policy.headroom", 2**63, "spec.policy.headroom: 9223372036854775808 is out of range"),
        ("policy.headroom", -3, "spec.policy.headroom: -3 is out of range"),
        # YAML reads an unquoted 0.9 as a number: the message says to quote it, not that 0.9 is no quantile.
        ("policy.targetQuantile", 0.9, 'spec.policy.targetQuantile: 0.9 must be written in quotes: "0.9"'),
        ("policy.targetQuantile", 1.5, "spec.policy.targetQuantile: 1.5 is not a quantile strictly between 0 and 1"),
        (
            "policy.scaleDownUncertaintyGuard.maxRelativeSpread",
            0.25,
            'spec.policy.scaleDownUncertaintyGuard.maxRelativeSpread: 0.25 must be written in quotes: "0.25"',
        ),
        ("policy.reactiveFloor.enabled", "true", "spec.policy.reactiveFloor.enabled: "),
        ("policy.maxReplicas", "many", 'spec.policy.maxReplicas: "many"'),
        ("mode", "Auto", 'spec.mode: "Auto"'),
        ("policy.minReplicas", 20, "spec.policy: minReplicas must be less than or equal to maxReplicas"),
        ("policy.scaleDownQuantile", "0.95", "spec.policy: scaleDownQuantile must be less than or equal to"),
        ("leadTime.min", "20m", "spec.leadTime: min must be less than or equal to max"),
        ("leadTime.source", "Observed", "spec.leadTime: observed is required when source is Observed"),
        ("signals", [NAMED], "spec: exactly one of signal or signals must be set"),
        ("signals", [], "spec.signals: []: list should have at least 1 item"),
        ("capacity", {"perReplica": 0}, "spec.capacity: perReplica must be greater than 0"),
        ("scaleTargetRef.agones", {}, "spec.scaleTargetRef: agones applies only to an agones.dev Fleet"),
        ("policy.bogus", 1, "spec.policy.bogus: is not a field of this API"),
        ("forecast.horizon", "1m", "spec: forecast.horizon must be at least the lead time"),
        ("forecast.horizon", "20s", "spec: forecast.horizon must be at least the lead time"),
    ],
)
def test_errors_name_the_field_and_value(path, value, message):
    with pytest.raises(SpecError) as caught:
        parse(PredictiveScalerSpec, with_(MINIMAL, path, value))
    assert any(p.startswith(message) for p in caught.value.problems), caught.value.problems


FLEET = {"apiVersion": "agones.dev/v1", "kind": "Fleet", "name": "game"}


@pytest.mark.parametrize(
    ("target", "interval", "accepted"),
    [
        (FLEET, "4m", True),
        (FLEET, "5m", False),  # the default maxRecommendationAge: the webhook would refuse before the next one
        ({**FLEET, "agones": {"maxRecommendationAge": "10m"}}, "5m", True),
        ({**FLEET, "agones": {"maxRecommendationAge": "10m"}}, "10m", False),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "30m", True),
    ],
)
def test_a_fleet_s_interval_is_shorter_than_its_max_recommendation_age(target, interval, accepted):
    raw = {**MINIMAL, "scaleTargetRef": target, "interval": interval}
    if accepted:
        assert parse(PredictiveScalerSpec, raw).interval == quantities.parse_duration(interval)
    else:
        with pytest.raises(SpecError) as caught:
            parse(PredictiveScalerSpec, raw)
        assert any(
            "interval must be shorter than scaleTargetRef.agones.maxRecommendationAge" in p
            for p in caught.value.problems
        )


def test_neither_signal_nor_signals():
    data = {k: v for k, v in MINIMAL.items() if k != "signal"}
    with pytest.raises(SpecError, match="exactly one of signal or signals"):
        parse(PredictiveScalerSpec, data)


def test_duplicate_signal_names_and_capacity_with_signals():
    data = {k: v for k, v in MINIMAL.items() if k != "signal"}
    with pytest.raises(SpecError, match="signal names must be unique"):
        parse(PredictiveScalerSpec, {**data, "signals": [NAMED, NAMED]})
    with pytest.raises(SpecError, match="capacity applies only to the single-signal form"):
        parse(PredictiveScalerSpec, {**data, "signals": [NAMED], "capacity": {"perReplica": 2}})


def test_agones_options_on_a_fleet_are_fine():
    data = with_(
        MINIMAL, "scaleTargetRef", {"apiVersion": "agones.dev/v1", "kind": "Fleet", "name": "game", "agones": {}}
    )
    spec = parse(PredictiveScalerSpec, data)
    assert spec.scale_target_ref.agones.max_recommendation_age == timedelta(minutes=5)


def test_backend_rules():
    with pytest.raises(SpecError, match="spec: timesFM is required when type is TimesFM"):
        parse(ForecastBackendSpec, {"type": "TimesFM"})
    with pytest.raises(SpecError, match=r"spec\.timesFM\.maxContext: 20000"):
        parse(ForecastBackendSpec, {"type": "TimesFM", "timesFM": {"endpoint": "http://f", "maxContext": 20000}})


def test_wire_round_trip_is_stable():
    spec = parse(PredictiveScalerSpec, MINIMAL)
    assert parse(PredictiveScalerSpec, spec.to_wire()) == spec


# --- generated files ---------------------------------------------------------------------------


class Row(NamedTuple):
    field: str
    type: str
    required: str
    default: str
    description: str


class Section(NamedTuple):
    """One section of the reference: its paragraphs and its table's rows."""

    paragraphs: list[str]
    rows: list[Row]


SEED_HEADER = "Field\tType\tRequired\tDescription"
REFERENCE_COLUMNS = ["Field", "Type", "Required", "Default", "Description"]
# The seed ends a field's description with its default, which the reference gives its own column.
SEED_DEFAULT = re.compile(r"^(?:(?P<description>.*) )?Default: (?P<default>.*)\.$")


def _seed_row(line: str) -> Row:
    field, type_, required, description = [*line.split("\t"), "", "", ""][:4]
    default = ""
    if match := SEED_DEFAULT.match(description):
        description, default = match["description"] or "", match["default"]
    return Row(field, type_, required, default, description)


def _seed_sections(text: str) -> dict[str, Section]:
    """Section heading → its paragraphs and rows, for the seed's tab-separated format."""
    sections: dict[str, Section] = {}
    current = None
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        first = lines[0]
        if first.startswith(("PredictiveScaler", "ForecastBackend")) and "\t" not in first and " " not in first:
            current = sections[first] = Section([], [])
        elif current is not None and first == SEED_HEADER:
            current.rows.extend(_seed_row(line) for line in lines[1:])
        elif current is not None:
            current.paragraphs.extend(lines)
    return sections


CODE = re.compile(r"^`([^`]*)`$")
LINKED = re.compile(r"^\[(?P<text>[^\]]*)\]\(#(?P<anchor>[^)]*)\)$")


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells, with ``\\|`` and ``<br>`` read back as ``|`` and newline."""
    assert line.startswith("| ") and line.endswith(" |"), line
    return [cell.strip().replace("\\|", "|").replace("<br>", "\n") for cell in re.split(r"(?<!\\)\|", line[1:-1])]


def _plain(cell: str) -> str:
    """A cell's text without the link around it or the code span it is set in."""
    if match := LINKED.match(cell):
        cell = match["text"]
    if match := CODE.match(cell):
        cell = match[1]
    return cell


def _reference_row(line: str) -> Row:
    field, type_, required, default, description = _cells(line)
    return Row(_plain(field), _plain(type_), required, _plain(default), description)


def _reference_sections(text: str) -> dict[str, Section]:
    """Section heading → its paragraphs and rows, for the generated Markdown reference."""
    sections: dict[str, Section] = {}
    current = None
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        if heading := re.match(r"^#+ (.+)$", block):
            current = sections[heading[1]] = Section([], [])
        elif current is not None and lines[0].startswith("|"):
            header, rule, *rows = lines
            assert _cells(header) == REFERENCE_COLUMNS and set(_cells(rule)) == {"---"}, block
            current.rows.extend(_reference_row(row) for row in rows)
        elif current is not None:
            current.paragraphs.extend(lines)
    return sections


@pytest.mark.skipif(not SHARED_SEED.exists(), reason="no shared/ folder beside this checkout")
def test_seed_copy_matches_the_shared_contract():
    assert SEED.read_text() == SHARED_SEED.read_text()


def _has_row(rows: list[Row], seed: Row) -> bool:
    """Whether the reference has the seed's row. A description the seed leaves blank is the
    declaration's to write (every field has one, for kubectl explain); one it gives must be verbatim."""
    return any(row == seed or (not seed.description and row._replace(description="") == seed) for row in rows)


def test_reference_contains_every_line_of_the_seed():
    """Every section of the seed, in order, with every paragraph and every row: field, type,
    required flag, default and description."""
    seed, generated = _seed_sections(SEED.read_text()), _reference_sections(render_reference())
    assert list(seed) == [s for s in generated if s in seed], "section order differs from the seed"
    for name, section in seed.items():
        missing = [p for p in section.paragraphs if p not in generated[name].paragraphs]
        missing += [row for row in section.rows if not _has_row(generated[name].rows, row)]
        assert not missing, f"{name}: {missing}"


def test_the_reference_states_how_a_count_is_decided_in_the_codes_own_figures():
    """Sizing window, calibration, the hold at the recent peak, sizedTo, the band, SeasonalNaive's
    residual cap and cycles at the default history, the horizon raise and staleness: stated under
    the types they concern (and so in ``kubectl explain``), with the figures the code uses."""
    from presage_scaler.backends.seasonal_naive import MAX_RESIDUALS, MIN_RESIDUALS
    from presage_scaler.engine import calibration_blend, calibration_readings, calibration_windows, past_forecasts
    from presage_scaler.engine.evaluator import STALE_STEPS

    sections = _reference_sections(render_reference())

    def said(section: str) -> str:
        return " ".join(sections[section].paragraphs)

    minutes = int(calibration_readings.RECENT_PEAK.total_seconds() // 60)
    low, high = (r**calibration_readings.BAND_EXPONENT for r in calibration_readings.BAND_RATIO_RANGE)
    policy = said("PredictiveScaler.spec.policy")
    for figure in (
        "from the next one up to the lead time plus the interval",
        "ceil((sizedTo + headroom) / capacity)",
        f"the peak of the last {minutes} minutes",
        f"at least {calibration_windows.PEAK_SAVING:.0%} less",
        f"at least {calibration_blend.BLEND_SAVING:.0%} less",
        f"at most {past_forecasts.MAX_FORECASTS}",
        f"fewer than {past_forecasts.MIN_SCORES} scored forecasts",
        f"within [{low:g}, {high:g}]",
        "useQuantileHead false",
        "raised alike",
    ):
        assert figure in policy, figure
    assert past_forecasts.BAND_LEVELS == (0.5, 0.9) and "its median to its 0.9 quantile" in policy
    breakdown = said("PredictiveScaler.status.breakdown")
    assert f"the peak of the last {minutes} minutes" in breakdown and "RecentPeak" in breakdown
    assert "constraint ReactiveFloor" in breakdown
    seasonal = said("ForecastBackend.spec.seasonalNaive")
    assert f"at most the last {MAX_RESIDUALS:,}" in seasonal
    assert f"less than a season and {MIN_RESIDUALS} steps" in seasonal
    assert '"seasonal-naive (2 of 3 cycles)"' in seasonal
    defaults = SeasonalNaiveBackend()
    history = Signal.model_fields["history"].default
    assert (history, defaults.season, defaults.cycles) == ("336h", timedelta(hours=168), 3)
    assert "the default history of 336h holds two of the default three 168h seasons" in seasonal
    assert "HorizonRaised" in said("PredictiveScaler.spec.forecast")
    assert f"{STALE_STEPS} steps of its resolution" in said("PredictiveScaler.spec.signal")
    assert "SignalStale" in said("PredictiveScaler.spec.signals")


def test_reference_links_lead_to_its_sections():
    text = render_reference()
    headings = {docgen.anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    links = re.findall(r"\]\(#([^)]*)\)", text)
    assert links and set(links) <= headings


def test_reference_cells_escape_pipes_and_newlines():
    assert _cells(docgen.table_row(["a|b", "one\ntwo"])) == ["a|b", "one\ntwo"]


def test_generated_files_are_fresh():
    """`presage crds --check` fails when crds/ or docs/ lag behind the declaration."""
    result = subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "crds", "--check", "--out", str(REPO)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_check_detects_a_stale_file(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "crds", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    target = tmp_path / "crds" / "scaling.presage.sh_predictivescalers.yaml"
    target.write_text(target.read_text().replace("maxReplicas", "maxReplica"))
    result = subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "crds", "--check", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1 and "crds/scaling.presage.sh_predictivescalers.yaml" in result.stderr


def test_crds_writes_into_its_own_checkout_wherever_it_runs(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "crds", "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("check", [False, True])
def test_crds_outside_a_checkout_asks_where_to_write(tmp_path, check):
    """An installed presage (here: the package copied where no pyproject.toml is beside it) refuses in
    one line rather than creating crds/, docs/ and charts/ in whatever directory it runs in."""
    shutil.copytree(REPO / "presage_scaler", tmp_path / "site" / "presage_scaler")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "presage_scaler.cli.main", "crds", *(["--check"] if check else [])],
        capture_output=True,
        text=True,
        check=False,
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "pass --out DIR" in result.stderr, result.stderr
    assert str(tmp_path / "site" / "presage_scaler") in result.stderr
    assert list(elsewhere.iterdir()) == []


def _walk(schema: dict, path: str = ""):
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _walk(child, f"{path}.{name}")
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("kind", [PREDICTIVE_SCALER, FORECAST_BACKEND], ids=lambda k: k.name)
def test_crd_schema_is_structural(kind):
    document = crd(kind)
    version = document["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    root = version["schema"]["openAPIV3Schema"]
    for path, node in _walk(root):
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
        else:
            assert node.get("type") in {"object", "array", "string", "integer", "boolean", "number"}, path
        for required in node.get("required", []):
            assert required in node["properties"], f"{path}.{required}"
    yaml.safe_load(yaml.safe_dump(document))


@pytest.mark.parametrize("kind", [PREDICTIVE_SCALER, FORECAST_BACKEND], ids=lambda k: k.name)
def test_every_property_is_described_with_its_default(kind):
    """kubectl explain prints a property's description and nothing of its default: every property has
    one, and a defaulted property's states the default as a CR would write it."""
    root = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    undescribed, unstated = [], []
    for path, node in _walk(root):
        if not path or path.endswith(("[]", "{}")) or path == ".metadata":
            # The root, list items and map values are not properties (explain shows their field's); the
            # API server refuses a description of metadata and publishes ObjectMeta's own.
            continue
        if not node.get("description", "").strip():
            undescribed.append(path)
        if "default" in node and default_sentence(node["default"]) not in node.get("description", ""):
            unstated.append(path)
    assert not undescribed, f"properties without a description: {undescribed}"
    assert not unstated, f"defaults the description does not state: {unstated}"


def test_default_sentences_read_as_a_cr_writes_them():
    assert default_sentence("10%") == "Default: 10%."
    assert default_sentence(True) == "Default: true."
    assert (
        default_sentence({"enabled": True, "bufferSize": "10%"}) == 'Default: {"enabled": true, "bufferSize": "10%"}.'
    )


def _columns(kind, priority: int) -> list[str]:
    version = crd(kind)["spec"]["versions"][0]
    return [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority", 0) <= priority]


def test_printer_columns_and_names():
    """The default columns say whether it works and, when not, why, and whether it is sized as its spec
    says; -o wide adds the rest."""
    assert _columns(PREDICTIVE_SCALER, 0) == [
        "Mode",
        "Target",
        "Current",
        "Forecast",
        "Recommended",
        "Ready",
        "Reason",
        "Spec",
        "Age",
    ]
    assert _columns(PREDICTIVE_SCALER, 1) == [
        "Mode",
        "Target",
        "Current",
        "Forecast",
        "Recommended",
        "Binding",
        "Constraint",
        "Ready",
        "Serving",
        "Saving",
        "Live",
        "Reason",
        "Spec",
        "Age",
    ]
    paths = {
        c["name"]: c["jsonPath"] for c in crd(PREDICTIVE_SCALER)["spec"]["versions"][0]["additionalPrinterColumns"]
    }
    assert paths["Reason"] == '.status.conditions[?(@.type=="Degraded")].reason'
    assert paths["Serving"] == '.status.conditions[?(@.type=="Ready")].reason'
    assert paths["Spec"] == '.status.conditions[?(@.type=="SpecAdjusted")].reason'
    assert paths["Saving"] == ".status.adviceSaving"
    names = crd(PREDICTIVE_SCALER)["spec"]["names"]
    assert names["categories"] == ["presage"] and names["shortNames"]
    assert _columns(FORECAST_BACKEND, 0) == ["Type", "Model", "Ready", "Reason", "Age"]
    assert _columns(FORECAST_BACKEND, 1) == ["Type", "Model", "Ready", "Reason", "Probed", "Age"]
