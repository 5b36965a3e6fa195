"""The ForecastBackend kind's spec (which backend, and its settings) and status.

Class docstrings are the type descriptions that the reference prints; keep them to one paragraph.
"""

from __future__ import annotations

from typing import Literal

from presage_scaler.api.conditions import CONDITION_LIST, Condition
from presage_scaler.api.schema import APIModel, Duration, Int32, Int64, Rule, Timestamp, field
from presage_scaler.api.validation_rules import URL, at_least

BackendType = Literal["TimesFM", "SeasonalNaive"]


class SeasonalNaiveBackend(APIModel):
    """SeasonalNaiveBackend configures the built-in baseline forecaster."""

    cycles: Int32 = field(
        "Cycles is how many past seasons to average over. Quantiles come from the empirical distribution of "
        "residuals across these cycles.",
        default=3,
        minimum=1,
        maximum=52,
    )
    season: Duration = field("Season is the periodicity to repeat, typically 24h or 168h.", default="168h")

    notes = (
        "Each step is forecast as the mean of the same phase over the last cycles seasons, scaled to the last "
        "hour's level (within a factor of two) and never below the latest value. Its quantiles add the "
        "empirical quantiles of the residuals over the most recent cycles x season steps, at most the last "
        "1,024. With fewer seasons of history than cycles it uses those there are and widens the band by "
        'sqrt(cycles / available), which lastForecast.method reports as "seasonal-naive (2 of 3 cycles)": '
        "the default history of 336h holds two of the default three 168h seasons (history: 504h uses all "
        "three). With less than a season and 24 steps of history it forecasts the last hour's mean "
        '(method "recent-level").',
    )
    cel_rules = (at_least("season", "1s"),)


class TimesFMBackend(APIModel):
    """TimesFMBackend configures the TimesFM model server."""

    endpoint: str = field(
        "Endpoint is the base URL of a presage-forecaster instance, e.g. "
        '"http://presage-forecaster.presage-system:8080".',
        **URL,
    )
    max_context: Int32 = field(
        "MaxContext is the number of input points the model was compiled for. TimesFM 2.5 supports up to "
        "16384. Together with the signal Resolution this decides how far back the model can see: 4096 points "
        "at 5m resolution is ~14 days.",
        default=4096,
        minimum=1,
        maximum=16384,
    )
    max_horizon: Int32 = field(
        "MaxHorizon is the number of output points the model was compiled for.", default=64, minimum=1
    )
    model: str = field(
        "Model is the checkpoint the server should load. Changing this requires restarting the forecaster; "
        "presage only reports what the server tells it.",
        default="google/timesfm-2.5-200m-pytorch",
        minLength=1,
    )
    timeout: Duration = field("Timeout for a single forecast request.", default="30s")
    use_quantile_head: bool = field(
        "UseQuantileHead enables TimesFM 2.5's continuous quantile head. Without it you get a point forecast "
        "only, and the asymmetric up/down quantile policy degenerates to a single number.",
        default=True,
    )

    notes = (
        "With useQuantileHead, the width of the model's band (its median to its 0.9 quantile) scales the "
        "offsets calibration adds to its forecast (PredictiveScaler spec.policy): a forecast the model is "
        "less sure of than usual provisions more. Without it, calibration works from the forecast's past "
        "errors alone.",
    )
    cel_rules = (at_least("timeout", "1ms"),)


class ForecastBackendSpec(APIModel):
    """ForecastBackendSpec defines a forecasting backend usable by any PredictiveScaler in the cluster."""

    seasonal_naive: SeasonalNaiveBackend | None = field(SeasonalNaiveBackend.__doc__ or "", default=None)
    times_fm: TimesFMBackend | None = field(TimesFMBackend.__doc__ or "", default=None, alias="timesFM")
    type: BackendType = field(
        "BackendType selects a forecasting implementation.", default="SeasonalNaive", required=True
    )

    cel_rules = (
        Rule(
            cel="self.type != 'TimesFM' || has(self.timesFM)",
            message="timesFM is required when type is TimesFM",
            check=lambda b: b.type != "TimesFM" or b.times_fm is not None,
            field_path=".timesFM",
        ),
        Rule(
            cel="!has(self.seasonalNaive) || self.type == 'SeasonalNaive'",
            message="seasonalNaive applies only when type is SeasonalNaive",
            check=lambda b: b.seasonal_naive is None or b.type == "SeasonalNaive",
            field_path=".seasonalNaive",
        ),
    )

    @property
    def seasonal_naive_or_default(self) -> SeasonalNaiveBackend:
        """The SeasonalNaive settings, defaulted when the section is omitted."""
        return self.seasonal_naive or SeasonalNaiveBackend()


class ForecastBackendStatus(APIModel):
    """ForecastBackendStatus reports backend reachability."""

    conditions: list[Condition] | None = field(
        "Conditions: Ready (the last probe succeeded; otherwise its reason names the failure, e.g. "
        "BackendUnreachable or BackendTimeout) and Degraded (the last probe failed).",
        default=None,
        **CONDITION_LIST,
    )
    last_probe_time: Timestamp | None = field("LastProbeTime is when presage last probed the backend.", default=None)
    model: str | None = field("Model reported by the backend on its last successful probe.", default=None)
    observed_generation: Int64 | None = field(
        "ObservedGeneration is the metadata.generation of the spec the last probe used.", default=None
    )
