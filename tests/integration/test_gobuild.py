"""The harness's Go build cache (tests/harness/gobuild.py) on a module of a few lines, with the real `go`.

What the Kubernetes, KEDA and helm builds rely on: two test processes asking for the same build at
once build it once (the second waits on the lock and reuses it), and what lands in the cache is a
complete, working binary.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.harness.presage_cluster import REPO

pytestmark = pytest.mark.integration

# Run in a process of its own: build the module, note each time the source was needed (a build began).
BUILDER = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from tests.harness.gobuild import GoBuild, ensure_built

    module, builds = Path(sys.argv[1]), Path(sys.argv[2])

    def source() -> Path:
        with builds.open("a") as out:
            out.write("build\\n")
        time.sleep(2)  # hold the lock long enough that the other process must meet it
        return module

    build = GoBuild(what="hello", cache="gobuild-test", key="v0.0.1-test", source=source, commands={"hello": "."})
    print(ensure_built(build, RuntimeError) / "hello")
    """
)


def test_concurrent_requests_build_once(tmp_path: Path) -> None:
    module = tmp_path / "hello"
    module.mkdir()
    (module / "go.mod").write_text("module example.com/hello\n\ngo 1.22\n")
    (module / "main.go").write_text('package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n')
    builds = tmp_path / "builds.txt"
    env = os.environ | {"PRESAGE_CACHE": str(tmp_path / "cache")}

    processes = [
        subprocess.Popen(
            [sys.executable, "-c", BUILDER, str(module), str(builds)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], results
    [binary] = {out.strip() for out, _ in results}
    assert builds.read_text() == "build\n", "built more than once"
    assert any("waiting for it" in err for _, err in results), "the second process did not wait on the lock"
    assert subprocess.run([binary], capture_output=True, text=True, check=True).stdout == "hello\n"
    # Nothing half-built is left behind.
    assert [p.name for p in (tmp_path / "cache" / "gobuild-test").iterdir() if p.name.startswith(".tmp-")] == []
