"""Starting, loading and naming the model: readiness, local paths, the hub cache offline, pinned revisions."""

from __future__ import annotations

import shutil
import time

import httpx
import numpy as np
import pytest

from tests.harness.forecaster import ForecasterUnavailable

pytestmark = pytest.mark.integration

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_ready_only_once_loaded(forecaster_factory):
    server = forecaster_factory("--load-delay-seconds", "3", wait_ready=False)
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    for path in ("/readyz", "/v1/model"):
        response = httpx.get(f"{server.url}{path}")
        assert response.status_code == 503 and response.json()["error"]["code"] == "NotReady"
    early = httpx.post(f"{server.url}/v1/forecast", json={"horizon": 1, "series": [{"values": [1.0]}]})
    assert early.status_code == 503 and "loading" in early.json()["error"]["message"]
    server.wait("/readyz", time.monotonic() + 60)
    assert httpx.get(f"{server.url}/v1/model").status_code == 200


def test_missing_weights_exit_non_zero_with_the_path(forecaster_factory, tmp_path):
    empty = tmp_path / "weights"
    empty.mkdir()
    server = forecaster_factory(model=empty, start=False)
    with pytest.raises(ForecasterUnavailable) as caught:
        server.start(timeout=60)
    assert "exited with 1" in str(caught.value)
    assert f"{empty} holds no model.safetensors" in server.log_tail()


def test_hub_id_offline_without_a_cache_says_what_to_do(forecaster_factory, tmp_path):
    server = forecaster_factory(model="google/timesfm-2.5-200m-pytorch", start=False, env={"HF_HOME": str(tmp_path)})
    began = time.monotonic()
    with pytest.raises(ForecasterUnavailable):
        server.start(timeout=60)
    assert time.monotonic() - began < 30  # HF_HUB_OFFLINE=1: no retries against the network
    log = server.log_tail()
    assert "HF_HUB_OFFLINE=1" in log and "docs/forecaster.md" in log


def hub_cache(root, checkpoint, repo="google/timesfm-2.5-200m-pytorch", commit=COMMIT):
    """Lay the checkpoint out as huggingface_hub's cache does after a download of ``repo``."""
    base = root / "hub" / f"models--{repo.replace('/', '--')}"
    snapshot = base / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("model.safetensors", "config.json"):
        shutil.copy2(checkpoint / name, snapshot / name)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(commit)
    return snapshot


def test_hub_id_loads_from_a_preloaded_cache_and_reports_the_commit(forecaster_factory, tiny_checkpoint, tmp_path):
    hub_cache(tmp_path, tiny_checkpoint)
    server = forecaster_factory(model="google/timesfm-2.5-200m-pytorch", env={"HF_HOME": str(tmp_path)})
    model = httpx.get(f"{server.url}/v1/model").json()
    assert model["model"] == "google/timesfm-2.5-200m-pytorch"
    assert model["revision"] == COMMIT and model["source"] == "hub"


def test_pinned_revision_must_match(forecaster_factory, tiny_checkpoint, tmp_path):
    snapshot = hub_cache(tmp_path, tiny_checkpoint)
    ok = forecaster_factory("--revision", COMMIT[:12], model=snapshot)
    model = httpx.get(f"{ok.url}/v1/model").json()
    assert (model["model"], model["revision"]) == ("google/timesfm-2.5-200m-pytorch", COMMIT)
    ok.stop()
    wrong = forecaster_factory("--revision", "fedcba9876543210", model=snapshot, start=False)
    with pytest.raises(ForecasterUnavailable):
        wrong.start(timeout=60)
    assert f"--revision fedcba9876543210 is pinned, but {snapshot} is revision {COMMIT}" in wrong.log_tail()


def test_relative_path_model_id_and_digest_revision(forecaster_factory, tiny_checkpoint, tmp_path):
    plain = tmp_path / "ckpt" / "timesfm-small"
    plain.mkdir(parents=True)
    for name in ("model.safetensors", "config.json"):
        shutil.copy2(tiny_checkpoint / name, plain / name)  # no presage-checkpoint.json
    server = forecaster_factory(
        "--model-id",
        "acme/tfm-small",
        model="ckpt/timesfm-small",  # relative to cwd, and a valid-looking hub id: must not ask the hub
        env={"PRESAGE_FORECASTER_MAX_CONTEXT": "96"},
        cwd=tmp_path,
    )
    assert server.startup_seconds is not None and server.startup_seconds < 20
    model = httpx.get(f"{server.url}/v1/model").json()
    assert model["model"] == "acme/tfm-small" and model["maxContext"] == 96 and model["source"] == "directory"
    assert model["revision"] == "sha256:" + model["weightsSha256"][:16]


def test_bfloat16_is_close_to_float32(forecaster_factory):
    body = {"horizon": 12, "quantiles": [0.9], "series": [{"values": [100 + (i % 24) * 3.0 for i in range(200)]}]}
    answers = {}
    for dtype in ("float32", "bfloat16"):
        server = forecaster_factory("--dtype", dtype, "--max-context", "256", "--max-horizon", "16")
        assert httpx.get(f"{server.url}/v1/model").json()["dtype"] == dtype
        answers[dtype] = httpx.post(f"{server.url}/v1/forecast", json=body, timeout=30).json()["series"][0]
        server.stop()
    a, b = np.array(answers["float32"]["point"]), np.array(answers["bfloat16"]["point"])
    assert np.abs(a - b).max() <= 0.02 * np.abs(a).max()
    assert answers["float32"]["point"] != answers["bfloat16"]["point"]  # it really ran in bfloat16
