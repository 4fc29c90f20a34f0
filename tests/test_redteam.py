"""The red team's candidates (tests/redteam_cases.py): every one must be rejected.

CPU cases run here through one worker pool for the module; GPU-only cases (their cheat exists
only where something is timed) carry the ``gpu`` mark and run where a GPU is visible. Any reason
counts: the test asks only that a cheating candidate earns no non-reject verdict.
"""

from __future__ import annotations

import pytest

from kernelgate import Candidate, ScreenOptions, Status, screen
from kernelgate.worker import WorkerPool
from tests.redteam_cases import CASES, gpu_problem, source

OPTIONS = ScreenOptions(load_timeout_s=40, run_timeout_s=20)


@pytest.fixture(scope="module")
def pool():
    workers = WorkerPool(spares=1)
    yield workers
    workers.close()


def _params():
    for name, cls, problem, entry, needs_gpu in CASES:
        marks = [pytest.mark.gpu] if needs_gpu else []
        yield pytest.param(name, cls, problem, entry, needs_gpu, id=name.removesuffix(".py"), marks=marks)


@pytest.mark.parametrize("name, cls, problem, entry, needs_gpu", list(_params()))
def test_redteam_candidate_is_rejected(pool, name, cls, problem, entry, needs_gpu):
    target = gpu_problem(problem, name) if needs_gpu else problem
    verdict = screen(Candidate(source=source(name), entry=entry, name=name), target, options=OPTIONS,
                     runner=pool)
    assert verdict.status is Status.reject, (
        f"{name} (class {cls}) got {verdict.status.value}: {verdict.summary}")


def test_manifest_covers_every_fixture_and_class():
    from tests.redteam_cases import FOLDER

    files = {p.name for p in FOLDER.glob("*.py")}
    listed = [row[0] for row in CASES]
    assert len(listed) == len(set(listed)) >= 30
    assert files == set(listed)
    assert {row[1] for row in CASES} >= {"1", "2", "3", "4", "5", "other"}
