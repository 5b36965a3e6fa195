"""A record the controller keeps in one field of a PredictiveScaler's status and writes whole there."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from presage_scaler.api.schema import APIModel


class StatusRecord(ABC):
    """A ledger restored from one status field and written back to it whole: :meth:`to_status` is the
    record as that field's API model, :meth:`status_patch` the same for a JSON merge patch."""

    __slots__ = ()

    @abstractmethod
    def to_status(self) -> APIModel:
        """The record as the status field's API model."""

    def status_patch(self) -> dict[str, Any]:
        """:meth:`to_status` for a JSON merge patch: every field present, null where absent, so nothing of
        the previous record survives the merge (lists are replaced whole)."""
        return self.to_status().model_dump(by_alias=True, mode="json")
