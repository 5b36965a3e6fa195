"""Build a TimesFM 2.5 checkpoint with random weights, for tests and benchmarks (no download).

``python -m presage_forecaster.testing_checkpoint DIR [--seed N] [--full-size]`` writes ``DIR`` as
``timesfm`` saves a checkpoint (``model.safetensors`` + ``config.json``) plus a
``presage-checkpoint.json`` naming it. By default the architecture is shrunk (:data:`TINY`: 761k
parameters, 3 MB, loads in well under a second); ``--full-size`` keeps the 200M
architecture, for measuring speed and memory without the published weights. The forecasts of
random weights mean nothing; the code path — loading, padding, decoding, quantiles — is the real one.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import torch

from presage_forecaster.loading import METADATA, TimesFMCheckpoint

TINY: dict[str, int] = {"model_dims": 32, "hidden_dims": 64, "num_layers": 2, "num_heads": 2}
"""A shrunk TimesFM 2.5: two layers of width 32 (the 200M model: twenty of 1280)."""


def build(directory: Path, *, seed: int = 0, full_size: bool = False) -> Path:
    """Write a random-weight checkpoint to ``directory`` and return it."""
    torch.manual_seed(seed)
    architecture = None if full_size else dict(TINY)
    model = TimesFMCheckpoint(torch_compile=False, architecture=architecture)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    size = "200m" if full_size else "tiny"
    (directory / METADATA).write_text(
        json.dumps({"model": f"presage-testing/timesfm-2.5-{size}-random", "revision": f"seed-{seed}"}, indent=2) + "\n"
    )
    return directory


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--full-size", action="store_true", help="the 200M architecture (~925 MB)")
    args = parser.parse_args(argv)
    print(build(args.directory, seed=args.seed, full_size=args.full_size))


if __name__ == "__main__":
    main()
