"""The Helion plug-in on the CPU: detection, launch counting, config choice, interpreter numerics of
the generated Triton, sm_90 artifacts, compiler errors; the GPU screen of the examples under ``gpu``.

Helion is an optional extra: without it installed every test here skips, saying so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("helion", reason="Helion is not installed (pip install helion)")

from kernelgate import Candidate, Problem, Reason, Status, screen  # noqa: E402
from kernelgate.dsl import detect_dsl, plugins  # noqa: E402
from kernelgate.dsl.helion import PLUGIN  # noqa: E402
from tests.conftest import EXAMPLES, ROOT  # noqa: E402

GOOD = EXAMPLES / "helion" / "softmax_good.py"
SLOW = EXAMPLES / "helion" / "softmax_slow.py"
SOFTMAX = str(EXAMPLES / "problems" / "softmax.py")
ROWSUM = str(EXAMPLES / "problems" / "rowsum.py")

ROWSUM_NO_CONFIG = textwrap.dedent('''
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(autotune_effort="full")
    def rowsum(x: torch.Tensor) -> torch.Tensor:
        n, _m = x.size()
        out = torch.empty([n], dtype=x.dtype, device=x.device)
        for tile_n in hl.tile(n):
            out[tile_n] = x[tile_n, :].sum(-1)
        return out


    class ModelNew(torch.nn.Module):
        def forward(self, x):
            return rowsum(x)
''')

COMPILE_ERROR = textwrap.dedent('''
    import torch
    import helion
    import helion.language as hl


    @helion.kernel(config=helion.Config(block_sizes=[4]))
    def rowsum(x: torch.Tensor) -> torch.Tensor:
        n, _m = x.size()
        out = torch.empty([n], dtype=x.dtype, device=x.device)
        for tile_n in hl.tile(n):
            out[tile_n] = x[tile_n, :].sum(-1)
            for tile_k in hl.tile(n):
                for tile_j in hl.tile(tile_k):
                    out[tile_j] = undefined_name
        return out


    class ModelNew(torch.nn.Module):
        def forward(self, x):
            return rowsum(x)
''')


def test_detects_helion_sources_only():
    assert PLUGIN.detect(GOOD.read_text()) and PLUGIN.detect(SLOW.read_text())
    assert PLUGIN.detect("from helion import language as hl\n")
    assert not PLUGIN.detect((EXAMPLES / "triton" / "softmax_good.py").read_text())
    assert not PLUGIN.detect("import helionic\n")


def test_registered_before_triton():
    names = list(plugins())
    assert "helion" in names and names.index("helion") < names.index("triton")
    assert detect_dsl(GOOD.read_text()) == "helion"
    # a Helion source that also imports triton (for triton.cdiv) is still Helion
    assert detect_dsl("import triton\n" + GOOD.read_text()) == "helion"
    assert detect_dsl((EXAMPLES / "triton" / "softmax_good.py").read_text()) == "triton"


_PROBE = textwrap.dedent('''
    import importlib.util, json, os, sys, tempfile
    from pathlib import Path
    work = Path(tempfile.mkdtemp())
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton-cache")
    import torch
    from kernelgate.dsl.helion import PLUGIN
    log = PLUGIN.prepare(interpret=True)
    source = Path(sys.argv[1])
    spec = importlib.util.spec_from_file_location("candidate", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew()
    x = torch.rand(6, 200)
    first = model(x)
    counts_one = dict(log.counts)
    log.reset()
    model(x)
    model(x)
    kernels, notes = PLUGIN.artifacts(log, source, interpret=True)
    print(json.dumps({
        "error": float((first - torch.softmax(x, -1)).abs().max()),
        "counts_one": counts_one, "counts_two": dict(log.counts), "notes": notes,
        "helion_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
        "kernels": [k.model_dump(mode="json") for k in kernels], "compile_errors": log.compile_errors,
    }))
''')


def _probe(path) -> dict:
    """prepare / import / call / artifacts in a process of its own (the hooks are process-wide)."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_launch_hook_counts_generated_kernels_and_artifacts_compile_for_sm90():
    out = _probe(SLOW)
    assert out["error"] < 1e-6
    assert out["counts_one"] == {"_helion_softmax_three_pass": 1}  # the generated Triton kernel, once per call
    assert out["counts_two"] == {"_helion_softmax_three_pass": 2}
    assert out["helion_cache"].endswith("helion")  # generated modules beside Triton's cache
    assert any("ran helion.Config(block_sizes=[1, 16, 16, 16], num_warps=1, num_stages=1): the config given "
               "in the source" in n for n in out["notes"])
    assert any("Triton's interpreter" in n for n in out["notes"])
    (kernel,) = out["kernels"]
    assert kernel["name"] == "_helion_softmax_three_pass" and kernel["dsl"] == "helion"
    assert kernel["target"] == "cuda:90" and kernel["launches"] == 2 and kernel["num_warps"] == 1
    assert kernel["constexprs"]["_BLOCK_SIZE_1"] == 16 and {"ttgir", "ptx"} <= set(kernel["asm"])
    assert ".entry _helion_softmax_three_pass" in kernel["asm"]["ptx"]  # the name the profiler will see
    assert not out["compile_errors"]
    ttgir = kernel["asm"]["ttgir"]  # locations moved from the generated module to the author's lines
    assert f'"{SLOW}":28:' in ttgir and f'"{SLOW}":33:' in ttgir and "torchinductor" not in ttgir


def test_slow_example_is_repair_from_static_evidence_with_helion_hints():
    problem = Problem(kind="kernelbench_file", name=SOFTMAX, shape={"ROWS": 8, "COLS": 256})
    v = screen(Candidate(source=SLOW.read_text()), problem)
    assert v.status is Status.repair and v.numerics.passed, (v.reason, v.failure)
    (finding,) = [f for f in v.findings if f.code == "scalar_global_loads"]
    assert "helion.Config(block_sizes=" in finding.hint and "tl.arange" not in finding.hint


def test_good_example_screened_on_the_cpu():
    # at its full row length: on a 256-long row its 16 warps would leave threads idle (a finding)
    problem = Problem(kind="kernelbench_file", name=SOFTMAX, shape={"ROWS": 8, "COLS": 8192})
    v = screen(Candidate(source=GOOD.read_text()), problem)
    assert v.status is Status.untimed, (v.reason, v.failure)
    assert v.numerics.checked and v.numerics.passed and v.numerics.executor == "interpreter"
    assert v.environment.dsl_versions["helion"] and v.environment.dsl_versions["triton"]
    (kernel,) = v.kernels
    assert kernel.name == "_helion_softmax_rows" and kernel.dsl == "helion" and kernel.launches == 1
    assert kernel.num_warps == 16 and kernel.constexprs["_RDIM_SIZE_1"] == 8192
    assert any("ran helion.Config(block_sizes=[1], num_warps=16, num_stages=1)" in n for n in v.notes)


def test_kernel_without_config_runs_helions_default_without_autotuning():
    problem = Problem(kind="kernelbench_file", name=ROWSUM, shape={"ROWS": 8, "COLS": 128})
    v = screen(Candidate(source=ROWSUM_NO_CONFIG), problem)
    assert v.status is Status.untimed and v.numerics.passed, (v.reason, v.failure)
    assert any("Helion's default config" in n and "autotune_effort='none'" in n for n in v.notes)
    assert v.seconds["total"] < 120  # no autotuning search


def test_helion_compile_error_is_a_compile_error():
    problem = Problem(kind="kernelbench_file", name=ROWSUM, shape={"ROWS": 8, "COLS": 128})
    v = screen(Candidate(source=COMPILE_ERROR), problem)
    assert v.reason is Reason.compile_error, (v.reason, v.failure)
    assert "Helion" in v.failure.message


@pytest.mark.gpu
@pytest.mark.parametrize("path", [GOOD, SLOW], ids=["good", "slow"])
def test_examples_timed_on_a_gpu(path):
    v = screen(Candidate(source=path.read_text()), Problem.file(SOFTMAX))
    assert v.numerics.passed and v.metrics is not None
    (kernel,) = v.kernels
    assert kernel.dsl == "helion" and kernel.registers
    if path is GOOD:
        assert v.status in (Status.accept, Status.structural)
    else:
        assert v.status in (Status.repair, Status.structural) and v.metrics.lre < 0.8
