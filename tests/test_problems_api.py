"""The Problem constructors as a first-time user calls them: relative paths, shape overrides, bad sizes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from kernelgate import Candidate, Problem, screen
from tests.conftest import EXAMPLES


def test_file_resolves_a_relative_path_against_the_callers_cwd(monkeypatch, tmp_path):
    monkeypatch.chdir(EXAMPLES)
    problem = Problem.file("problems/rowsum.py", shape={"ROWS": 8, "COLS": 128})
    assert Path(problem.name).is_absolute()
    assert Path(problem.name) == (EXAMPLES / "problems" / "rowsum.py").resolve()
    assert problem.shape == {"ROWS": 8, "COLS": 128}
    # The path was fixed at construction: moving elsewhere afterwards (as the worker does) still finds it.
    monkeypatch.chdir(tmp_path)
    source = (EXAMPLES / "triton" / "rowsum_good.py").read_text()
    verdict = screen(Candidate(source=source, name="rowsum_good.py"), problem)
    assert verdict.reason is None or verdict.reason.value != "problem_error", verdict.failure
    assert verdict.status.value in ("untimed", "repair", "accept", "structural"), (verdict.status, verdict.failure)
    assert verdict.numerics is not None and verdict.numerics.checked


def test_file_accepts_a_path_object(monkeypatch):
    monkeypatch.chdir(EXAMPLES / "problems")
    assert Problem.file(Path("rowsum.py")).name == os.path.join(str(EXAMPLES / "problems"), "rowsum.py")


@pytest.mark.parametrize("size", [0, -3])
def test_non_positive_sizes_are_refused_at_construction(size):
    with pytest.raises(ValidationError, match=rf"shape sizes must be integers >= 1, got batch_size={size}"):
        Problem.file("x.py", shape={"batch_size": size})
    with pytest.raises(ValidationError, match=rf"got rows={size}"):
        Problem.op("rowsum", rows=size)
    with pytest.raises(ValueError, match="shape sizes"):  # ValidationError is a ValueError
        Problem(kind="reference_op", name="rowsum", shape={"rows": 8, "cols": size})


def test_positive_sizes_pass():
    assert Problem.op("rowsum", rows=1, cols=128).shape == {"rows": 1, "cols": 128}
