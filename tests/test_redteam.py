"""The red team's candidates (tests/redteam_cases.py): every one must be rejected.

CPU cases run here through one worker pool for the module; GPU-only cases (their cheat exists
only where something is timed) carry the ``gpu`` mark and run where a GPU is visible. Any reason
counts: the test asks only that a cheating candidate earns no non-reject verdict.
"""

from __future__ import annotations

import pytest

from kernelgate import Candidate, ScreenOptions, Status, screen
from kernelgate.worker import WorkerPool
from tests.conftest import HAS_GPU
from tests.redteam_cases import CASES, gpu_problem, source

_IN_PROCESS = ("what the candidate's process reports about its own torch calls and launches is the only "
               "evidence without a GPU (no profiler), and this candidate rewrites or escapes it")
CPU_GAPS = {
    "c1_runner_check_silenced.py": _IN_PROCESS, "c1_guard_violations_cleared.py": _IN_PROCESS,
    "c1_oprecorder_blinded.py": _IN_PROCESS,
    "c1_gc_guard_detached.py": _IN_PROCESS, "c3_torchscript.py": _IN_PROCESS, "c3_vmap_rows.py": _IN_PROCESS,
    "c3_disable_torch_function.py": _IN_PROCESS, "c3_raw_thread.py": _IN_PROCESS,
    "c3_ctypes_memory.py": _IN_PROCESS,
    "c3_numpy_rowsum.py": "the work is done on the host, correctly; nothing is timed without a GPU",
    "c3_tolist_python.py": "the work is done on the host, correctly; nothing is timed without a GPU",
    "c4_static_only_zeros.py": "over the interpreter's size limit the outputs are never computed (untimed, "
                               "numerics not checked)",
}
"""Cases that get a non-reject verdict on the CPU machine (screened 2026-12-04), with why: known
gaps, each an expected failure that fails loudly (strict) once the gate catches it."""
GPU_GAPS = {
    "c5_slow_library.py": "its queued work did not slow the library (0.0379 ms event, library 0.0399 beside it and "
                          "alone on the H100): its honest accept",
    "c5_l2_prefetch.py": "work before the start event, below the wall check's floor",
    "c6_stream_moderate_forgery.py": "event times divided by 1.45: below the wall check's floor and the physical floor",
    "c6_stream_library_in_stream.py": "a slow kernel claiming the library's time / 1.45: below the wall check's floor",
}
"""Cases not rejected on a GPU at the committed policy (H100, 2026-12-05, 1c9e014: benchmarks/results/redteam_h100.json;
c1_event_ms_forged.py was rejected there by the physical floor, which is lower on the H200)."""
GPU_GAPS_BY_DEVICE = {
    "c1_event_ms_forged.py": "a lie below the wall check's floor: rejected by the physical floor on the H100, "
                             "accepted on the H200 (0de4bc3), whose floor is lower",
}
"""Not strict: whether these get through depends on the device's physical floor."""

OPTIONS = ScreenOptions(load_timeout_s=40, run_timeout_s=20)
GATED = ScreenOptions(load_timeout_s=40, run_timeout_s=20, stream_check=True)
"""The c8 cases are written against the gated stream, which is opt-in: they are screened with it on."""
NOT_YET_RUN = {name: "written against the gated stream (2026-12-06), not yet run on a GPU"
               for name, *_ in CASES if name.startswith("c8_")}
"""Not strict until their first GPU run says which the gate catches."""


@pytest.fixture(scope="module")
def pool():
    workers = WorkerPool(spares=1)
    yield workers
    workers.close()


def _params():
    gaps = GPU_GAPS if HAS_GPU else CPU_GAPS
    for name, cls, problem, entry, needs_gpu in CASES:
        marks = [pytest.mark.gpu] if needs_gpu else []
        if name in gaps:
            marks.append(pytest.mark.xfail(reason=gaps[name], strict=True))
        elif HAS_GPU and name in NOT_YET_RUN:
            marks.append(pytest.mark.xfail(reason=NOT_YET_RUN[name], strict=False))
        elif HAS_GPU and name in GPU_GAPS_BY_DEVICE:
            marks.append(pytest.mark.xfail(reason=GPU_GAPS_BY_DEVICE[name], strict=False))
        yield pytest.param(name, cls, problem, entry, needs_gpu, id=name.removesuffix(".py"), marks=marks)


@pytest.mark.parametrize("name, cls, problem, entry, needs_gpu", list(_params()))
def test_redteam_candidate_is_rejected(pool, name, cls, problem, entry, needs_gpu):
    target = gpu_problem(problem, name) if needs_gpu else problem
    verdict = screen(Candidate(source=source(name), entry=entry, name=name), target,
                     options=GATED if name.startswith("c8_") else OPTIONS, runner=pool)
    assert verdict.status is Status.reject, (
        f"{name} (class {cls}) got {verdict.status.value}: {verdict.summary}")


def test_manifest_covers_every_fixture_and_class():
    from tests.redteam_cases import FOLDER

    files = {p.name for p in FOLDER.glob("*.py")}
    listed = [row[0] for row in CASES]
    assert len(listed) == len(set(listed)) >= 30
    assert files == set(listed)
    assert {row[1] for row in CASES} >= {"1", "2", "3", "4", "5", "other"}
