"""docs/results.md is generated from benchmarks/results/*.json; these tests fail when the two disagree.

The page's staleness rule reads ``git``, so the check needs the repository's history (CI's fresh
clone has it); outside a git work tree the check is skipped and says so.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "results_page.py"


def _in_git_work_tree(path: Path) -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=path, capture_output=True, text=True)
    return done.returncode == 0 and done.stdout.strip() == "true"


def _load_script():
    spec = importlib.util.spec_from_file_location("results_page", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_results_page_matches_the_records():
    if not _in_git_work_tree(ROOT):
        pytest.skip("not a git work tree: the staleness rule needs the history")
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, (
        "docs/results.md and benchmarks/results/*.json disagree; run python scripts/results_page.py\n"
        + done.stdout[-4000:] + done.stderr[-2000:])


def _git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *env_args, *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_staleness_rule(tmp_path, monkeypatch):
    page = _load_script()
    repo = tmp_path / "repo"
    (repo / "kernelgate").mkdir(parents=True)
    (repo / "benchmarks" / "results").mkdir(parents=True)
    (repo / "docs").mkdir()
    (repo / "kernelgate" / "gate.py").write_text("x = 1\n")
    (repo / "benchmarks" / "study.py").write_text("")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    made_at = _git(repo, "rev-parse", "HEAD")
    monkeypatch.setattr(page, "ROOT", repo)
    command = "python benchmarks/study.py --out x.json"

    assert page.staleness(None, command) == (True, "stale: the record names no commit")
    assert page.staleness("0" * 40, command)[0] is True
    assert page.staleness(made_at, command) == (False, "current: no later commit changed code it depends on")

    (repo / "docs" / "notes.md").write_text("docs only\n")  # touches nothing the record depends on
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "docs")
    assert page.staleness(made_at, command)[0] is False

    (repo / "benchmarks" / "study.py").write_text("# changed\n")  # the script its command runs
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "script")
    first_change = _git(repo, "rev-parse", "HEAD")
    stale, why = page.staleness(made_at, command)
    assert stale and first_change[:10] in why

    (repo / "kernelgate" / "gate.py").write_text("x = 2\n")  # a later change does not move the named commit
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "gate")
    assert page.staleness(made_at, command) == (stale, why)

    record = {"command": command, "date": "2026-01-01T00:00:00+00:00", "device": {"name": "GPU"},
              "versions": {"commit": made_at}}
    (repo / "benchmarks" / "results" / "r.json").write_text(json.dumps(record))
    text = page.render()
    assert text == page.render()  # nothing from the clock or the run
    assert "## r.json" in text and f"`{made_at}`" in text and first_change[:10] in text
