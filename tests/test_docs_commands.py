"""Every command the documentation shows is run: the fenced ``sh`` blocks of README.md and docs/*.md.

A block is run as one bash script (``set -e -o pipefail``) from a scratch directory holding a link
to the repository's ``examples/``, with this interpreter's ``bin`` first on the PATH (so
``cpsat-scheduler`` and ``python`` are the ones under test), and must end with the exit status the
doc states. The markers, each an HTML comment on the line right above a fence:

* ``<!-- not-run: REASON -->``: the block needs what a test run does not have (a live cluster,
  Go and the e2e control plane, minutes to hours); it is listed as skipped with REASON, never
  dropped silently.
* ``<!-- exit: N -->``: the block is expected to end with exit status N (default 0).

A fence that shows a command of this project (``cpsat-scheduler ...``, ``kubectl cpsat``,
``python -m adapters|solver|models|tests``) must be an ``sh`` block (run or marked) or a ``text``
block (a synopsis with placeholders, sample output: said so in the source), so a command cannot
hide in an unmarked block.

Every link between the pages (README.md, docs/*.md) must lead to a file and, with ``#anchor``, to
one of its headings; only the pages other branches write may be missing until they merge.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!--\s*(not-run|exit):\s*(.*?)\s*-->\s*$")
# A line that runs a command of this project (after an optional shell prompt or env assignments).
PROJECT_COMMAND = re.compile(
    r"^(\$\s+)?([A-Z_]+=\S+\s+)*(\S*/)?"
    r"(cpsat-scheduler\s|kubectl[- ]cpsat\b|python3?\s+-m\s+(adapters|solver|models|tests)\b)")
BLOCK_TIMEOUT_S = 120


@dataclass(frozen=True)
class Block:
    path: Path
    line: int          # 1-based line of the opening fence
    info: str          # the fence's info string ("sh", "text", "")
    text: str
    not_run: str | None
    exit_status: int

    @property
    def label(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, each with the markers right above its fence."""
    lines = path.read_text().split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```+)\s*(\S*)", lines[i])
        if not fence:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1))), None)
        assert end is not None, f"{path.relative_to(REPO)}:{i + 1}: a fence that never closes"
        not_run, status = None, 0
        k = i - 1
        while k >= 0 and (m := MARKER.match(lines[k])):
            if m.group(1) == "not-run":
                not_run = m.group(2) or "no reason given"
            else:
                status = int(m.group(2))
            k -= 1
        found.append(Block(path, i + 1, fence.group(2), "\n".join(lines[i + 1:end]), not_run, status))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [b for path in DOCS for b in blocks(path)]


def command_blocks() -> list[Block]:
    return [b for b in all_blocks() if b.info == "sh"]


def test_the_docs_are_there() -> None:
    names = {p.name for p in DOCS}
    assert {"README.md", "architecture.md", "rules.md", "model.md", "live.md", "repack.md",
            "performance.md", "configuration.md"} <= names
    assert len(command_blocks()) >= 10


def test_every_project_command_is_in_a_block_the_test_sees() -> None:
    hidden = [f"{b.label}: {line.strip()}" for b in all_blocks() if b.info not in ("sh", "text") and b.not_run is None
              for line in b.text.split("\n") if PROJECT_COMMAND.match(line.strip())]
    assert not hidden, "commands outside ```sh blocks (mark them, or make the block `text`):\n" + "\n".join(hidden)


def test_every_marker_sits_on_a_fence() -> None:
    stray = []
    for path in DOCS:
        lines = path.read_text().split("\n")
        for n, line in enumerate(lines):
            if MARKER.match(line):
                nxt = n + 1
                while nxt < len(lines) and MARKER.match(lines[nxt]):
                    nxt += 1
                if nxt >= len(lines) or not lines[nxt].startswith("```"):
                    stray.append(f"{path.relative_to(REPO)}:{n + 1}")
    assert not stray, f"markers not right above a fence: {stray}"


def test_the_setup_commands_stay_first() -> None:
    """CI runs the README's two set-up commands; they stay its first block, word for word."""
    first = blocks(REPO / "README.md")[0]
    assert first.text.split("\n") == [
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/cpsat-scheduler schedule",
        "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest",
    ]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs-commands")
    (root / "examples").symlink_to(REPO / "examples")
    return root


@pytest.mark.parametrize("block", command_blocks(), ids=lambda b: b.label)
def test_documented_command(block: Block, scratch: Path) -> None:
    if block.not_run is not None:
        pytest.skip(f"not run ({block.label}): {block.not_run}")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "cpsat-scheduler").exists(), f"no cpsat-scheduler beside {sys.executable}: pip install -e ."
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "CPSAT_DEBUG": ""}
    work = scratch / re.sub(r"\W", "_", block.label)
    work.mkdir()
    (work / "examples").symlink_to(REPO / "examples")
    run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=work, env=env,
                         capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    assert run.returncode == block.exit_status, (
        f"{block.label}: exit {run.returncode}, the doc says {block.exit_status}\n"
        f"--- stdout (end)\n{run.stdout[-2000:]}\n--- stderr (end)\n{run.stderr[-2000:]}")
    if block.exit_status == 2:
        # bad input: one clear line, never a traceback
        assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


# Pages other branches write (the operator questions, the kube-scheduler peer); linked from the
# index ahead of their merge, so only these may be missing.
PAGES_WRITTEN_ELSEWHERE = {"docs/operator-questions.md", "docs/kube-peer.md"}


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_every_link_between_the_pages_resolves() -> None:
    broken = []
    for path in DOCS:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            rel = str(dest.relative_to(REPO)) if dest.is_relative_to(REPO) else str(dest)
            if not dest.exists():
                if rel not in PAGES_WRITTEN_ELSEWHERE:
                    broken.append(f"{path.relative_to(REPO)}: {target}")
                continue
            if anchor and dest.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", dest.read_text(), flags=re.DOTALL),
                                      flags=re.MULTILINE)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{path.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_the_tours_gang_claim_holds() -> None:
    """The README's tour says: of the four PodGroups of topology-rack.yaml, the joint model
    places three (prep, train-a, train-b), greedy two."""
    import json

    bin_dir = Path(sys.executable).parent

    def gangs(*flags: str) -> list[str]:
        command = [str(bin_dir / "cpsat-scheduler"), "schedule", "examples/snapshots/gangs/topology-rack.yaml",
                   "-o", "json", *flags]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        return sorted({a["pod"].rsplit("-", 1)[0] for a in json.loads(done.stdout)["assignments"]})

    readme = (REPO / "README.md").read_text()
    assert "of four PodGroups, the joint model places three" in readme
    assert gangs("--time-limit", "5") == ["ml/prep", "ml/train-a", "ml/train-b"]
    assert gangs("--engine", "greedy") == ["ml/prep", "ml/train-a"]
