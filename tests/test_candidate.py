"""The candidate's process, in pieces that need no process: names, sums, exceptions."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kernelgate.dsl import Launch, LaunchLog
from kernelgate.worker.candidate import _compiled_names, _summed, describe_exception


def test_torch_calls_are_summed_per_op_never_cut_short():
    calls = [("sum", 10)] * 300 + [("mul", 5)]
    assert dict(_summed(calls)) == {"sum": 3000, "mul": 5}


def test_compiled_names_come_from_launches_symbols_and_global_functions():
    log = LaunchLog()
    tilelang = SimpleNamespace(kernel_source='extern "C" __global__ void __launch_bounds__(128) main_kernel(float* x)')
    log.record("main", Launch(tilelang, (), {}, None))
    triton = SimpleNamespace(name="_rowsum_0d1d")
    log.record("_rowsum", Launch(object(), (), {}, None, compiled=triton))
    assert _compiled_names(log) >= {"main", "main_kernel", "_rowsum", "_rowsum_0d1d"}


def test_exceptions_show_only_the_candidates_own_lines(tmp_path):
    path = tmp_path / "candidate.py"
    path.write_text("def f():\n    raise ValueError('boom from the candidate')\n")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    try:
        namespace["f"]()
    except ValueError as exc:
        text = describe_exception(exc, Path(path))
    assert "line 2: raise ValueError('boom from the candidate')" in text and "ValueError: boom" in text
    assert "test_candidate.py" not in text
