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
GPU_GAPS: dict[str, str] = {}
"""Cases not rejected on a GPU at the committed policy. The four that were at 1c9e014 (H100,
2026-12-05: c5_slow_library, c5_l2_prefetch, c6_stream_moderate_forgery, c6_stream_library_in_stream)
are ``tampering`` since the harness's class dicts are watched (H100, 2026-12-06, 9a385a5)."""
GPU_GAPS_BY_DEVICE = {
    "c1_event_ms_forged.py": "a lie below the wall check's floor: rejected by the physical floor on the H100, "
                             "accepted on the H200 (0de4bc3), whose floor is lower",
}
"""Not strict: whether these get through depends on the device's physical floor."""

OPTIONS = ScreenOptions(load_timeout_s=40, run_timeout_s=20)
GATED = ScreenOptions(load_timeout_s=40, run_timeout_s=20, stream_check=True)
"""The c8 cases are written against the gated stream, which is opt-in: they are screened with it on."""
GATED_GAPS: dict[str, str] = {}
"""Gated-stream cases not rejected. ``c8_side_stream_early`` was accepted on an H100 (2026-12-06,
9a385a5), a forgery within the stream's tolerance; it and five other c8 cases make their side
stream from ``torch._C._CudaStreamBase`` by name, which is now a static reject (``raw_stream``),
so it no longer reaches the stream (with a computed name its technique still would: docs/hostile.md)."""


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
        elif HAS_GPU and name in GATED_GAPS:
            marks.append(pytest.mark.xfail(reason=GATED_GAPS[name], strict=False))
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
