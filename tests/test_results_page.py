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


def test_truth_scores_and_throughput_modes_are_read_from_their_records():
    page = _load_script()
    truth = {"meta": {"command": "python benchmarks/truth.py --out t.json", "date": "2026-12-06", "git_commit": None,
                      "device": {"name": "GPU X"}},
             "summary": {"entries": 3, "labels": {"efficient": 2, "incorrect": 1}, "intent_matches_label": 1,
                         "with_intent_and_label": 2}, "entries": []}
    assert page.header(truth)["device"] == "GPU X" and page.header(truth)["date"] == "2026-12-06"
    assert "3 entries; labels: 2 efficient, 1 incorrect" in "\n".join(page.headline(truth))
    scored = {"gate_meta": {"date": "2026-12-07", "commit": "abc", "device": {"name": "GPU Y"}},
              "truth_file": "t.json", "gate_file": "g.json",
              "summary": {"in_sample": {"entries": 4, "counted": 4, "agree": 3, "disagree": 1,
                                        "correctness_axis": {"agree": 4, "disagree": 0},
                                        "efficiency_axis": {"agree": 3, "disagree": 1}}},
              "disagreements": [{"name": "k1", "corpus": "in_sample", "kind": "flagged an efficient kernel"}]}
    assert page.header(scored)["commit"] == "abc"
    text = "\n".join(page.headline(scored))
    assert "| in-sample | 4 | 4 | 3 | 1 | 4/0 | 3/1 |" in text and "k1 (in-sample): flagged an efficient kernel" in text
    modes = {"batch": {"candidates": 2, "distinct_cases": 2, "copies": 1},
             "modes": {"cold": {"settings": {"concurrency": 1}, "cache": {"files_before": 0, "files_after": 5},
                                "summary": {"candidates": 2, "wall_seconds": 10.0, "candidates_per_hour": 720.0,
                                            "by_status": {"accept": 2}, "median_stage_seconds": {"compile": 3.0}}}}}
    assert "| cold | 1 | - | 2 | 10 | 720 | 2 accept | 0 -> 5 | 3 | - |" in "\n".join(page.headline(modes))
