"""The Kubernetes ``Condition`` both kinds report in ``status.conditions``."""

from __future__ import annotations

from typing import Any, Literal

from presage_scaler.api.schema import APIModel, Int64, Timestamp, field

ConditionStatus = Literal["True", "False", "Unknown"]

# Conditions are keyed by type, as in every Kubernetes API (schema keywords for field(**CONDITION_LIST)).
CONDITION_LIST: dict[str, Any] = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


class Condition(APIModel):
    """Condition contains details for one aspect of the current state of this API Resource."""

    last_transition_time: Timestamp = field(
        "lastTransitionTime is the last time the condition transitioned from one status to another. This "
        "should be when the underlying condition changed. If that is not known, then using the time when "
        "the API field changed is acceptable."
    )
    message: str = field(
        "message is a human readable message indicating details about the transition. This may be an empty string.",
        maxLength=32768,
    )
    observed_generation: Int64 | None = field(
        "observedGeneration represents the .metadata.generation that the condition was set based upon. For "
        "instance, if .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration "
        "is 9, the condition is out of date with respect to the current state of the instance.",
        default=None,
        minimum=0,
    )
    reason: str = field(
        "reason contains a programmatic identifier indicating the reason for the condition's last "
        "transition. Producers of specific condition types may define expected values and meanings for this "
        "field, and whether the values are considered a guaranteed API. The value should be a CamelCase "
        "string. This field may not be empty.",
        minLength=1,
        maxLength=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    )
    status: ConditionStatus = field("status of the condition, one of True, False, Unknown.")
    type: str = field(
        "type of condition in CamelCase or in foo.example.com/CamelCase.",
        maxLength=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
