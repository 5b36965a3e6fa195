"""The README is the front door: short, the cluster install near the top, no dated figures in it,
in docs/ or in the product's code, and its first command shows what it says it shows."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from presage_scaler.api.reasons import FAILURES
from presage_scaler.cli.main import main

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"
MAX_LINES = 200
INSTALL_WITHIN = 80
# A calendar date (a dated measurement or narrative); an RFC 3339 timestamp such as a field's
# example value (``2026-12-01T09:20:00Z``) is not one.
DATE = re.compile(r"20\d\d-[01]\d-[0-3]\d(?![T\d])")
# History and measurements have their own generated or dated homes.
DATED_HOMES = {REPOSITORY / "CHANGELOG.md"}


def readme_lines() -> list[str]:
    return README.read_text().splitlines()


def code_blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Every fenced block as (its language tag, its lines)."""
    blocks, language, body = [], None, []
    for line in lines:
        if line.startswith("```"):
            if language is None:
                language, body = line[3:].strip(), []
            else:
                blocks.append((language, body))
                language = None
        elif language is not None:
            body.append(line)
    return blocks


def test_readme_is_short_and_installs_on_a_cluster_near_the_top():
    lines = readme_lines()
    assert len(lines) <= MAX_LINES
    install = next(i for i, line in enumerate(lines) if line.startswith("helm install "))
    assert install < INSTALL_WITHIN


def test_no_dates_in_readme_docs_or_product_code():
    files = [README, *(REPOSITORY / "docs").rglob("*.md")]
    for package in ("presage_scaler", "forecaster/presage_forecaster"):
        files += (REPOSITORY / package).rglob("*.py")
    dated = [
        f"{path.relative_to(REPOSITORY)}:{number}"
        for path in files
        if path not in DATED_HOMES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if DATE.search(line)
    ]
    assert not dated, f"dated lines (history goes to CHANGELOG.md, figures to benchmarks/results/): {dated}"


def first_command() -> list[str]:
    """The README's first command: set up and run presage's main job."""
    shell = next(body for language, body in code_blocks(readme_lines()) if language == "sh")
    command = shell[0].split("&&")[-1]
    argv = shlex.split(command)
    assert argv[0] == ".venv/bin/presage"
    return argv[1:]


def test_first_command_shows_presage_ahead_of_static_and_the_hpa(capsys, tmp_path):
    """Run as a user would from the checkout: under-provisioned at most 1 %, at least 15 % cheaper than
    the static count, at most a fifth of the cost-matched HPA's under-provisioned time, less often
    short than the seasonal trigger at the same cost (what the README claims), and every output line
    the README shows."""
    argv = [str(REPOSITORY / a) if a.startswith("examples/") else a for a in first_command()]
    argv[argv.index("--out") + 1] = str(tmp_path)
    assert main(argv) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    summary = json.loads((tmp_path / "summary.json").read_text())
    presage, static, matched = summary["presage"], summary["static"], summary["reactive_cost_matched"]
    assert presage["under_provisioned_pct"] <= 1.0
    assert presage["replica_hours"] <= 0.85 * static["replica_hours"]
    assert presage["under_provisioned_pct"] <= matched["under_provisioned_pct"] / 5
    # At presage's cost, the hand-written seasonal trigger is short more often than presage.
    trigger = summary["seasonal_trigger_cost_matched"]
    assert presage["under_provisioned_pct"] < trigger["under_provisioned_pct"]

    shown = next(body for language, body in code_blocks(readme_lines()) if not language)
    shown = [line.rstrip() for line in shown if line.strip()]
    assert len(shown) >= 7
    missing = [line for line in shown if line not in printed]
    assert not missing, f"the README shows lines its first command no longer prints: {missing}"


def test_the_spiky_example_prints_what_the_readme_shows(capsys, tmp_path):
    text = README.read_text()
    match = re.search(r"`presage backtest\s+(examples/nab_elb\S+[^`]*)`", text)
    assert match is not None
    argv = shlex.split(match.group(1).replace("\n", " "))
    argv[0] = str(REPOSITORY / argv[0])
    argv[argv.index("--out") + 1] = str(tmp_path)
    assert main(["backtest", *argv]) == 0
    printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    blocks = [body for language, body in code_blocks(readme_lines()) if not language]
    shown = next(body for body in blocks if any("presage tune" in line for line in body))
    missing = [line for line in shown if line.strip() and line.rstrip() not in printed]
    assert len(shown) == 2 and not missing, f"the README shows lines the spiky example no longer prints: {missing}"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCUMENTS = ["README.md", "CHANGELOG.md", "examples/README.md", "benchmarks/README.md", "docs/*.md"]


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for a Markdown file's headings."""
    slugs = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slugs.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return slugs


def test_every_relative_link_in_the_docs_resolves():
    broken = []
    for pattern in DOCUMENTS:
        for document in sorted(REPOSITORY.glob(pattern)):
            for target in LINK.findall(document.read_text()):
                if target.startswith(("http://", "https://", "mailto:")):
                    continue
                name, _, anchor = target.partition("#")
                path = (document.parent / name).resolve() if name else document
                if not path.exists():
                    broken.append(f"{document.relative_to(REPOSITORY)}: {target}")
                elif anchor and path.suffix == ".md" and anchor not in anchors(path):
                    broken.append(f"{document.relative_to(REPOSITORY)}: {target} (no such heading)")
    assert not broken, f"links that lead nowhere: {broken}"


def test_troubleshooting_covers_every_failure_reason():
    """docs/operations.md says what to do for every reason a scaler can be Degraded with."""
    text = (REPOSITORY / "docs" / "operations.md").read_text()
    table = text[text.index("## Troubleshooting by reason") :]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert not {str(r) for r in FAILURES} - named
