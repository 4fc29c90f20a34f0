"""benchmarks/library_ops.py on the CPU, through its command line: ``--smoke`` writes the JSON the H200
run will write, and prints the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from kernelgate import roofline
from kernelgate.hardware import match_spec
from kernelgate.reference_ops import get_op
from tests.conftest import ROOT


SCRIPT = ROOT / "benchmarks" / "library_ops.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env=env)


def test_smoke_run_writes_the_results_json(tmp_path):
    out = tmp_path / "results" / "library_ops_smoke.json"
    done = _run("--smoke", "--only", "matmul", "layernorm", "--reps", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["smoke"] is True
    assert record["command"].startswith("python benchmarks/library_ops.py --smoke --only matmul layernorm")
    assert {"torch", "triton", "python", "kernelgate"} <= set(record["versions"])
    assert record["date"] and record["device"]["name"].startswith("cpu")
    peaks = match_spec("NVIDIA H200")
    assert record["peaks"]["bw_gbs"] == peaks.bw_gbs and "smoke" in record["peaks_note"]
    got = [(e["name"], e["dtype"]) for e in record["ops"]]
    assert got == [(n, d) for n in ("matmul", "layernorm") for d in ("float32", "float16", "bfloat16")]
    for e in record["ops"]:
        op = get_op(e["name"])
        shape = op.shape(op.smoke_shape)
        element = torch.empty((), dtype=getattr(torch, e["dtype"])).element_size()
        assert e["shape"] == shape and e["category"] == op.category
        assert e["flops"] == op.flops(shape) and e["bytes"] == op.bytes_compulsory(shape, element)
        assert e["reps"] == 3 and 0 < e["t_library_p20_ms"] <= e["t_library_ms"] <= e["t_library_p80_ms"]
        assert e["t_library_repeat_ms"] > 0
        mode = op.math_mode(e["dtype"])
        assert e["math_mode"] == mode.value and e["peak_mode"] == op.peak_mode(e["dtype"]).value
        assert e["t_floor_ms"] == roofline.t_floor_ms(e["flops"], e["bytes"], peaks, mode)
        assert e["bound"] == roofline.bound(e["flops"], e["bytes"], peaks, mode)
        assert e["u_library"] == pytest.approx(e["t_floor_ms"] / e["t_library_ms"])
        expected_flag = ("library far below the bound" if e["u_library"] < 0.3 else
                         "library above the naive bound" if e["u_library"] > 1 else None)
        assert e["flag"] == expected_flag
        assert e["kernels"], "the profiled call recorded nothing"
    names = {k["name"] for e in record["ops"] if e["name"] == "matmul" for k in e["kernels"]}
    assert any(n.startswith("aten::mm") or n == "aten::matmul" for n in names), names
    table = done.stdout
    assert table.splitlines()[0].startswith("| op | dtype | shape |")
    assert sum(line.startswith("| matmul |") for line in table.splitlines()) == 3


def test_unknown_op_is_a_usage_error(tmp_path):
    done = _run("--smoke", "--only", "no_such_op", "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2 and "no_such_op" in done.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without a GPU gives")
def test_without_a_gpu_it_asks_for_smoke(tmp_path):
    done = _run("--only", "matmul", "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2 and "--smoke" in done.stderr


def test_dtype_filter(tmp_path):
    out = tmp_path / "r.json"
    done = _run("--smoke", "--only", "sdpa", "relu", "--dtypes", "bfloat16", "--reps", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    got = [(e["name"], e["dtype"]) for e in json.loads(out.read_text())["ops"]]
    assert got == [("sdpa", "bfloat16")]  # relu is meant for fp32 only
