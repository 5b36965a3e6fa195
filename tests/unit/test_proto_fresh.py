"""The committed gRPC stubs must be what grpcio-tools generates from proto/ today."""

from __future__ import annotations

from pathlib import Path

import pytest

from presage_scaler.proto_gen import generate as gen

pytest.importorskip("grpc_tools")


def test_committed_stubs_match_proto(tmp_path: Path) -> None:
    written = gen.generate(out_dir=tmp_path)
    assert sorted(p.name for p in written) == sorted(gen.GENERATED_FILES)
    stale = [
        name for name in gen.GENERATED_FILES if (tmp_path / name).read_bytes() != (gen.PACKAGE_DIR / name).read_bytes()
    ]
    assert not stale, (
        f"stale generated stubs {stale}: run `python -m presage_scaler.proto_gen.generate` and commit the result "
        "(or install the grpcio-tools version pinned in pyproject.toml)"
    )


def test_generation_is_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    gen.generate(out_dir=first)
    gen.generate(out_dir=second)
    for name in gen.GENERATED_FILES:
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_grpc_module_imports_relatively() -> None:
    text = (gen.PACKAGE_DIR / "externalscaler_pb2_grpc.py").read_text(encoding="utf-8")
    assert "from . import externalscaler_pb2" in text
    assert "\nimport externalscaler_pb2" not in text
