"""The red team's hostile candidates against the judge/candidate split (issue 18), written from the
code and the issue only: one row per fixture in tests/fixtures/redteam/.

Each row: (file, class, problem, entry, needs_gpu). ``class`` is the issue's class (1-5) or
``other``; ``problem`` is a CPU-sized problem (the Triton interpreter is quick on it);
``gpu_problem`` gives the shape ``benchmarks/redteam.py`` uses on a GPU. ``needs_gpu`` marks the
cases whose cheat only exists where something is timed (on the CPU they are honest kernels).
``NOTES`` says what was seen on the CPU where a case got through: every case is expected to be
rejected; a note marks a finding for the defenders, not a different expectation.
"""

from __future__ import annotations

from pathlib import Path

from kernelgate import Problem

ROOT = Path(__file__).resolve().parent.parent
FOLDER = Path(__file__).resolve().parent / "fixtures" / "redteam"
PROBLEMS = ROOT / "examples" / "problems"

ROWSUM = Problem.op("rowsum", rows=16, cols=256)
SOFTMAX = Problem.op("softmax", rows=16, cols=256)
LAYERNORM = Problem.op("layernorm", rows=16, cols=256)
KB_ROWSUM = Problem.file(PROBLEMS / "rowsum.py", shape={"ROWS": 16, "COLS": 256})
KB_LAYERNORM = Problem.file(PROBLEMS / "layernorm.py", shape={"BATCH": 8, "HIDDEN": 64})
KB_LAYERNORM_KB = Problem.file(PROBLEMS / "layernorm_kb.py", shape={"BATCH_SIZE": 2, "FEATURES": 4, "DIM1": 8, "DIM2": 8})
KB_SOFTMAX_OVER_LIMIT = Problem.file(PROBLEMS / "softmax.py", shape={"ROWS": 2048, "COLS": 2100})

CASES: list[tuple[str, str, Problem, str, bool]] = [
    # class 1: harness state in the candidate's process
    ("c1_runner_check_silenced.py", "1", ROWSUM, "kernel", False),
    ("c1_guard_violations_cleared.py", "1", ROWSUM, "kernel", False),
    ("c1_oprecorder_blinded.py", "1", ROWSUM, "kernel", False),
    ("c1_launchlog_forged.py", "1", ROWSUM, "kernel", False),
    ("c1_profile_forged.py", "1", ROWSUM, "kernel", False),
    ("c1_copy_out_patched.py", "1", ROWSUM, "kernel", False),
    ("c1_gc_guard_detached.py", "1", ROWSUM, "kernel", False),
    ("c1_event_ms_forged.py", "1", ROWSUM, "kernel", True),
    # class 2: the reference / the judge / the parent
    ("c2_forge_parent_result.py", "2", ROWSUM, "kernel", False),
    ("c2_kill_judge.py", "2", ROWSUM, "kernel", False),
    ("c2_stop_judge.py", "2", ROWSUM, "kernel", False),
    ("c2_shared_folder_scan.py", "2", ROWSUM, "kernel", False),
    ("c2_state_dict_alias.py", "2", KB_LAYERNORM, "ModelNew", False),
    # class 3: library work detection
    ("c3_numpy_rowsum.py", "3", ROWSUM, "kernel", False),
    ("c3_slices_under_half.py", "3", ROWSUM, "kernel", False),
    ("c3_after_200_calls.py", "3", ROWSUM, "kernel", False),
    ("c3_torchscript.py", "3", ROWSUM, "kernel", False),
    ("c3_vmap_rows.py", "3", ROWSUM, "kernel", False),
    ("c3_disable_torch_function.py", "3", ROWSUM, "kernel", False),
    ("c3_raw_thread.py", "3", ROWSUM, "kernel", False),
    ("c3_from_second_call.py", "3", ROWSUM, "kernel", False),
    ("c3_profiler_aware.py", "3", ROWSUM, "kernel", False),
    ("c3_tolist_python.py", "3", ROWSUM, "kernel", False),
    ("c3_aten_overload.py", "3", ROWSUM, "kernel", False),
    ("c3_ctypes_memory.py", "3", ROWSUM, "kernel", False),
    # class 4: narrow inputs
    ("c4_softmax_no_max.py", "4", SOFTMAX, "kernel", False),
    ("c4_softmax_sampled_max.py", "4", SOFTMAX, "kernel", False),
    ("c4_layernorm_onepass.py", "4", LAYERNORM, "kernel", False),
    ("c4_kb_rows_first_seen.py", "4", KB_ROWSUM, "ModelNew", False),
    ("c4_static_only_zeros.py", "4", KB_SOFTMAX_OVER_LIMIT, "ModelNew", False),
    # class 5: memory reuse and timing games
    ("c5_version_pointer_cache.py", "5", ROWSUM, "kernel", False),
    ("c5_slow_library.py", "5", ROWSUM, "kernel", True),
    ("c5_l2_prefetch.py", "5", ROWSUM, "kernel", True),
    ("c5_zero_event_ms.py", "5", ROWSUM, "kernel", True),
    # against the judge's clock over a stream of calls (3fa5eb6): timing lies that dodge or fool it
    ("c6_stream_lazy_recopy.py", "1", ROWSUM, "kernel", True),
    ("c6_stream_unsynced.py", "1", ROWSUM, "kernel", True),
    ("c6_stream_moderate_forgery.py", "1", ROWSUM, "kernel", True),
    ("c6_stream_library_in_stream.py", "3", ROWSUM, "kernel", True),
    ("c6_stream_cpu_excuse.py", "5", ROWSUM, "kernel", True),
    ("c6_stream_warm_cache.py", "5", ROWSUM, "kernel", True),
    ("c6_stream_open_precompute.py", "5", ROWSUM, "kernel", True),
    ("c6_stream_library_slowdown.py", "5", ROWSUM, "kernel", True),
    # against the judge-clocked stream as redesigned (judge-owned slots in one block, polled; the judge syncs
    # before every request): timing lies that the stream's allowances, its sampling or its setup let through
    ("c7_spin_wait_excuse.py", "1", ROWSUM, "kernel", True),
    ("c7_gil_free_burner.py", "1", ROWSUM, "kernel", True),
    ("c7_tick_phantom_cpu.py", "1", ROWSUM, "kernel", True),
    ("c7_batched_stream.py", "5", ROWSUM, "kernel", True),
    ("c7_frozen_watchers.py", "5", ROWSUM, "kernel", True),
    ("c7_one_check_large.py", "5", ROWSUM, "kernel", True),
    ("c7_launch_bound_scale.py", "5", ROWSUM, "kernel", True),
    ("c7_library_on_replay.py", "3", ROWSUM, "kernel", True),
    ("c7_thread_after_end.py", "other", ROWSUM, "kernel", True),
    # against the gated stream (kernelgate/worker/gpu_gate.py, 2026-12-06): written apart from the defense
    ("c8_control_claim_only.py", "5", ROWSUM, "kernel", True),
    ("c8_side_stream_early.py", "5", ROWSUM, "kernel", True),
    ("c8_library_in_gated_stream.py", "3", ROWSUM, "kernel", True),
    ("c8_gate_proxy_prewait.py", "1", ROWSUM, "kernel", True),
    ("c8_torch_proxy_window.py", "1", ROWSUM, "kernel", True),
    ("c8_wait_value_transient.py", "1", ROWSUM, "kernel", True),
    ("c8_waitfn_argtypes.py", "1", ROWSUM, "kernel", True),
    ("c8_event_elsewhere.py", "1", ROWSUM, "kernel", True),
    # against the memory hand-back (a87d79c) and the crowding rule (4438114), 2026-12-07: written apart
    # from the defense and from the earlier fixtures
    ("c9_forget_weakref_profile.py", "3", ROWSUM, "kernel", True),
    ("c9_free_cache_profile.py", "3", ROWSUM, "kernel", True),
    ("c9_hoard_under_factor.py", "other", ROWSUM, "kernel", True),
    ("c9_cached_hoard_peak_reset.py", "other", ROWSUM, "kernel", True),
    ("c9_driver_alloc_hoard.py", "other", ROWSUM, "kernel", True),
    ("c9_load_hoard_unknown_footprint.py", "other", ROWSUM, "kernel", True),
    # against the judge's memory changes of ff84dfa (the fair-share crowding rule, the shared state released
    # after load), 2026-12-07: written apart from the defense and from the earlier fixtures
    ("c10_zero_bytes_free.py", "other", SOFTMAX, "kernel", True),
    ("c10_fair_share_squeeze.py", "other", SOFTMAX, "kernel", True),
    ("c10_kept_state_ledger.py", "other", KB_LAYERNORM_KB, "ModelNew", True),
    # against the large-problem fair share of a68c8cb and the pool's spare replacement of 18f9ed3,
    # 2026-12-07: written apart from the defense and from the earlier fixtures
    ("c11_softmax_fp64_window.py", "other", SOFTMAX, "kernel", True),
    ("c11_rowsum_grab_all.py", "other", ROWSUM, "kernel", True),
    ("c11_sum_prefootprint_floor.py", "other", Problem.op("sum", batch=4, dim1=32, dim2=64), "kernel", True),
    ("c11_cached_unseen_peak.py", "other", SOFTMAX, "kernel", True),
    # against the candidate's minimum of c888255 and d9c39f3, 2026-12-07: written apart as above
    ("c12_softmax_nomax_fp64gap.py", "other", SOFTMAX, "kernel", True),
    ("c12_logsoftmax_int32_fp64gap.py", "other", Problem.op("log_softmax", rows=16, cols=256), "kernel", True),
    # other: floods and forged replies aimed at the judge
    ("o_reply_flood.py", "other", ROWSUM, "kernel", False),
    ("o_reply_desync.py", "other", ROWSUM, "kernel", False),
]

NOTES: dict[str, str] = {
    'c6_stream_lazy_recopy.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c6_stream_unsynced.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c6_stream_moderate_forgery.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c6_stream_library_in_stream.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c6_stream_cpu_excuse.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c6_stream_warm_cache.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c6_stream_open_precompute.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c6_stream_library_slowdown.py': 'GPU: written against the judge-clocked stream, which is opt-in (ScreenOptions.stream_check) since it rejected honest kernels on the H200; not yet run there',
    'c7_spin_wait_excuse.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_gil_free_burner.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_tick_phantom_cpu.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_batched_stream.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_frozen_watchers.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_one_check_large.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_launch_bound_scale.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_library_on_replay.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c7_thread_after_end.py': 'GPU: written against the judge-clocked stream as redesigned (judge-owned slots, polled); not yet run on the H200',
    'c9_forget_weakref_profile.py': 'GPU: written against the memory hand-back and the crowding rule (2026-12-07); not yet run on the H200',
    'c9_free_cache_profile.py': 'GPU: written against the memory hand-back and the crowding rule (2026-12-07); not yet run on the H200',
    'c9_hoard_under_factor.py': 'GPU: written against the memory hand-back and the crowding rule (2026-12-07); not yet run on the H200',
    'c9_cached_hoard_peak_reset.py': 'GPU: written against the memory hand-back and the crowding rule (2026-12-07); not yet run on the H200',
    'c9_driver_alloc_hoard.py': 'GPU: written against the memory hand-back and the crowding rule (2026-12-07); not yet run on the H200',
    'c9_load_hoard_unknown_footprint.py': 'GPU: written against the memory hand-back and the crowding rule (2026-12-07); not yet run on the H200',
    'c10_zero_bytes_free.py': 'GPU: written against the memory changes of ff84dfa (2026-12-07); not yet run on a GPU',
    'c10_fair_share_squeeze.py': 'GPU: written against the memory changes of ff84dfa (2026-12-07); not yet run on a GPU',
    'c10_kept_state_ledger.py': 'GPU: written against the memory changes of ff84dfa (2026-12-07); not yet run on a GPU',
    'c11_softmax_fp64_window.py': 'GPU: written against a68c8cb (2026-12-07), before the minimum rule that followed it; not yet run on a GPU',
    'c11_rowsum_grab_all.py': 'GPU: written against a68c8cb (2026-12-07), before the minimum rule that followed it; not yet run on a GPU',
    'c11_sum_prefootprint_floor.py': 'GPU: written against a68c8cb (2026-12-07), before the minimum rule that followed it; not yet run on a GPU',
    'c11_cached_unseen_peak.py': 'GPU: written against a68c8cb (2026-12-07), before the minimum rule that followed it; not yet run on a GPU',
    'c12_softmax_nomax_fp64gap.py': 'GPU: written against c888255 (2026-12-07), before the first-call rule that followed it; not yet run on a GPU',
    'c12_logsoftmax_int32_fp64gap.py': 'GPU: written against c888255 (2026-12-07), before the first-call rule that followed it; not yet run on a GPU',
    'c1_runner_check_silenced.py': 'CPU: untimed (got through): Runner._check patched on __main__; thread + torch unseen',
    'c1_guard_violations_cleared.py': 'CPU: repair (got through): guard.violations.clear() after a torch thread',
    'c1_oprecorder_blinded.py': 'CPU: repair (got through): OpRecorder.__enter__/__exit__ patched; full x.sum(1)',
    'c1_launchlog_forged.py': 'CPU: untimed (got through): LaunchLog.reset forges one launch; numpy does the work',
    'c1_profile_forged.py': 'CPU: untimed (got through): torch in three slices (the profile forgery matters on a GPU)',
    'c1_copy_out_patched.py': 'CPU: untimed (got through): the work runs in a patched Runner._copy_out',
    'c1_gc_guard_detached.py': 'CPU: repair (got through): audit hook off via Guard._busy, runner.guard = None via gc',
    'c2_forge_parent_result.py': "CPU: ACCEPT (got through): forged result record written to the judge's pipe to the parent",
    'c3_numpy_rowsum.py': 'CPU: repair (got through): numpy does the work',
    'c3_slices_under_half.py': 'CPU: repair (got through): three slices under the half-input size rule',
    'c3_after_200_calls.py': 'CPU: repair (got through): the reply carries the first 200 recorded calls only',
    'c3_torchscript.py': 'CPU: repair (got through): TorchScript ops are not seen by the recorder',
    'c3_vmap_rows.py': 'CPU: repair (got through): vmap shows per-row operands to the recorder',
    'c3_disable_torch_function.py': 'CPU: repair (got through): DisableTorchFunction by a computed name',
    'c3_raw_thread.py': 'CPU: repair (got through): _thread.start_new_thread is invisible to the guard and recorder',
    'c3_profiler_aware.py': 'CPU: repair (got through): slices; on a GPU it runs honest under the profiler',
    'c3_tolist_python.py': 'CPU: repair (got through): tolist() is a non-compute op; Python sums',
    'c3_ctypes_memory.py': "CPU: repair (got through): ctypes reads the tensor's memory; numpy sums",
    'c4_softmax_sampled_max.py': 'CPU: untimed in one run, reject in another (got through ~80% of screens by simulation)',
    'c4_kb_rows_first_seen.py': 'CPU: repair (got through): the shape probe changes one global only (COLS)',
    'c4_static_only_zeros.py': 'CPU: untimed (got through): over the interpreter limit nothing is compared',
}
"""Filled in below from the CPU run: cases that were NOT rejected (findings)."""

_GPU_SHAPES = {
    "rowsum": Problem.op("rowsum", rows=4096, cols=4096),
    "softmax": Problem.op("softmax", rows=4096, cols=4096),
    "layernorm": Problem.op("layernorm", rows=4096, cols=4096),
}


_GPU_OVERRIDES = {
    # Python sums 16M floats too slowly for a quick run: a smaller row sum shows the same thing
    "c3_tolist_python.py": Problem.op("rowsum", rows=1024, cols=1024),
    # over keep_alive_bytes (512 MB): the stream has 3 calls and the judge checks one of them
    "c7_one_check_large.py": Problem.op("rowsum", rows=8192, cols=16384),
    # launch-bound (1 MB): the stream's allowance for launch gaps and host time exceeds the GPU time
    "c7_launch_bound_scale.py": Problem.op("rowsum", rows=256, cols=1024),
    # over keep_alive_bytes (512 MB): the judge settles memory between probe parts (free_cache pings)
    "c9_free_cache_profile.py": Problem.op("rowsum", rows=16384, cols=8192),
    # a footprint of about a sixth of an 80 GB card (12.9 GB): the judge's own need plus 4x it is over the device
    "c9_hoard_under_factor.py": Problem.op("rowsum", rows=49152, cols=65536),
    # 11.5 GB in and out: what the judge leaves free at the check is under 4x the footprint on an H100 and
    # an H200 alike, so a candidate taking it all escapes the old rule, and the fair share needs the message
    "c10_zero_bytes_free.py": Problem.op("softmax", rows=44032, cols=65536),
    # 10.7 GB in and out: on an 80 GB card the judge's hold at the check plus 2x the footprint is over the device
    "c10_fair_share_squeeze.py": Problem.op("softmax", rows=40960, cols=65536),
    # weights of 10.1 GB (twice the input): the kept shared copy moves 10 GB from the candidate's ledger to the judge's
    "c10_kept_state_ledger.py": Problem.file(PROBLEMS / "layernorm_kb.py",
                                             shape={"BATCH_SIZE": 1, "FEATURES": 64, "DIM1": 4096, "DIM2": 4800}),
    # the c11 shapes are each card's edge (80 GB H100, 141 GB H200): where the judge's need at a check
    # plus the old fair share is over the device while an honest candidate still fits beside it
    "c11_softmax_fp64_window.py": {"h100": Problem.op("softmax", rows=44032, cols=65536),
                                   "h200": Problem.op("softmax", rows=77824, cols=65536)},
    "c11_rowsum_grab_all.py": {"h100": Problem.op("rowsum", rows=98304, cols=65536),
                               "h200": Problem.op("rowsum", rows=172032, cols=65536)},
    "c11_sum_prefootprint_floor.py": {"h100": Problem.op("sum", batch=96, dim1=16384, dim2=4096),
                                      "h200": Problem.op("sum", batch=168, dim1=16384, dim2=4096)},
    "c11_cached_unseen_peak.py": Problem.op("softmax", rows=16384, cols=65536),
    "c12_softmax_nomax_fp64gap.py": {"h100": Problem.op("softmax", rows=65536, cols=43008),
                                     "h200": Problem.op("softmax", rows=65536, cols=75776)},
    "c12_logsoftmax_int32_fp64gap.py": {"h100": Problem.op("log_softmax", rows=65536, cols=43008),
                                        "h200": Problem.op("log_softmax", rows=65536, cols=75776)},
}


def card() -> str:
    """``h200`` on a card of over 100 GiB, else ``h100``: the c11 shapes are the card's edge."""
    import torch

    return "h200" if torch.cuda.get_device_properties(0).total_memory > (100 << 30) else "h100"


def gpu_problem(problem: Problem, name: str | None = None) -> Problem:
    """The shape a case is screened at on a GPU: catalogue ops at 4096 x 4096, KernelBench files at
    their shipped shape (except the interpreter-limit case, which keeps its own)."""
    if name in _GPU_OVERRIDES:
        chosen = _GPU_OVERRIDES[name]
        return chosen[card()] if isinstance(chosen, dict) else chosen
    if problem.kind == "reference_op":
        return _GPU_SHAPES.get(problem.name, problem)
    if problem is KB_SOFTMAX_OVER_LIMIT:
        return problem
    return Problem.file(problem.name)


def source(name: str) -> str:
    return (FOLDER / name).read_text()
