"""One live PredictiveScaler, read for a command (``presage scaledobject``, ``presage tune``): every
failure is a :class:`CommandError` whose one line says what to check."""

from __future__ import annotations

from presage_scaler.clients.kube.client import JSON, ApiError, ApiUnavailable, Forbidden, KubeClient, NotFound
from presage_scaler.clients.kube.presage_resources import PREDICTIVE_SCALERS


class CommandError(Exception):
    """A failure to report in one line and exit 1."""


async def read_scaler(client: KubeClient, namespace: str, name: str) -> JSON:
    """The PredictiveScaler, or a :class:`CommandError` that says what to check."""
    where = f"PredictiveScaler {name!r} in namespace {namespace!r}"
    try:
        return await client.get(PREDICTIVE_SCALERS, namespace, name)
    except NotFound as exc:
        if f'"{name}"' in exc.message:
            raise CommandError(f"no {where} (kubectl get predictivescalers -n {namespace}): {exc.message}") from None
        raise CommandError(
            f"the API server does not serve PredictiveScalers ({exc.message}); install presage's CRDs (crds/)"
        ) from None
    except Forbidden as exc:
        raise CommandError(f"not allowed to read {where}: {exc.message}") from None
    except ApiUnavailable as exc:
        raise CommandError(f"cannot reach the API server: {exc.message}") from None
    except ApiError as exc:
        raise CommandError(f"reading {where}: {exc}") from None
