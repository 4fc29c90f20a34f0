"""benchmarks/library_ops.py on the CPU: ``--smoke`` writes the JSON the H200 run will write."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from kernelgate import roofline
from kernelgate.hardware import match_spec
from kernelgate.reference_ops import get_op
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("library_ops_bench", ROOT / "benchmarks" / "library_ops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_run_writes_the_results_json(bench, tmp_path, capsys):
    out = tmp_path / "results" / "library_ops_smoke.json"
    assert bench.main(["--smoke", "--only", "matmul", "layernorm", "--reps", "3", "--out", str(out)]) == 0
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
    table = capsys.readouterr().out
    assert table.splitlines()[0].startswith("| op | dtype | shape |")
    assert sum(line.startswith("| matmul |") for line in table.splitlines()) == 3


def test_unknown_op_is_a_usage_error(bench, tmp_path):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--smoke", "--only", "no_such_op", "--out", str(tmp_path / "x.json")])
    assert exc.value.code == 2
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without a GPU gives")
def test_without_a_gpu_it_asks_for_smoke(bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--only", "matmul", "--out", str(tmp_path / "x.json")])
    assert exc.value.code == 2
    assert "--smoke" in capsys.readouterr().err


def test_table_shows_errors_and_flags(bench):
    base = {"name": "conv2d", "dtype": "float32", "shape": {"batch": 1}, "flops": 2e9, "bytes": 4e6,
            "t_library_ms": 0.1, "t_library_p20_ms": 0.09, "t_library_p80_ms": 0.11, "t_floor_ms": 0.2,
            "bound": "compute", "u_library": 2.0, "flag": "library above the naive bound",
            "kernels": [{"name": "sm90_xmma_fprop_implicit_gemm_tf32", "calls": 1, "device_us": 100.0}]}
    failed = {"name": "bmm", "dtype": "float16", "shape": {"batch": 1}, "error": "OutOfMemoryError: CUDA out of memory"}
    table = bench.markdown_table([base, failed]).splitlines()
    assert "library above the naive bound" in table[2] and "implicit_gemm_tf32" in table[2]
    assert "error: OutOfMemoryError" in table[3]


def test_dtype_filter(bench, tmp_path):
    out = tmp_path / "r.json"
    assert bench.main(["--smoke", "--only", "sdpa", "relu", "--dtypes", "bfloat16", "--reps", "2",
                       "--out", str(out)]) == 0
    got = [(e["name"], e["dtype"]) for e in json.loads(out.read_text())["ops"]]
    assert got == [("sdpa", "bfloat16")]  # relu is meant for fp32 only
