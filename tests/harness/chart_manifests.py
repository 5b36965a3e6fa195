"""The kustomize manifests in ``manifests/`` are generated from the Helm chart, so the two cannot drift.

Each generated file is one chart template rendered by the real ``helm template`` with the chart's
default values (the forecaster's with ``forecaster.enabled=true``) and the images at the placeholder
registry the docs use (:data:`tests.harness.helm.IMAGES`; an overlay's ``images:`` entry points them
at yours) as release ``presage`` in namespace ``presage-system``, labels included: with the ownership
annotations ``kustomization.yaml`` adds, they are what ``helm install presage charts/presage -n
presage-system`` checks before taking a kustomize install over, and the selectors match the chart's.
Comments in the templates come through. What the chart has no template for stays hand-written:
``namespace.yaml``, the kustomizations and the ownership transformer, ``examples/`` and
``forecaster/weights-loader.yaml``; the CRDs are ``crds/``.

Regenerate after changing the chart (builds helm on first use)::

    .venv/bin/python -m tests.harness.chart_manifests

The tests fail while a generated file differs from what the chart renders.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from tests.harness.helm import CHART, IMAGE_FLAGS, Helm, ensure_helm

REPO = CHART.parents[1]
RELEASE = "presage"
NAMESPACE = "presage-system"

# manifests/ file -> the chart template it is rendered from.
GENERATED = {
    "manifests/serviceaccount.yaml": "templates/serviceaccount.yaml",
    "manifests/rbac.yaml": "templates/rbac.yaml",
    "manifests/deployment.yaml": "templates/deployment.yaml",
    "manifests/service.yaml": "templates/service.yaml",
    "manifests/networkpolicy.yaml": "templates/networkpolicy.yaml",
    "manifests/poddisruptionbudget.yaml": "templates/poddisruptionbudget.yaml",
    "manifests/forecastbackend-default.yaml": "templates/forecastbackend-default.yaml",
    "manifests/advise-rbac.yaml": "templates/advise-rbac.yaml",
    "manifests/advise-cronjob.yaml": "templates/advise-cronjob.yaml",
    "manifests/forecaster/deployment.yaml": "templates/forecaster/deployment.yaml",
    "manifests/forecaster/service.yaml": "templates/forecaster/service.yaml",
    "manifests/forecaster/networkpolicy.yaml": "templates/forecaster/networkpolicy.yaml",
    "manifests/forecaster/weights-pvc.yaml": "templates/forecaster/weights-pvc.yaml",
}

_SOURCE = re.compile(rf"^---\n# Source: {re.escape(CHART.name)}/(\S+)\n", re.MULTILINE)


def _by_template(rendered: str) -> dict[str, list[str]]:
    """``helm template`` output split into the documents of each template."""
    documents: dict[str, list[str]] = {}
    pieces = _SOURCE.split(rendered)
    # split() gives [before, template, document, template, document, ...].
    for template, document in zip(pieces[1::2], pieces[2::2], strict=True):
        documents.setdefault(template, []).append(document.strip("\n") + "\n")
    return documents


def render_manifests(helm: Helm) -> dict[str, str]:
    """Repository-relative path -> content of every generated manifest."""
    rendered = helm(
        "template", RELEASE, str(CHART), f"--namespace={NAMESPACE}", "--set=forecaster.enabled=true", *IMAGE_FLAGS
    )
    documents = _by_template(rendered.stdout)
    files = {}
    for path, template in GENERATED.items():
        if template not in documents:
            raise KeyError(f"helm template rendered nothing for {template}")
        header = (
            f"# Generated from charts/presage/{template} (default values, images at registry.example.com) by\n"
            "# `python -m tests.harness.chart_manifests`: edit the chart, then regenerate.\n"
        )
        files[path] = header + "---\n".join(documents[template])
    return files


def stale_manifests(helm: Helm) -> list[str]:
    """Generated files whose content differs from what the chart renders now."""
    return [
        path
        for path, content in render_manifests(helm).items()
        if not (REPO / path).exists() or (REPO / path).read_text() != content
    ]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="presage-helm-") as home:
        files = render_manifests(Helm(ensure_helm(), Path(home)))
    for path, content in files.items():
        target = REPO / path
        if not target.exists() or target.read_text() != content:
            target.write_text(content)
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
