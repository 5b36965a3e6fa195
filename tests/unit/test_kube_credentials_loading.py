"""Kubeconfig files that no loader should crash on: each is refused as a
:class:`~presage_scaler.clients.kube.credentials.KubeConfigError` naming the file, whichever way it is named
(``--kubeconfig`` or a ``KUBECONFIG`` list)."""

from __future__ import annotations

from pathlib import Path

import pytest

from presage_scaler.clients.kube import credentials as kube_config

DEPTH = 100_000
"""Far past Python's recursion limit (1,000), which the loader's YAML parser reaches one level at a time."""

NESTED = {
    "flow sequences": "[" * DEPTH + "]" * DEPTH,
    "flow mappings": "clusters: " + "{a: " * DEPTH + "1" + "}" * DEPTH,
    "block mappings": "".join(" " * level + "a:\n" for level in range(2_000)),
}


@pytest.mark.parametrize("text", NESTED.values(), ids=NESTED.keys())
def test_a_kubeconfig_nested_too_deeply_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(text)
    with pytest.raises(kube_config.KubeConfigError, match=f"kubeconfig {path}: nested too deeply"):
        kube_config.load(path)
    listed = f"{path}:{tmp_path / 'absent'}"
    monkeypatch.setenv("KUBECONFIG", listed)
    with pytest.raises(kube_config.KubeConfigError, match="nested too deeply"):
        kube_config.load()
