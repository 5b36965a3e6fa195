"""Regenerate the committed gRPC stubs from ``proto/externalscaler.proto``.

Run ``python -m presage_scaler.proto_gen.generate`` after editing the proto. grpcio-tools is a
build/test dependency only; the runtime needs grpcio and protobuf. ``tests/unit/test_proto_fresh.py``
regenerates into a temporary directory and fails when the committed files differ.

protoc writes ``import externalscaler_pb2`` into the ``_pb2_grpc`` module, which only works when
the output directory is on ``sys.path``; the import is rewritten to a relative one so the stubs
work as the ``presage_scaler.proto_gen`` package. The rewrite is a fixed string substitution, so
the output is byte-for-byte deterministic for a given grpcio-tools version.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parents[2] / "proto"
PACKAGE_DIR = Path(__file__).resolve().parent
PROTO_FILE = "externalscaler.proto"
GENERATED_FILES = ("externalscaler_pb2.py", "externalscaler_pb2.pyi", "externalscaler_pb2_grpc.py")

_ABSOLUTE_IMPORT = "import externalscaler_pb2 as externalscaler__pb2"
_RELATIVE_IMPORT = "from . import externalscaler_pb2 as externalscaler__pb2"


def generate(out_dir: Path = PACKAGE_DIR, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Run protoc (from grpcio-tools) into ``out_dir``; returns the files written."""
    from grpc_tools import protoc  # build-time only: imported here so the runtime never needs it

    out_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{proto_dir}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(proto_dir / PROTO_FILE),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed for {proto_dir / PROTO_FILE}")
    grpc_module = out_dir / "externalscaler_pb2_grpc.py"
    text = grpc_module.read_text(encoding="utf-8")
    if _ABSOLUTE_IMPORT not in text:
        raise RuntimeError(f"unexpected protoc output: {_ABSOLUTE_IMPORT!r} not found in {grpc_module}")
    grpc_module.write_text(text.replace(_ABSOLUTE_IMPORT, _RELATIVE_IMPORT), encoding="utf-8")
    return [out_dir / name for name in GENERATED_FILES]


def main() -> int:
    for path in generate():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
