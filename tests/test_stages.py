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
    failure = crowded_out(_cuda_oom(), "numerics", candidate_peak=60 * gb, footprint=2 * gb, judge_peak=9 * gb,
                          device_bytes=device)
    assert failure is not None and failure.failure.reason is Reason.out_of_memory
    message = failure.failure.message
    assert "60.00 GB" in message and "30.0x" in message and "2.00 GB" in message and "9.00 GB" in message
    assert "Tried to allocate 6.00 GiB" in message and failure.failure.stage == "numerics"
    try:
        raise ProblemError("the problem's inputs could not be made: OutOfMemoryError") from _cuda_oom()
    except ProblemError as wrapped:
        assert crowded_out(wrapped, "numerics", candidate_peak=60 * gb, footprint=2 * gb, judge_peak=0,
                           device_bytes=device) is not None
    at_limit = CROWDING_FACTOR * 4 * gb  # at the factor, with no sizes to weigh a fair share against
    assert crowded_out(torch.OutOfMemoryError("CUDA out of memory."), "numerics", candidate_peak=at_limit,
                       footprint=4 * gb, judge_peak=0, device_bytes=device) is None
    unknown = crowded_out(_cuda_oom(), "numerics", candidate_peak=60 * gb, footprint=0, judge_peak=0, device_bytes=device)
    assert unknown is not None and "footprint not yet known" in unknown.failure.message


def test_a_small_problems_candidate_holding_a_cuda_context_is_not_crowding():
    """CROWDING_FLOOR_SHARE: 4x a 10 MB footprint is less than a CUDA context; the device's eighth rules."""
    from kernelgate.worker.stages import crowded_out

    gb = 10 ** 9
    assert crowded_out(_cuda_oom(), "numerics", candidate_peak=int(0.6 * gb), footprint=10 ** 7, judge_peak=0,
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
    assert crowded_out(exc, "numerics", candidate_peak=candidate_peak, footprint=footprint, judge_peak=0,
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
    failure = crowded_out(oom, "numerics", candidate_peak=held, footprint=footprint, judge_peak=12 * gib,
                          device_bytes=int(79.18 * gib))
    assert failure is not None and failure.failure.reason is Reason.out_of_memory
    assert "would have fit had the candidate's process held" in failure.failure.message
    assert f"{FAIR_SHARE_FACTOR * footprint / 1e9:.2f} GB" in failure.failure.message
    too_big = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 60.00 GiB. GPU 0 has a total capacity "
                                     "of 79.18 GiB of which 2.00 GiB is free.")
    assert crowded_out(too_big, "numerics", candidate_peak=held, footprint=footprint, judge_peak=0,
                       device_bytes=int(79.18 * gib)) is None
    nothing_free = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
                                          "capacity of 79.18 GiB of which 0 bytes is free.")  # c10_zero_bytes_free
    assert crowded_out(nothing_free, "numerics", candidate_peak=int(47 * gib), footprint=footprint, judge_peak=0,
                       device_bytes=int(79.18 * gib)) is not None
    unsized = torch.OutOfMemoryError("CUDA out of memory.")
    assert crowded_out(unsized, "numerics", candidate_peak=held, footprint=footprint, judge_peak=0,
                       device_bytes=int(79.18 * gib)) is None
    fair_holder = crowded_out(oom, "numerics", candidate_peak=FAIR_SHARE_FACTOR * footprint, footprint=footprint,
                              judge_peak=0, device_bytes=int(79.18 * gib))
    assert fair_holder is None


@pytest.mark.parametrize("rows, judge_in_use_gib, free_mib, candidate_gib", [
    (44032, 57.04, 1.38, 20.92),  # c10_zero_bytes_free, H100, 2026-12-07 (redteam_stream_h100.json)
    (40960, 53.10, 9.44, 24.85),  # c10_fair_share_squeeze, same run
])
def test_a_large_problems_candidate_over_output_and_workspace_that_starves_a_judge_within_budget_is_crowding(
        rows, judge_in_use_gib, free_mib, candidate_gib):
    """Softmax over rows x 65536 fp32 on an H100: the footprint (input and output) is over a fifth of
    the device, so twice it beside the judge's budget does not fit. The judge held less than its
    budget and asked for 20 MiB; the candidate held far more than its output and a quarter of the
    footprint as workspace: a reject. An honest candidate (its output and a CUDA context) is not."""
    from types import SimpleNamespace

    from kernelgate.worker.stages import WORKSPACE_SHARE, Screen, crowded_out

    gib, device = 1 << 30, int(79.18 * (1 << 30))
    output = rows * 65536 * 4
    footprint = 2 * output
    budget = Screen.judge_budget(SimpleNamespace(footprint=footprint, output_bytes=output, reference_growth=0,
                                                 reference64_growth=0))
    assert judge_in_use_gib * gib < budget < device  # the judge was within its budget
    oom = torch.OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which "
        f"{free_mib} MiB is free. Including non-PyTorch memory, this process has {judge_in_use_gib} GiB memory in "
        f"use. Process 7689 has {candidate_gib} GiB memory in use.")
    kwargs = dict(footprint=footprint, judge_peak=int(judge_in_use_gib * gib), device_bytes=device,
                  output_bytes=output, judge_budget=budget)
    failure = crowded_out(oom, "numerics", candidate_peak=int(candidate_gib * gib), **kwargs)
    assert failure is not None and failure.failure.reason is Reason.out_of_memory
    assert f"had the candidate's process held {(output + WORKSPACE_SHARE * footprint) / 1e9:.2f} GB" \
        in failure.failure.message, failure.failure.message
    honest = output + int(0.6 * gib)  # its output and a CUDA context
    assert crowded_out(oom, "numerics", candidate_peak=honest, **kwargs) is None
    # without the budget (not known), or with a judge over it, the fair share stays twice the footprint
    assert crowded_out(oom, "numerics", candidate_peak=int(candidate_gib * gib), **{**kwargs, "judge_budget": 0}) is None
    greedy_judge = torch.OutOfMemoryError(str(oom).replace(f"has {judge_in_use_gib} GiB",
                                                                f"has {budget / gib + 1:.2f} GiB"))
    assert crowded_out(greedy_judge, "numerics", candidate_peak=int(candidate_gib * gib), **kwargs) is None


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
