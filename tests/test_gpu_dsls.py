"""TileLang and CUDA candidates on a GPU: built, run, checked and timed; the second build is cached.

Run on the device with `./kg test -m gpu`.
"""

from __future__ import annotations

import pytest

from kernelgate import Candidate, Problem, ScreenOptions, Status, screen
from kernelgate.models import Reason

from .conftest import EXAMPLES, fixture_source

pytestmark = pytest.mark.gpu

ROWSUM = str(EXAMPLES / "problems" / "rowsum.py")
TIMED = (Status.accept, Status.repair, Status.structural)


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    return ScreenOptions(timing_reps=10, run_timeout_s=120, compile_cache_dir=str(tmp_path_factory.mktemp("cc")))


def _screen(fixture, options, dtype=None):
    problem = Problem(kind="kernelbench_file", name=ROWSUM, dtype=dtype, shape={"ROWS": 2048, "COLS": 4096})
    return screen(Candidate(source=fixture_source(fixture), name=fixture), problem, options=options)


@pytest.mark.parametrize("fixture,dsl", [("tilelang_rowsum.py", "tilelang"), ("cuda_rowsum.py", "cuda")])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_runs_checks_and_times(fixture, dsl, dtype, options):
    v = _screen(fixture, options, dtype)
    assert v.status in TIMED, (v.summary, v.failure)
    assert v.dsl == dsl
    assert v.numerics.checked and v.numerics.passed and v.numerics.executor == "gpu"
    assert len(v.numerics.trials) == 5
    assert v.metrics.t_candidate_ms > 0 and v.metrics.u_candidate > 0
    (kernel,) = v.kernels
    assert kernel.launches == 1 and kernel.registers and kernel.target.startswith("cuda:90")


@pytest.mark.parametrize("fixture", ["tilelang_rowsum.py", "cuda_rowsum.py"])
def test_second_screen_reuses_the_compiled_code(fixture, options):
    first = _screen(fixture, options)
    again = _screen(fixture, options)
    assert again.status in TIMED and again.kernels[0].from_cache
    assert again.seconds["compile"] < max(first.seconds["compile"], 0.5)


def test_cuda_compile_error_on_the_gpu(options):
    v = _screen("cuda_compile_error.py", options)
    assert v.status is Status.reject and v.reason is Reason.compile_error
    assert "error" in v.failure.message


def test_launching_on_the_current_stream_is_not_a_side_stream(options):
    """``torch.cuda.current_stream()`` builds a Stream object around the stream that exists; only a
    new stream is a side stream (all six CUDA examples were rejected as side_stream before this)."""
    problem = Problem(kind="kernelbench_file", name=ROWSUM, shape={"ROWS": 2048, "COLS": 4096})
    source = (EXAMPLES / "cuda" / "rowsum_good.py").read_text()
    assert "current_stream" in source
    v = screen(Candidate(source=source, name="cuda_rowsum_good"), problem, options=options)
    assert v.status in TIMED, (v.summary, v.failure)


def test_ncu_pass_profiles_a_tilelang_candidate(options):
    # TileLang's import brings CUDA up; the profiled process must not take that for tampering
    from kernelgate import ncu

    if ncu.find_ncu() is None:
        pytest.skip("Nsight Compute (ncu) is not installed on this GPU machine")
    v = _screen("tilelang_rowsum.py", options.model_copy(update={"ncu": True}))
    assert v.ncu is not None, v.notes
    assert 0.8 <= v.metrics.dram_bytes / v.metrics.bytes_compulsory <= 1.5, v.ncu
