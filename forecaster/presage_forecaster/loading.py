"""Finding a TimesFM 2.5 checkpoint, loading it with ``timesfm``, and naming it (model id, revision).

A checkpoint is a directory holding ``model.safetensors`` (TimesFM 2.5's own format), given as a
path, or a Hugging Face hub id whose files are fetched into (or, with ``HF_HUB_OFFLINE=1``, found
in) the Hugging Face cache. Either way the weights are loaded by ``timesfm``'s own
``from_pretrained`` → ``load_checkpoint`` → ``load_state_dict(strict=True)`` path.

Architecture. ``timesfm`` 3.0.2 fixes the 200M architecture as a class attribute of its torch module
and its loader always builds that module. :class:`TimesFMCheckpoint` subclasses the loader with one
extra ``architecture`` argument (model width, feed-forward width, layers, heads); the hub mixin
``timesfm`` builds on stores ``__init__`` arguments in the checkpoint's ``config.json`` on save and
passes them back on load, so a checkpoint saved with a shrunk architecture loads as one. Without
that argument (every published checkpoint) the stock module is built. Patch lengths, quantile
outputs and the decode loop are never changed: a shrunk checkpoint runs exactly the 2.5 code.

Identity. The model id is ``--model-id``, else ``presage-checkpoint.json``'s ``model``, else the hub
id (also recognised in a Hugging Face cache path), else the directory name. The revision is the hub
commit the files came from, else ``presage-checkpoint.json``'s ``revision``, else ``--revision``. A
``--revision`` that disagrees with a known one fails the load: the pin is a check, not a label.
``weightsSha256`` (the digest of ``model.safetensors``) is reported in every case, so a behaviour
change can always be traced to the exact weights.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from timesfm import ForecastConfig
from timesfm.timesfm_2p5.timesfm_2p5_base import TimesFM_2p5_200M_Definition
from timesfm.timesfm_2p5.timesfm_2p5_torch import TimesFM_2p5_200M_torch, TimesFM_2p5_200M_torch_module

from presage_forecaster.settings import Settings

log = logging.getLogger("presage_forecaster")

WEIGHTS = "model.safetensors"
METADATA = "presage-checkpoint.json"
ARCHITECTURE_KEYS = ("model_dims", "hidden_dims", "num_layers", "num_heads")

_HF_SNAPSHOT = re.compile(r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<commit>[0-9a-f]{7,64})$")


class LoadError(RuntimeError):
    """The checkpoint could not be found, identified or loaded; the message says what to do."""


def definition(architecture: Mapping[str, int] | None) -> TimesFM_2p5_200M_Definition:
    """TimesFM 2.5's definition with the given widths, layers and heads (the 200M one by default)."""
    base = TimesFM_2p5_200M_Definition()
    if not architecture:
        return base
    unknown = set(architecture) - set(ARCHITECTURE_KEYS)
    if unknown:
        raise LoadError(f"unknown architecture keys {sorted(unknown)}; known: {list(ARCHITECTURE_KEYS)}")
    layer = base.stacked_transformers.transformer
    model_dims = int(architecture.get("model_dims", layer.model_dims))
    hidden_dims = int(architecture.get("hidden_dims", layer.hidden_dims))
    num_heads = int(architecture.get("num_heads", layer.num_heads))
    num_layers = int(architecture.get("num_layers", base.stacked_transformers.num_layers))
    if model_dims % num_heads or (model_dims // num_heads) % 2:
        raise LoadError(f"model_dims {model_dims} must split into {num_heads} heads of an even width")
    return dataclasses.replace(
        base,
        tokenizer=dataclasses.replace(base.tokenizer, hidden_dims=model_dims, output_dims=model_dims),
        stacked_transformers=dataclasses.replace(
            base.stacked_transformers,
            num_layers=num_layers,
            transformer=dataclasses.replace(layer, model_dims=model_dims, hidden_dims=hidden_dims, num_heads=num_heads),
        ),
        output_projection_point=dataclasses.replace(
            base.output_projection_point, input_dims=model_dims, hidden_dims=model_dims
        ),
        output_projection_quantiles=dataclasses.replace(
            base.output_projection_quantiles, input_dims=model_dims, hidden_dims=model_dims
        ),
    )


class TimesFMCheckpoint(TimesFM_2p5_200M_torch):
    """``timesfm``'s TimesFM 2.5 loader, plus an optional ``architecture`` kept in ``config.json``."""

    def __init__(
        self,
        torch_compile: bool = False,
        config: dict[str, Any] | None = None,
        architecture: dict[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        if not architecture:
            super().__init__(torch_compile=torch_compile, config=config, **kwargs)
        else:
            # The parent's __init__, with only the module's class-level definition swapped.
            module = type(
                "TimesFM_2p5_torch_module", (TimesFM_2p5_200M_torch_module,), {"config": definition(architecture)}
            )
            self.model = module()
            self.torch_compile = torch_compile
            if config is not None:
                self._hub_mixin_config = config
        self.architecture = dict(architecture or {})


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint directory and what it is called."""

    directory: Path
    model_id: str
    revision: str | None
    source: str  # "directory" or "hub"


@dataclass(frozen=True)
class LoadedModel:
    """A TimesFM 2.5 model ready for ``compiled_decode``, with what ``GET /v1/model`` reports about it."""

    model: TimesFMCheckpoint
    checkpoint: Checkpoint
    weights_sha256: str
    parameters: int
    device: str
    threads: int
    load_seconds: float

    @property
    def model_id(self) -> str:
        return self.checkpoint.model_id

    @property
    def revision(self) -> str:
        return self.checkpoint.revision or f"sha256:{self.weights_sha256[:16]}"


def _looks_like_path(model: str) -> bool:
    return model.startswith(("/", "./", "../", "~")) or os.path.exists(model)


def _metadata(directory: Path) -> dict[str, Any]:
    path = directory / METADATA
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise LoadError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise LoadError(f"{path} must hold a JSON object")
    return data


def resolve(settings: Settings) -> Checkpoint:
    """Where the weights are and what they are called; fetches them when given a hub id (and online)."""
    if _looks_like_path(settings.model):
        # Absolute, because timesfm first asks the hub about the name it is given: a relative
        # path like "weights/tfm" is a valid repo id and costs ~24 s of retries when online.
        directory = Path(settings.model).expanduser().resolve()
        if not directory.is_dir():
            raise LoadError(f"--model {settings.model}: no such directory ({directory})")
        if not (directory / WEIGHTS).is_file():
            present = sorted(p.name for p in directory.iterdir())[:20]
            raise LoadError(f"--model {directory} holds no {WEIGHTS} (found: {present or 'nothing'})")
        meta = _metadata(directory)
        snapshot = _HF_SNAPSHOT.search(directory.as_posix())
        hub_id = f"{snapshot['org']}/{snapshot['name']}" if snapshot else None
        model_id = settings.model_id or meta.get("model") or hub_id or directory.name
        found = (snapshot["commit"] if snapshot else None) or meta.get("revision")
        return Checkpoint(
            directory,
            str(model_id),
            _pinned(settings.revision, found, str(directory), hub=snapshot is not None),
            "directory",
        )
    return _from_hub(settings)


def _from_hub(settings: Settings) -> Checkpoint:
    from huggingface_hub import constants, hf_hub_download  # a dependency of timesfm

    try:
        path = Path(hf_hub_download(repo_id=settings.model, filename=WEIGHTS, revision=settings.revision))
    except Exception as err:
        offline = constants.HF_HUB_OFFLINE  # as huggingface_hub itself read HF_HUB_OFFLINE
        where = "the local Hugging Face cache (HF_HUB_OFFLINE=1)" if offline else "the Hugging Face hub"
        raise LoadError(
            f"--model {settings.model}: could not get {WEIGHTS} (revision {settings.revision or 'main'}) from "
            f"{where}: {type(err).__name__}: {err}. Mount a directory holding {WEIGHTS} and pass its path, "
            "or pre-load the hub cache; see docs/forecaster.md"
        ) from err
    snapshot = _HF_SNAPSHOT.search(path.parent.as_posix())
    commit = snapshot["commit"] if snapshot else None
    return Checkpoint(
        path.parent,
        settings.model_id or settings.model,
        _pinned(settings.revision, commit, settings.model, hub=True),
        "hub",
    )


def _pinned(pinned: str | None, found: str | None, where: str, *, hub: bool) -> str | None:
    """The revision to report, after checking a pinned one against what was found."""
    if not pinned or not found or found.startswith(pinned) or pinned.startswith(found):
        return found or pinned
    # On the hub a branch or tag name resolves to a commit, so only a commit-like pin can disagree.
    if not hub or re.fullmatch(r"[0-9a-f]{7,64}", pinned):
        raise LoadError(f"--revision {pinned} is pinned, but {where} is revision {found}")
    return found


def cpu_threads() -> int:
    """CPUs this process may use: its affinity, capped by a cgroup v2 CPU limit (a pod's limits.cpu)."""
    count = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            count = min(count, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, count)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def forecast_config(settings: Settings) -> ForecastConfig:
    """How the model is compiled. Normalisation and the non-negativity clamp are done per series by
    the engine instead (see engine.py), so that padding never changes a series' forecast."""
    return ForecastConfig(
        max_context=settings.compiled_context,
        max_horizon=settings.compiled_horizon,
        normalize_inputs=False,
        per_core_batch_size=settings.max_batch_size,
        use_continuous_quantile_head=True,
        force_flip_invariance=settings.flip_invariance,
        infer_is_positive=False,
        fix_quantile_crossing=True,
        return_backcast=False,
    )


def load(settings: Settings) -> LoadedModel:
    """Resolve, load and compile the checkpoint. Raises :class:`LoadError` with what to do."""
    began = time.monotonic()
    checkpoint = resolve(settings)
    threads = settings.threads or cpu_threads()
    torch.set_num_threads(threads)
    try:
        model = TimesFMCheckpoint.from_pretrained(str(checkpoint.directory), torch_compile=settings.torch_compile)
    except Exception as err:
        raise LoadError(f"loading {checkpoint.directory / WEIGHTS} failed: {type(err).__name__}: {err}") from err
    if settings.dtype == "bfloat16":
        model.model.to(torch.bfloat16)  # the engine runs the decode under autocast
    model.compile(forecast_config(settings))
    parameters = sum(p.numel() for p in model.model.parameters())
    loaded = LoadedModel(
        model=model,
        checkpoint=checkpoint,
        weights_sha256=sha256_of(checkpoint.directory / WEIGHTS),
        parameters=parameters,
        device=str(model.model.device),
        threads=threads,
        load_seconds=time.monotonic() - began,
    )
    log.info(
        "model loaded model=%s revision=%s parameters=%d device=%s dtype=%s threads=%d seconds=%.1f",
        loaded.model_id,
        loaded.revision,
        parameters,
        loaded.device,
        settings.dtype,
        threads,
        loaded.load_seconds,
    )
    return loaded
