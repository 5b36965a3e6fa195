"""charts/presage/values.schema.json against values.yaml and the API declaration, without helm:
every value has its schema entry and every entry its value (so a typo cannot hide behind a key the
schema forgot), and what the schema checks of the default ForecastBackend is what the API declares.
tests/integration/test_chart.py runs the real helm against the schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from presage_scaler.api import quantities
from presage_scaler.api.forecast_backend import SeasonalNaiveBackend

CHART = Path(__file__).resolve().parents[2] / "charts" / "presage"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())


def closed_objects(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object of the schema that lists its keys (additionalProperties: false), by path."""
    if "properties" in schema:
        yield path, schema
        for name, child in schema["properties"].items():
            yield from closed_objects(child, f"{path}.{name}")


def at(values: Any, path: str) -> Any:
    for key in filter(None, path.split(".")):
        values = values[key]
    return values


def test_every_value_has_a_schema_entry_and_every_entry_a_value() -> None:
    for path, schema in closed_objects(SCHEMA):
        assert schema.get("additionalProperties") is False, f"{path or 'the root'} accepts unknown keys"
        assert set(at(VALUES, path)) == set(schema["properties"]), path or "the root"
        for name, entry in schema["properties"].items():
            assert entry.get("description"), f"{path}.{name} has no description"


def test_the_default_backend_is_checked_as_the_api_declares_it() -> None:
    backend = SCHEMA["properties"]["defaultForecastBackend"]["properties"]["seasonalNaive"]["properties"]
    assert backend["season"]["pattern"] == quantities.DURATION_PATTERN
    cycles = SeasonalNaiveBackend.model_fields["cycles"].json_schema_extra["presage"].openapi
    assert (backend["cycles"]["minimum"], backend["cycles"]["maximum"]) == (cycles["minimum"], cycles["maximum"])


def test_advise_durations_are_checked_as_presage_parses_them() -> None:
    """advise.warmup, advise.holdout and advise.deadline: empty (presage's defaults) or a duration
    `presage advise` accepts, so a typo fails at helm install rather than in every run of the CronJob."""
    advise = SCHEMA["properties"]["advise"]["properties"]
    for name in ("warmup", "holdout", "deadline"):
        assert advise[name]["pattern"] == "^$|" + quantities.DURATION_PATTERN, name
        assert advise[name]["maxLength"] == quantities.DURATION_MAX_LENGTH, name
        assert VALUES["advise"][name] == "", name
    assert advise["shards"]["minimum"] == 1 and VALUES["advise"]["shards"] == 1
