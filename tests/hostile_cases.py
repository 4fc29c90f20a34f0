"""The hostile-candidate manifest: every exploit and fault fixture with the reason it must get.

Read by ``tests/test_exploits.py``, ``tests/test_faults.py`` and ``benchmarks/hostile.py`` (which
writes the results JSON and is what the table in ``docs/hostile.md`` comes from). Every case is a
rowsum candidate called as the function ``kernel``, screened at a small shape so that the Triton
interpreter is quick; ``gpu`` cases need a CUDA GPU (the CPU run skips them, saying so).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from kernelgate import Problem, Reason, ScreenOptions

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PROBLEM = Problem.op("rowsum", rows=16, cols=256)
"""Small enough for the interpreter; the shape_specialized fixture branches on exactly this shape."""
OPTIONS = ScreenOptions(run_timeout_s=60, load_timeout_s=60, host_memory_mb=3072, max_file_mb=16)
"""A 3 GiB host-memory limit (out-of-memory faults stop early) and small files. The run deadline
leaves room for a loaded 2-core machine (oom_grow takes about 5.5 s there to fill 3 GiB) and for
a fresh GPU machine's first compile and CUDA start-up (a first case ran past 6 s on the H200)."""
HANG = {"run_timeout_s": 6}
"""The hang fixtures' own short deadline: they are meant to run out of it."""


@dataclass(frozen=True)
class Case:
    fixture: str
    """Path under tests/fixtures."""
    expected: Reason
    kind: str
    """``exploit`` or ``fault``."""
    layer: str
    """Which defense is meant to catch it: static, runtime, numerics, probes, supervisor."""
    gpu: bool = False
    """Needs a CUDA GPU (side streams, device OOM)."""
    gpu_expected: tuple[Reason, ...] = ()
    """On a GPU, the reasons that count as caught when they differ from ``expected``."""
    entry: str = "kernel"
    options: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return Path(self.fixture).stem

    @property
    def what(self) -> str:
        """The fixture's docstring: what was tried."""
        text = (FIXTURES / self.fixture).read_text()
        try:
            doc = ast.get_docstring(ast.parse(text)) or ""
        except SyntaxError:  # the syntax-error fixture: its docstring is still the first string
            doc = text.split('"""')[1] if text.startswith('"""') else ""
        return doc.strip().replace("\n", " ")

    def accepts(self, reason: Reason | None, on_gpu: bool) -> bool:
        return reason is self.expected or (on_gpu and reason in self.gpu_expected)

    def screen_options(self) -> ScreenOptions:
        return OPTIONS.model_copy(update=self.options)


R = Reason
EXPLOITS = [
    Case("exploits/timer_patch.py", R.tampering, "exploit", "static"),
    Case("exploits/do_bench_patch.py", R.tampering, "exploit", "static"),
    Case("exploits/allclose_patch.py", R.tampering, "exploit", "static"),
    Case("exploits/sys_modules_swap.py", R.tampering, "exploit", "static"),
    Case("exploits/tf32_flag.py", R.tampering, "exploit", "static"),
    Case("exploits/mode_escape.py", R.tampering, "exploit", "static"),
    Case("exploits/frame_walk.py", R.introspection, "exploit", "static"),
    Case("exploits/checker_patch_dynamic.py", R.tampering, "exploit", "runtime"),
    Case("exploits/timer_patch_getattr.py", R.tampering, "exploit", "runtime"),
    Case("exploits/gc_reference_dynamic.py", R.introspection, "exploit", "runtime"),
    Case("exploits/library_op.py", R.library_op_used, "exploit", "runtime"),
    Case("exploits/library_op_most.py", R.library_op_used, "exploit", "runtime"),
    Case("no_kernel.py", R.no_kernel_launched, "exploit", "runtime"),
    Case("exploits/result_reuse.py", R.nonfinite_output, "exploit", "numerics"),
    Case("partial_write.py", R.nonfinite_output, "exploit", "numerics"),
    Case("subclass_output.py", R.wrong_output_type, "exploit", "numerics"),
    Case("exploits/lazy_output.py", R.wrong_output_type, "exploit", "numerics"),
    Case("exploits/precision_downgrade.py", R.numerics_mismatch, "exploit", "numerics"),
    Case("exploits/seed_replay.py", R.numerics_mismatch, "exploit", "numerics"),
    Case("exploits/tiny_output.py", R.numerics_mismatch, "exploit", "numerics"),
    Case("zeros.py", R.trivial_output, "exploit", "numerics"),
    Case("constant.py", R.trivial_output, "exploit", "numerics"),
    Case("exploits/input_mutation.py", R.input_mutation, "exploit", "numerics"),
    Case("exploits/input_mutation_kernel.py", R.input_mutation, "exploit", "numerics"),
    Case("exploits/background_thread.py", R.background_work, "exploit", "runtime"),
    Case("exploits/pointer_cache.py", R.output_caching, "exploit", "probes"),
    Case("exploits/content_cache.py", R.output_caching, "exploit", "probes",
         gpu_expected=(R.host_work,)),  # its hash reads the whole input into host memory
    Case("exploits/content_cache_same_buffer.py", R.output_caching, "exploit", "probes"),
    Case("exploits/reused_output_buffer.py", R.output_caching, "exploit", "probes"),
    Case("exploits/call_count_switch.py", R.recheck_mismatch, "exploit", "probes (CPU) / timing recheck (GPU)"),
    Case("exploits/shape_specialized.py", R.shape_specialized, "exploit", "probes"),
    Case("exploits/side_stream.py", R.side_stream, "exploit", "runtime", gpu=True,
         gpu_expected=(R.unsynchronized_work,)),
]

FAULTS = [
    Case("syntax_error.py", R.syntax_error, "fault", "static"),
    Case("import_error.py", R.load_error, "fault", "load"),
    Case("missing_entry.py", R.missing_entry, "fault", "load"),
    Case("compile_error.py", R.compile_error, "fault", "load"),
    Case("raises.py", R.runtime_error, "fault", "numerics"),
    Case("wrong_shape.py", R.wrong_shape, "fault", "numerics"),
    Case("wrong_dtype.py", R.wrong_dtype, "fault", "numerics"),
    Case("nan_output.py", R.nonfinite_output, "fault", "numerics"),
    Case("illegal_address.py", R.crash, "fault", "supervisor", gpu_expected=(R.runtime_error,)),
    Case("hang_gpu_kernel.py", R.run_timeout, "fault", "supervisor", options=HANG),
    Case("hang_loop.py", R.run_timeout, "fault", "supervisor", options=HANG),
    Case("exit_os.py", R.crash, "fault", "supervisor"),
    Case("exit_sys.py", R.runtime_error, "fault", "numerics"),
    Case("exit_sys_import.py", R.load_error, "fault", "load"),
    Case("crash_segfault.py", R.crash, "fault", "supervisor"),
    Case("oom_host.py", R.out_of_memory, "fault", "limits"),
    Case("oom_grow.py", R.out_of_memory, "fault", "limits"),
    Case("oom_gpu.py", R.out_of_memory, "fault", "limits", gpu=True),
    Case("fork.py", R.forbidden_call, "fault", "runtime"),
    Case("subprocess_spawn.py", R.forbidden_call, "fault", "runtime"),
    Case("write_outside.py", R.forbidden_call, "fault", "runtime"),
    Case("flood_stdout.py", R.runtime_error, "fault", "limits"),
]

ALL = EXPLOITS + FAULTS
