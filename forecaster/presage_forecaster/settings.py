"""The server's configuration: one dataclass, read from command-line flags or environment variables.

Every flag ``--max-context`` has an environment variable ``PRESAGE_FORECASTER_MAX_CONTEXT``; a flag
wins over its variable, a variable over the default. Limits are checked here, once, so the rest of
the server can trust them.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields

PATCH = 32
"""TimesFM 2.5's input patch length: contexts are padded to a multiple of it."""

OUTPUT_PATCH = 128
"""TimesFM 2.5's output patch length: one forward pass forecasts this many steps."""

CONTEXT_LIMIT = 16384
"""TimesFM 2.5's limit on context + horizon (both rounded up to their patch lengths)."""

QUANTILE_HEAD_LIMIT = 1024
"""The longest horizon TimesFM 2.5's continuous quantile head covers."""

DTYPES = ("float32", "bfloat16")
"""Weight and matmul precision: float32 (the published weights as they are) or bfloat16."""


@dataclass(frozen=True)
class Settings:
    """What the server loads and how it serves. See ``docs/forecaster.md`` for each field."""

    model: str
    host: str = "0.0.0.0"
    port: int = 8080
    model_id: str | None = None
    revision: str | None = None
    max_context: int = 4096
    max_horizon: int = 128
    batch_window_ms: float = 5.0
    max_batch_size: int = 32
    max_queued_series: int = 1024
    max_series_per_request: int = 256
    max_quantiles_per_request: int = 32
    max_body_bytes: int = 8 * 1024 * 1024
    threads: int = 0
    flip_invariance: bool = True
    dtype: str = "float32"
    torch_compile: bool = False
    load_delay_seconds: float = 0.0
    log_level: str = "info"

    def __post_init__(self) -> None:
        problems = []
        if not self.model:
            problems.append("--model is required: a directory holding model.safetensors, or a hub id")
        if not 1 <= self.max_context <= CONTEXT_LIMIT:
            problems.append(f"--max-context must be in [1, {CONTEXT_LIMIT}], got {self.max_context}")
        if not 1 <= self.max_horizon <= QUANTILE_HEAD_LIMIT:
            problems.append(
                f"--max-horizon must be in [1, {QUANTILE_HEAD_LIMIT}] (the quantile head's reach), "
                f"got {self.max_horizon}"
            )
        if self.compiled_context + self.compiled_horizon > CONTEXT_LIMIT:
            problems.append(
                f"--max-context {self.max_context} plus --max-horizon {self.max_horizon}, rounded up to "
                f"{self.compiled_context} + {self.compiled_horizon}, exceeds TimesFM 2.5's {CONTEXT_LIMIT}"
            )
        if self.batch_window_ms < 0:
            problems.append(f"--batch-window-ms must not be negative, got {self.batch_window_ms}")
        for name in (
            "max_batch_size",
            "max_queued_series",
            "max_series_per_request",
            "max_quantiles_per_request",
            "max_body_bytes",
        ):
            if getattr(self, name) < 1:
                problems.append(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.dtype not in DTYPES:
            problems.append(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.threads < 0:
            problems.append(f"--threads must be 0 (automatic) or positive, got {self.threads}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def compiled_context(self) -> int:
        """``max_context`` rounded up to a whole number of input patches."""
        return -(-self.max_context // PATCH) * PATCH

    @property
    def compiled_horizon(self) -> int:
        """``max_horizon`` rounded up to a whole number of output patches: what each pass decodes."""
        return -(-self.max_horizon // OUTPUT_PATCH) * OUTPUT_PATCH


_HELP = {
    "model": "directory holding model.safetensors (absolute or relative), or a Hugging Face hub id",
    "host": "address to listen on",
    "port": "port to listen on",
    "model_id": "model id to report (default: from presage-checkpoint.json, the hub id, or the directory name)",
    "revision": "pinned revision: reported, and loading fails when the checkpoint says otherwise",
    "max_context": "most history points per series; longer series are cut to their most recent points",
    "max_horizon": "most forecast steps per request (at most 1024); each forward pass decodes this, "
    "rounded up to a multiple of 128",
    "batch_window_ms": "how long the first queued series waits for others to share its forward pass",
    "max_batch_size": "most series in one forward pass",
    "max_queued_series": "most series waiting for a forward pass; a request beyond it gets 503 Overloaded",
    "max_series_per_request": "most series in one request (413 beyond)",
    "max_quantiles_per_request": "most quantile levels in one request (413 beyond)",
    "max_body_bytes": "largest request body in bytes (413 beyond)",
    "threads": "torch CPU threads (0: the CPUs this process may use, honouring a cgroup CPU limit)",
    "flip_invariance": "average each forecast with the negated series' (TimesFM's default; doubles the work)",
    "dtype": "float32, or bfloat16: weights and matmuls in bfloat16 (about 3x faster on CPUs with AVX512-BF16 "
    "or AMX, half the memory, forecasts differ by up to ~1e-3 relative)",
    "torch_compile": "torch.compile the model (slow warm-up, no gain on CPU)",
    "load_delay_seconds": "testing only: wait this long before loading the model",
    "log_level": "uvicorn log level",
}


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def env_name(field_name: str) -> str:
    """The environment variable for a settings field, e.g. ``PRESAGE_FORECASTER_MAX_CONTEXT``."""
    return "PRESAGE_FORECASTER_" + field_name.upper()


def parse_settings(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from flags and ``PRESAGE_FORECASTER_*`` variables; raises ``SystemExit`` with usage on error."""
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(
        prog="presage-forecaster",
        description="TimesFM 2.5 model server for presage (micro-batching HTTP API).",
        epilog="Each flag can also be set with PRESAGE_FORECASTER_<FLAG> (upper case, '_' for '-').",
    )
    converters: dict[str, Callable[[str], object]] = {}
    for f in fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        annotation = str(f.type)  # already a string (from __future__ import annotations)
        if annotation == "bool":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=_HELP[f.name])
            converters[f.name] = _bool
        else:
            kind: Callable[[str], object] = {"int": int, "float": float}.get(annotation, str)
            parser.add_argument(flag, type=kind, default=None, help=_HELP[f.name])
            converters[f.name] = kind
    args = parser.parse_args(argv)
    values: dict[str, object] = {}
    for f in fields(Settings):
        given = getattr(args, f.name)
        if given is None and env_name(f.name) in environ:
            try:
                given = converters[f.name](environ[env_name(f.name)])
            except ValueError as err:
                parser.error(f"{env_name(f.name)}: {err}")
        if given is not None:
            values[f.name] = given
    if "model" not in values:
        parser.error(f"--model (or {env_name('model')}) is required")
    try:
        return Settings(**values)  # type: ignore[arg-type]
    except ValueError as err:
        parser.error(str(err))
