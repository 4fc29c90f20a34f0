"""The judge's stages: the rules that read what the candidate's process reports."""

from __future__ import annotations

import os

import pytest
import torch

from kernelgate.models import Problem, Reason
from kernelgate.problems import build_problem
from kernelgate.worker.protocol import CallReply
from kernelgate.worker.stages import _meta_failure, _other_shape
from tests.conftest import FIXTURES

REF = torch.zeros(4, 8)


def _reply(**meta) -> CallReply:
    base = {"type_name": "torch.Tensor", "plain_tensor": True, "shape": [4, 8], "dtype": "float32", "device": "cpu"}
    return CallReply.model_validate({"type": "call", "meta": {**base, **meta}, "copied": True})


def test_an_honest_output_passes_the_meta_rules():
    assert _meta_failure("t", _reply(), REF) is None


def test_meta_rules_name_the_reason():
    assert _meta_failure("t", _reply(plain_tensor=False, type_name="x.Lazy"), REF).reason is Reason.wrong_output_type
    assert _meta_failure("t", _reply(shape=[8, 4]), REF).reason is Reason.wrong_shape
    assert _meta_failure("t", _reply(dtype="float16"), REF).reason is Reason.wrong_dtype
    assert _meta_failure("t", _reply(strided=False), REF).reason is Reason.wrong_output_type
    no_copy = CallReply.model_validate({**_reply().model_dump(), "copied": False})
    assert _meta_failure("t", no_copy, REF).reason is Reason.wrong_output_type
    assert _meta_failure("t", CallReply(), REF).reason is Reason.wrong_output_type


def test_a_kernelbench_file_is_tried_at_a_shape_off_the_usual_tiles():
    path = FIXTURES / "kernelbench_all" / "KernelBench" / "level1" / "40_LayerNorm.py"
    spec = Problem.file(str(path), shape={"batch_size": 4, "features": 4, "dim1": 8, "dim2": 8})
    other = _other_shape(spec, build_problem(spec, torch.device("cpu"), 0))
    assert other is not None
    changed = {k: v for k, v in other.shape.items() if spec.shape.get(k) != v}
    assert list(changed) == ["batch_size"]  # the others size the LayerNorm's parameters
    assert changed["batch_size"] % 8 != 0


def test_a_catalogue_op_with_a_literal_shape_branch_is_tried_one_larger():
    spec = Problem.op("rowsum", rows=16, cols=256)
    other = _other_shape(spec, build_problem(spec, torch.device("cpu"), 0))
    assert other.shape == {"rows": 17, "cols": 257}


def test_a_kernelbench_model_gets_its_tuple_init_arguments_and_the_reference_state(tmp_path):
    """Level 2's conv + bias: ``bias_shape`` is a tuple; the wrapper copies the judge's parameters."""
    import sys

    from kernelgate import Candidate, Status, screen

    import subprocess

    path = FIXTURES / "kernelbench_all" / "KernelBench" / "level2" / "1_Conv2D_ReLU_BiasAdd.py"
    root = FIXTURES.parent.parent
    kept = tmp_path / "candidates"
    subprocess.run([sys.executable, str(root / "benchmarks" / "kernelbench_all.py"), "--kernelbench",  # its wrapper
                    str(FIXTURES / "kernelbench_all"), "--only", "2/1", "--fake-gate", "--keep-candidates", str(kept),
                    "--out", str(tmp_path / "out.json")], check=True, capture_output=True, timeout=300, cwd=root)
    wrapper = (kept / "level2_1_Conv2D_ReLU_BiasAdd_candidate.py").read_text()
    spec = Problem.file(str(path), shape={"batch_size": 2, "in_channels": 3, "height": 8, "width": 8})
    verdict = screen(Candidate(source=wrapper, name="conv_wrapper"), spec)
    assert verdict.numerics is not None and verdict.numerics.state_copied is True
    assert verdict.status is Status.reject and verdict.reason is Reason.library_op_used, verdict.summary


def test_a_reference_that_fails_is_the_problems_fault_not_the_gates():
    """Overriding out_channels leaves the file's derived bias_shape behind: a ProblemError that says so."""
    import pytest

    from kernelgate import Candidate, screen
    from kernelgate.errors import ProblemError

    path = FIXTURES / "kernelbench_all" / "KernelBench" / "level2" / "1_Conv2D_ReLU_BiasAdd.py"
    spec = Problem.file(str(path), shape={"batch_size": 2, "in_channels": 3, "out_channels": 4, "height": 8,
                                          "width": 8})
    with pytest.raises(ProblemError, match="the reference failed"):
        screen(Candidate(source=(FIXTURES / "rowsum_good.py").read_text(), entry="kernel"), spec)


def _timing_with_library(library_ms: float):
    from kernelgate.models import TimeStats, TimingReport

    def side(ms: float) -> TimeStats:
        return TimeStats(median_ms=ms, p20_ms=ms, p80_ms=ms, min_ms=ms, reps=10, wall_median_ms=ms)

    return TimingReport(candidate=side(0.05), library=side(library_ms), l2_flush_bytes=1, input_sets=1, rounds=1,
                        launch_overhead_ms=0.5)


@pytest.mark.parametrize("cpu_ms, library_ms, rejected", [
    (40.0, 0.03, True),     # numpy on the host: 40 ms of CPU per call beside a 30 us library op
    (3.0, 0.03, False),     # a wrapper's Python: under the 5 ms floor
    (8.0, 10.0, False),     # under the library's own time: not host work by this rule
    (25.0, 10.0, True),
])
def test_host_work_is_cpu_time_per_timed_call_beyond_the_harness(cpu_ms, library_ms, rejected):
    from kernelgate.models import Reason
    from kernelgate.worker.stages import CandidateFailure, Screen

    screen = Screen.__new__(Screen)  # only the fields _host_work reads
    screen.timed_requests, screen.calibration_cpu_ms = 20, 0.4
    screen.timed_cpu_s = 20 * (cpu_ms + 0.4) / 1e3
    timing = _timing_with_library(library_ms)
    if rejected:
        with pytest.raises(CandidateFailure) as caught:
            screen._host_work(timing)
        assert caught.value.failure.reason is Reason.host_work and "CPU time" in caught.value.failure.message
    else:
        screen._host_work(timing)
    assert timing.candidate_cpu_ms == pytest.approx(cpu_ms)


def test_reading_input_sized_device_data_to_the_host_is_host_work():
    from kernelgate.worker.stages import CandidateFailure, Screen

    screen = Screen.__new__(Screen)
    screen.cuda, screen.largest, screen.hits = True, 4096, []
    screen._host_reads(CallReply(type="call", to_host=[("tolist", 16)]), "forward", "numerics")  # a few offsets
    with pytest.raises(CandidateFailure) as caught:  # .cpu() of the whole input, in two halves
        screen._host_reads(CallReply(type="call", to_host=[("cpu", 2048), ("numpy", 2048)]), "forward", "numerics")
    assert caught.value.failure.reason is Reason.host_work
    screen.cuda = False  # without a GPU every tensor is on the host: nothing to tell
    screen._host_reads(CallReply(type="call", to_host=[("cpu", 4096)]), "forward", "numerics")


def test_released_tensors_ride_on_the_next_request_and_are_forgotten_after_its_reply(tmp_path):
    from types import SimpleNamespace

    from kernelgate.worker.protocol import SharedSpace, ref_key
    from kernelgate.worker.stages import Remote

    (tmp_path / "s").mkdir()
    space = SharedSpace(torch.device("cpu"), tmp_path / "s")
    asked: list[dict] = []
    link = SimpleNamespace(ask=lambda request, **_: asked.append(request) or CallReply(type="call"))
    screen = SimpleNamespace(space=space, link=link, cuda=False, opts=SimpleNamespace(load_timeout_s=10))
    remote = Remote(screen)
    a, b = space.copy_of(torch.ones(4)), space.copy_of(torch.zeros(4))
    ref_a = remote.arg(a)["ref"]
    remote.arg(b)
    remote.release([a, torch.ones(2)])  # a tensor never shared is ignored
    assert os.path.exists(a._kernelgate_path)  # not before the candidate's process has let go
    remote.ask({"type": "ping"}, "probes", deadline_s=5)
    assert asked[-1]["release"] == [ref_key(ref_a)]
    assert not os.path.exists(a._kernelgate_path) and os.path.exists(b._kernelgate_path)
    remote.ask({"type": "ping"}, "probes", deadline_s=5)
    assert "release" not in asked[-1]  # said once


def test_drop_released_frees_released_tensors_before_the_judge_allocates_again(tmp_path):
    """Between a large problem's trials nothing else is asked before the next reference allocates:
    the released buffers are let go of by a request of their own, and only when there are some."""
    from types import SimpleNamespace

    from kernelgate.worker.protocol import SharedSpace
    from kernelgate.worker.stages import Remote

    (tmp_path / "s").mkdir()
    space = SharedSpace(torch.device("cpu"), tmp_path / "s")
    asked: list[dict] = []
    link = SimpleNamespace(ask=lambda request, **_: asked.append(request) or CallReply(type="call"))
    screen = SimpleNamespace(space=space, link=link, cuda=False, call_deadline_s=5,
                             opts=SimpleNamespace(load_timeout_s=10))
    remote = Remote(screen)
    remote.drop_released("numerics")
    assert asked == []  # nothing pending: no request
    a = space.copy_of(torch.ones(4))
    remote.arg(a)
    remote.release([a])
    remote.drop_released("numerics")
    assert [r["type"] for r in asked] == ["ping"] and len(asked[0]["release"]) == 1
    assert not os.path.exists(a._kernelgate_path)


@pytest.mark.parametrize("fixture, status, reason", [
    ("rowsum_good.py", None, None),
    # freed buffers come back at the same addresses: a pointer-keyed cache replays a stale result
    # in the very next trial (numerics_mismatch), or a probe sees it (output_caching)
    ("exploits/pointer_cache.py", "reject", ("numerics_mismatch", "output_caching")),
    ("exploits/call_count_switch.py", "reject", ("recheck_mismatch", "numerics_mismatch")),
])
def test_the_large_problem_path_frees_buffers_and_still_catches(fixture, status, reason):
    """``keep_alive_bytes=0`` puts a small problem on the large-problem path: buffers released after
    each trial and probe (real worker processes, the candidate drops its mappings), probes checked
    against the library in its own dtype. Honest kernels pass; history cheats are still caught."""
    from kernelgate import Candidate, ScreenOptions, screen
    from tests.hostile_cases import PROBLEM

    source = (FIXTURES / fixture).read_text()
    verdict = screen(Candidate(source=source, entry="kernel", name=fixture), PROBLEM,
                     options=ScreenOptions(keep_alive_bytes=0, load_timeout_s=60, run_timeout_s=60))
    if status is None:
        assert verdict.status.value != "reject", verdict.summary
        assert verdict.numerics.passed
    else:
        assert verdict.status.value == status and verdict.reason.value in reason, verdict.summary


def _cuda_oom() -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity "
                                  "of 79.18 GiB of which 2.48 GiB is free.")


def test_a_judge_crowded_out_by_the_candidates_memory_is_a_reject_naming_both():
    """The candidate's process held over CROWDING_FACTOR times the footprint when the judge's own
    allocation failed: the candidate's fault, with both figures; directly or wrapped by a problem step."""
    from kernelgate.errors import ProblemError
    from kernelgate.worker.stages import CROWDING_FACTOR, crowded_out

    gb = 10 ** 9
    device = 80 * gb
    failure = crowded_out(_cuda_oom(), "numerics", candidate_held=60 * gb, footprint=2 * gb, judge_peak=9 * gb,
                          device_bytes=device)
    assert failure is not None and failure.failure.reason is Reason.out_of_memory
    message = failure.failure.message
    assert "60.00 GB" in message and "30.0x" in message and "2.00 GB" in message and "9.00 GB" in message
    assert "Tried to allocate 6.00 GiB" in message and failure.failure.stage == "numerics"
    try:
        raise ProblemError("the problem's inputs could not be made: OutOfMemoryError") from _cuda_oom()
    except ProblemError as wrapped:
        assert crowded_out(wrapped, "numerics", candidate_held=60 * gb, footprint=2 * gb, judge_peak=0,
                           device_bytes=device) is not None
    at_limit = CROWDING_FACTOR * 4 * gb  # at the factor, with no sizes to weigh a fair share against
    assert crowded_out(torch.OutOfMemoryError("CUDA out of memory."), "numerics", candidate_held=at_limit,
                       footprint=4 * gb, judge_peak=0, device_bytes=device) is None
    unknown = crowded_out(_cuda_oom(), "numerics", candidate_held=60 * gb, footprint=0, judge_peak=0, device_bytes=device)
    assert unknown is not None and "footprint not yet known" in unknown.failure.message


def test_a_small_problems_candidate_holding_a_cuda_context_is_not_crowding():
    """CROWDING_FLOOR_SHARE: 4x a 10 MB footprint is less than a CUDA context; the device's eighth rules."""
    from kernelgate.worker.stages import crowded_out

    gb = 10 ** 9
    assert crowded_out(_cuda_oom(), "numerics", candidate_held=int(0.6 * gb), footprint=10 ** 7, judge_peak=0,
                       device_bytes=80 * gb) is None


@pytest.mark.parametrize("candidate_peak, footprint, error", [
    (5 * 10 ** 9, 2 * 10 ** 9, "oom"),        # an honest candidate's share: the gate's own shortfall
    (None, 2 * 10 ** 9, "oom"),               # the candidate's memory is not known
    (9 * 10 ** 9, 0, "oom"),                  # footprint not known yet, under the device's eighth
    (60 * 10 ** 9, 2 * 10 ** 9, "other"),     # a problem step that failed for another reason
])
def test_a_judge_out_of_memory_otherwise_stays_a_fault_of_the_gate(candidate_peak, footprint, error):
    from kernelgate.errors import ProblemError
    from kernelgate.worker.stages import crowded_out

    exc = _cuda_oom() if error == "oom" else ProblemError("the reference failed: ValueError")
    assert crowded_out(exc, "numerics", candidate_held=candidate_peak, footprint=footprint, judge_peak=0,
                       device_bytes=80 * 10 ** 9) is None


def test_a_candidate_under_the_factor_that_leaves_the_judge_short_is_crowding_where_a_fair_share_would_fit():
    """H100, 2026-12-07 (c9_hoard_under_factor): a 12 GiB row sum's candidate held 43.8 GiB, 3.6x the
    footprint; the judge's 24 GiB fp64 input did not fit in the 22.8 GiB left. Beside a candidate
    holding twice the footprint it would have: a reject. Where even that would not have left room,
    the shortfall stays the gate's own."""
    from kernelgate.worker.stages import FAIR_SHARE_FACTOR, crowded_out

    gib = 1 << 30
    footprint = 12 * gib + (1 << 20)
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 24.00 GiB. GPU 0 has a total capacity of "
                                 "79.18 GiB of which 22.81 GiB is free. Including non-PyTorch memory, ...")
    held = int(43.76 * gib)
    failure = crowded_out(oom, "numerics", candidate_held=held, footprint=footprint, judge_peak=12 * gib,
                          device_bytes=int(79.18 * gib))
    assert failure is not None and failure.failure.reason is Reason.out_of_memory
    assert "would have fit had the candidate's process held" in failure.failure.message
    assert f"{FAIR_SHARE_FACTOR * footprint / 1e9:.2f} GB" in failure.failure.message
    too_big = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 60.00 GiB. GPU 0 has a total capacity "
                                     "of 79.18 GiB of which 2.00 GiB is free.")
    assert crowded_out(too_big, "numerics", candidate_held=held, footprint=footprint, judge_peak=0,
                       device_bytes=int(79.18 * gib)) is None
    nothing_free = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
                                          "capacity of 79.18 GiB of which 0 bytes is free.")  # c10_zero_bytes_free
    assert crowded_out(nothing_free, "numerics", candidate_held=int(47 * gib), footprint=footprint, judge_peak=0,
                       device_bytes=int(79.18 * gib)) is not None
    unsized = torch.OutOfMemoryError("CUDA out of memory.")
    assert crowded_out(unsized, "numerics", candidate_held=held, footprint=footprint, judge_peak=0,
                       device_bytes=int(79.18 * gib)) is None
    fair_holder = crowded_out(oom, "numerics", candidate_held=FAIR_SHARE_FACTOR * footprint, footprint=footprint,
                              judge_peak=0, device_bytes=int(79.18 * gib))
    assert fair_holder is None


GIB = 1 << 30
H100 = int(79.18 * GIB)


def _oom_message(request_gib: float, free_gib: float, judge_gib: float, candidate_gib: float) -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {request_gib:.2f} GiB. GPU 0 has a total capacity of 79.18 GiB of "
        f"which {free_gib:.2f} GiB is free. Including non-PyTorch memory, this process has {judge_gib:.2f} GiB memory "
        f"in use. Process 7689 has {candidate_gib:.2f} GiB memory in use.")


def _screen_sizes(*, footprint: int = 0, known: int = 0, output: int = 0, outputs=(), state: int = 0):
    """The judge's budget and the candidate's minimum of a screen holding these sizes."""
    from types import SimpleNamespace

    from kernelgate.worker.stages import Remote, Screen

    remote = Remote(SimpleNamespace())
    remote._outputs = set(outputs)
    screen = SimpleNamespace(footprint=footprint, known_bytes=known, output_bytes=output, reference_growth=0,
                             reference64_growth=0, state_bytes=state, remote=remote)
    return Screen.judge_budget(screen), Screen.candidate_minimum(screen)


@pytest.mark.parametrize("case, rows, request_gib, free_gib, judge_gib, candidate_gib", [
    # H100, 2026-12-07 (redteam_stream_h100.json): softmax over rows x 65536 fp32, the judge's 20 MiB refused
    ("c10_zero_bytes_free", 44032, 20 / 1024, 1.38 / 1024, 57.04, 20.92),
    ("c10_fair_share_squeeze", 40960, 20 / 1024, 9.44 / 1024, 53.10, 24.85),
    # the red team of the rule (redteam_c11, not yet run on a GPU): trial 2's fp64 reference refused
    # beside a candidate that took all but 2 GiB on its first call
    ("c11_softmax_fp64_window", 44032, 21.5, 2.0, 44.0, 33.18),
])
def test_a_judge_within_its_budget_starved_by_a_candidate_over_its_minimum_is_crowding(
        case, rows, request_gib, free_gib, judge_gib, candidate_gib):
    """A footprint over about a fifth of an H100: twice it beside the judge does not fit, so the
    share that weighs the candidate is its minimum (its output, a context) wherever the judge held
    and asked for no more than its budget. An honest candidate (its output and a context) is not
    crowding; a judge over its budget is the gate's own shortfall."""
    from kernelgate.worker.stages import crowded_out

    output = rows * 65536 * 4
    budget, minimum = _screen_sizes(footprint=2 * output, output=output, outputs={output})
    assert (judge_gib + request_gib) * GIB <= budget
    oom = _oom_message(request_gib, free_gib, judge_gib, candidate_gib)
    sizes = dict(footprint=2 * output, judge_peak=int(judge_gib * GIB), device_bytes=H100, candidate_minimum=minimum,
                 judge_budget=budget)
    failure = crowded_out(oom, "numerics", candidate_held=int(candidate_gib * GIB), **sizes)
    assert failure is not None and failure.failure.reason is Reason.out_of_memory, case
    assert f"had the candidate's process held {minimum / 1e9:.2f} GB" in failure.failure.message
    assert crowded_out(oom, "numerics", candidate_held=output + int(0.6 * GIB), **sizes) is None
    assert crowded_out(oom, "numerics", candidate_held=int(candidate_gib * GIB), **{**sizes, "judge_budget": 0}) is None
    over_budget = _oom_message(request_gib, free_gib, budget / GIB + 1, candidate_gib)
    assert crowded_out(over_budget, "numerics", candidate_held=int(candidate_gib * GIB), **sizes) is None


def test_before_its_first_call_a_candidate_holding_more_than_its_state_and_a_context_is_crowding():
    """Red team c11_sum_prefootprint_floor: a 24 GiB input, the first trial's reference (the fp64
    input, 48 GiB) refused beside a candidate holding just under an eighth of the device from its
    import, before the output (and so the footprint) is known. From the inputs alone the judge was
    within its budget, and beside a candidate of only a context it would have fit."""
    from kernelgate.worker.stages import crowded_out

    inputs = 96 * 16384 * 4096 * 4
    budget, minimum = _screen_sizes(known=inputs)
    assert minimum == GIB  # no call yet: a context, no output
    oom = _oom_message(48.0, 44.78, 25.0, 9.4)
    sizes = dict(footprint=inputs, judge_peak=25 * GIB, device_bytes=H100, candidate_minimum=minimum, judge_budget=budget)
    assert crowded_out(oom, "numerics", candidate_held=int(9.4 * GIB), **sizes) is not None
    assert crowded_out(oom, "numerics", candidate_held=int(0.6 * GIB), **sizes) is None


def test_the_candidates_minimum_counts_what_the_harness_made_it_hold_until_its_cache_is_freed():
    """The probes' kept outputs, those let go of and the sizes of its outputs stay the harness's
    (an honest candidate's allocator keeps them cached) until a free_cache ping; its copy of the
    state and a context always."""
    from types import SimpleNamespace

    from kernelgate.worker.stages import CONTEXT_BYTES, Remote

    remote = Remote(SimpleNamespace())
    assert remote.harness_bytes == 0
    remote._kept = {1: 100, 2: 100, 3: 100}
    remote._outputs = {100, 250}
    assert remote.harness_bytes == 650
    remote._recopied += remote._kept.pop(1) + remote._kept.pop(2)  # what recopy(1, forget=(2,)) does
    assert remote.harness_bytes == 650
    _, minimum = _screen_sizes(state=5000, outputs={100})
    assert minimum == 5000 + 100 + CONTEXT_BYTES


def test_a_library_out_of_memory_that_is_not_torchs_error_is_weighed_too():
    """cuBLAS's handle or workspace refused (a RuntimeError, not torch.OutOfMemoryError) beside a
    hoarding candidate: crowding like torch's own; another runtime error is not."""
    from kernelgate.worker.stages import crowded_out

    sizes = dict(footprint=2 * 10 ** 9, judge_peak=0, device_bytes=80 * 10 ** 9)
    blas = RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
    assert crowded_out(blas, "numerics", candidate_held=60 * 10 ** 9, **sizes) is not None
    assert crowded_out(RuntimeError("shape mismatch"), "numerics", candidate_held=60 * 10 ** 9, **sizes) is None


def test_a_calibration_that_fails_before_the_candidate_is_loaded_is_a_fault_of_the_gate():
    """On an H100 at 8 in flight (2026-12-07), seven honest candidates were rejected runtime_error
    because the calibration's output-sized buffer did not fit beside the other jobs: no candidate
    code had run. It is the gate's fault, and says "out of memory" so that the pool runs it alone."""
    from types import SimpleNamespace

    from kernelgate.errors import WorkerError
    from kernelgate.worker.stages import CandidateFailure, Screen

    def refused() -> None:
        raise CandidateFailure(Reason.runtime_error, "OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                                     "6.00 GiB. GPU 0 has a total capacity of 79.18 GiB", "load")

    screen = SimpleNamespace(cuda=True, _calibrate=refused)
    with pytest.raises(WorkerError, match="before the candidate was loaded.*out of memory"):
        Screen.calibrate(screen)
    Screen.calibrate(SimpleNamespace(cuda=False, _calibrate=refused))  # no GPU: nothing to calibrate


@pytest.mark.parametrize("fixture, problem", [
    ("softmax_online_honest.py", Problem.op("softmax", rows=16, cols=300)),
    ("softmax_exp_buffer_honest.py", Problem.op("softmax", rows=16, cols=300)),
    ("sum_transposed_workspace_honest.py", Problem.op("sum", batch=3, dim1=40, dim2=33)),
])
def test_the_red_teams_honest_kernels_are_correct_on_the_cpu(fixture, problem):
    """The kernels of the GPU test at each card's edge (test_gpu_deadlines.py) are honest."""
    from kernelgate import Candidate, Status, screen
    from tests.conftest import FIXTURES

    verdict = screen(Candidate(source=(FIXTURES / fixture).read_text(), entry="kernel", name=fixture), problem)
    assert verdict.status is not Status.reject and verdict.numerics.passed, verdict.summary


def test_a_large_problems_numerics_and_probes_calls_free_the_candidates_cache_and_its_timed_calls_do_not():
    """Its temporaries, freed into its allocator's cache, would otherwise sit beside the judge's
    next allocation and count against its minimum."""
    from types import SimpleNamespace

    from kernelgate.worker.stages import Screen

    def frees(stage: str, footprint: int, cuda: bool = True) -> bool:
        screen = SimpleNamespace(cuda=cuda, footprint=footprint, opts=SimpleNamespace(keep_alive_bytes=512 << 20))
        return Screen.frees_cache_after(screen, stage)

    assert frees("numerics", 6 << 30) and frees("probes", 6 << 30)
    assert not frees("timing", 6 << 30) and not frees("numerics", 64 << 20) and not frees("numerics", 6 << 30, cuda=False)


def test_before_its_first_call_the_minimum_holds_even_while_the_judges_budget_is_not_known_whole():
    """Red team c12_logsoftmax_int32_fp64gap (H100, by arithmetic): in the first trial the fp64
    reference's growth is not measured yet, so the judge's 21 GiB fp64 output looked over budget and
    a candidate holding 20.35 GiB from its import escaped as a gate fault."""
    from kernelgate.worker.stages import crowded_out

    x = 65536 * 43008 * 4
    budget, minimum = _screen_sizes(known=x)
    oom = _oom_message(21.0, 16.2, 42.6, 20.35)
    assert (42.6 + 21.0) * GIB > budget  # looks over budget
    sizes = dict(footprint=x, judge_peak=int(42.6 * GIB), device_bytes=H100, candidate_minimum=minimum,
                 judge_budget=budget)
    assert crowded_out(oom, "numerics", candidate_held=int(20.35 * GIB), **sizes) is None  # after a call: the gate's
    assert crowded_out(oom, "numerics", candidate_held=int(20.35 * GIB), before_first_call=True, **sizes) is not None
    assert crowded_out(oom, "numerics", candidate_held=int(0.55 * GIB), before_first_call=True, **sizes) is None


def test_a_candidate_at_its_minimum_whose_own_allocation_fails_beside_a_judge_that_left_no_room_is_starved():
    """An honest softmax of 12.5 GiB on an H100: during its call the judge held about 5.25 times its
    output; the candidate's own allocation fails. It held no more than its minimum: the judge's
    fault (run again alone), not its out_of_memory. A hoarder, or a judge that left room, is not."""
    from kernelgate.worker.stages import CONTEXT_BYTES, starved

    output = int(12.5 * GIB)
    minimum = output + CONTEXT_BYTES
    judge = int(5.25 * output) + CONTEXT_BYTES
    why = starved(held=int(0.55 * GIB), minimum=minimum, judge=judge, footprint=2 * output, device=H100)
    assert why is not None and "out of memory beside the judge" in why.lower()
    assert starved(held=20 * GIB, minimum=minimum, judge=judge, footprint=2 * output, device=H100) is None
    assert starved(held=int(0.55 * GIB), minimum=minimum, judge=20 * GIB, footprint=2 * output, device=H100) is None


def test_a_kept_output_is_counted_once_in_what_the_harness_made_the_candidate_hold():
    """Red team c12: a probe's kept output was counted as kept and as a cached output (a hoard of one
    output's room). A kept one counts as kept; one copied out and let go, as a cached size."""
    from types import SimpleNamespace

    from kernelgate.worker.stages import Remote

    remote = Remote(SimpleNamespace(frees_cache_after=lambda stage: False, call_deadline_s=1.0, cuda=False))
    remote.arg = lambda x: {"ref": "r"}
    remote.slot = lambda like: torch.empty(like.shape, dtype=like.dtype)
    remote.ask = lambda request, stage, **kw: CallReply()
    like = torch.empty(10, device="meta")
    remote.call([], like, "probes", "a kept call", slot=1)
    assert remote.harness_bytes == 40
    remote.call([], like, "probes", "a call let go of")
    assert remote.harness_bytes == 80
