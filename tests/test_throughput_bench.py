"""benchmarks/throughput.py and benchmarks/mutate.py, run as scripts (benchmarks are not imported by tests):
the mutation of every example, the mutated Triton kernels in the interpreter, and a CPU cold + warm run."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import ROOT

MUTATE = ROOT / "benchmarks" / "mutate.py"
THROUGHPUT = ROOT / "benchmarks" / "throughput.py"
EXAMPLES = ROOT / "examples"


def _run(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=env)


def _report(paths: list[Path], tag: str, *extra: str) -> dict:
    done = _run(str(MUTATE), *map(str, paths), "--tag", tag, "--report", *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return {Path(p).relative_to(EXAMPLES).as_posix(): r for p, r in json.loads(done.stdout).items()}


def test_every_example_kernel_is_renamed_and_triton_launches_retuned():
    paths = sorted(p for dsl in ("triton", "tilelang", "cuda") for p in (EXAMPLES / dsl).glob("*.py"))
    one, two = _report(paths, "t1", "--warps", "double"), _report(paths, "t2")
    for path in paths:
        name, text = path.relative_to(EXAMPLES).as_posix(), path.read_text()
        first, second = one[name], two[name]
        assert first["renamed"] and all(new == f"{old}_t1" for old, new in first["renamed"].items()), name
        assert len({first["sha256_before"], first["sha256_after"], second["sha256_after"]}) == 3, name
        if name.startswith("triton/") and "autotune" not in text:
            assert len(first["retuned"]) >= 1, name
        if name.startswith("cuda/"):  # the __global__ function and the extension's module both
            assert len(first["renamed"]) == 2 and any(k.startswith("kg_") for k in first["renamed"]), name
        assert second["retuned"] == [], name  # no --warps: rename only
    assert one["triton/gelu_autotuned.py"]["retuned"] == []  # triton.Config entries are left alone
    assert sorted(one["triton/softmax_bad.py"]["renamed"]) == ["_normalize_kernel", "_row_max_kernel",
                                                              "_row_sumexp_kernel"]
    bad = _run(str(MUTATE), str(EXAMPLES / "problems" / "rowsum.py"), "--tag", "t1", "--report")
    assert bad.returncode == 1 and "no kernel found" in bad.stdout  # a source with no kernel is not "mutated"


def test_mutated_sources_rename_every_use(tmp_path):
    cuda = _run(str(MUTATE), str(EXAMPLES / "cuda" / "rowsum_good.py"), "--tag", "z9").stdout
    assert "rowsum_kernel<" not in cuda and cuda.count("rowsum_kernel_z9<scalar_t") == 2
    assert "__launch_bounds__(kThreads) rowsum_kernel_z9(" in cuda and "name='kg_rowsum_good_cuda_z9'" in cuda
    tile = _run(str(MUTATE), str(EXAMPLES / "tilelang" / "matmul_good.py"), "--tag", "z9").stdout
    assert "def matmul_z9(" in tile and "return matmul_z9" in tile and "T.gemm(" in tile  # attributes untouched
    compile(tile, "tile.py", "exec")


CHECK = textwrap.dedent("""
    import importlib.util, json, sys
    import torch

    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    out = {}
    for i, (candidate, problem, shape) in enumerate(json.loads(sys.argv[1])):
        ref = load(problem, f"problem{i}")
        for key, value in shape.items():
            setattr(ref, key, value)
        torch.manual_seed(0)
        init, inputs = ref.get_init_inputs(), ref.get_inputs()
        model, new = ref.Model(*init), load(candidate, f"candidate{i}").ModelNew(*init)
        new.load_state_dict(model.state_dict())
        with torch.no_grad():
            want, got = model(*inputs), new(*inputs)
        out[candidate] = bool(torch.allclose(got, want, rtol=1e-4, atol=1e-5))
    print(json.dumps(out))
""")


def test_mutated_triton_kernels_compute_the_same_in_the_interpreter(tmp_path):
    cases = [("rowsum_good", "rowsum.py", {"ROWS": 8, "COLS": 600}),
             ("rowsum_bad", "rowsum.py", {"ROWS": 4, "COLS": 100}),
             ("softmax_good", "softmax.py", {"ROWS": 4, "COLS": 300}),
             ("softmax_bad", "softmax.py", {"ROWS": 4, "COLS": 70}),
             ("layernorm_split", "layernorm_kb.py", {"BATCH_SIZE": 2, "FEATURES": 4, "DIM1": 8, "DIM2": 16}),
             ("layernorm_good", "layernorm.py", {"BATCH": 4, "HIDDEN": 200})]
    jobs = []
    for i, (kernel, problem, shape) in enumerate(cases):
        source = EXAMPLES / "triton" / f"{kernel}.py"
        done = _run(str(MUTATE), str(source), "--tag", f"m{i}", "--warps", "half" if i % 2 else "double")
        assert done.returncode == 0, done.stderr
        assert done.stdout != source.read_text() and f"_m{i}[" in done.stdout
        path = tmp_path / f"{kernel}_m{i}.py"
        path.write_text(done.stdout)
        jobs.append((str(path), str(EXAMPLES / "problems" / problem), shape))
    env = {**os.environ, "TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    done = _run("-c", CHECK, json.dumps(jobs), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {path: True for path, _, _ in jobs}


def test_cold_then_warm_rows_on_the_cpu(tmp_path):
    out, caches = tmp_path / "throughput.json", tmp_path / "caches"
    done = _run(str(THROUGHPUT), "--modes", "cold", "warm", "--only", "softmax_good", "--copies", "1",
                "--cache-root", str(caches), "--out", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["command"].startswith("python benchmarks/throughput.py --modes cold warm")
    assert record["batch"]["candidates"] == 1 and record["batch"]["cases"] == ["softmax_good"]
    assert list(record["modes"]) == ["cold", "warm"] and set(record["candidates_per_hour"]) == {"cold", "warm"}
    assert all(v is not None and v > 0 for v in record["candidates_per_hour"].values())
    mutated = record["sources"]["default"]
    assert len(mutated) == 1 and mutated[0]["source_sha256"] != record["original_sha256"]["softmax_good"]
    assert mutated[0]["renamed"] and mutated[0]["retuned"]
    cold, warm = record["modes"]["cold"], record["modes"]["warm"]
    for row in (cold, warm):
        summary = row["summary"]
        assert summary["candidates"] == len(row["candidates"]) == 1 == sum(summary["by_status"].values())
        # the mutated kernel still passes its numerics in the interpreter: untimed, not a reject
        assert summary["by_status"] == {"untimed": 1}
        assert [c["source_sha256"] for c in row["candidates"]] == [mutated[0]["source_sha256"]]
        raw = row["raw_seconds"]
        assert len(raw["total"]) == 1 and statistics.median(raw["total"]) == summary["median_seconds"]
        for stage, median in summary["median_stage_seconds"].items():
            assert round(statistics.median(v for v in raw["stages"][stage] if v is not None), 4) == median
        assert row["settings"]["compile_cache"] is True and row["settings"]["concurrency"] is None  # CPU lanes
    assert "never seen" in cold["sources"] and "cold row's" in warm["sources"]
    # cold starts from an empty cache and fills it; warm finds it filled
    assert cold["cache"]["files_before"] == 0 and cold["cache"]["files_after"] > 0
    assert warm["cache"]["files_before"] == cold["cache"]["files_after"]
    assert any((caches / "default" / "compile" / "triton").rglob("*"))  # Triton compiled into the fresh cache


def test_mode_and_option_mistakes_are_refused_before_screening(tmp_path):
    out = str(tmp_path / "x.json")
    for args in (["--modes", "warm"], ["--modes", "warm-best", "cold-best"], ["--modes", "cold", "--repeat", "2"],
                 ["--modes", "cold", "--compile-cache"]):
        done = _run(str(THROUGHPUT), *args, "--out", out, timeout=120)
        assert done.returncode == 2 and "error:" in done.stderr, (args, done.stderr[-500:])
    assert not Path(out).exists()
