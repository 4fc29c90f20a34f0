"""benchmarks/throughput.py: the LRE spread over runs, and a small CPU run that writes the results JSON."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "examples")]
    spec = importlib.util.spec_from_file_location("throughput_bench", ROOT / "benchmarks" / "throughput.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["throughput_bench"] = module
    spec.loader.exec_module(module)
    return module


def _run(*rows: tuple[int, float | None, float | None]) -> dict:
    return {"candidates": [{"index": i, "lre": lre, "t_candidate_ms": t} for i, lre, t in rows]}


def test_lre_spread_per_candidate_apart_for_long_and_short_kernels(bench):
    runs = [_run((0, 1.00, 0.2), (1, 0.50, 0.01), (2, None, None)),
            _run((0, 1.02, 0.2), (1, 0.60, 0.01), (2, None, None)),
            _run((0, 0.98, 0.2), (1, 0.55, 0.01), (2, 0.9, 1.0))]
    spread = bench.lre_spread(runs)
    assert spread["runs"] == 3 and spread["threshold_ms"] == 0.05
    assert spread["long"]["candidates"] == 1 and spread["long"]["max"] == pytest.approx(0.04)
    assert spread["long"]["under_3_percent"] == 0
    assert spread["short"]["candidates"] == 1 and spread["short"]["median"] == pytest.approx(0.1 / 0.55, rel=1e-3)
    # a candidate timed in one run only has no spread
    assert spread["long"]["candidates"] + spread["short"]["candidates"] == 2


def test_cpu_run_writes_every_candidate_of_every_run(bench, tmp_path):
    first = tmp_path / "first.json"
    out = tmp_path / "throughput.json"
    args = ["--only", "softmax_good", "--copies", "2"]
    assert bench.main([*args, "--repeat", "1", "--out", str(first)]) == 0
    assert bench.main([*args, "--repeat", "2", "--resume", str(first), "--out", str(out)]) == 0  # one run more
    assert bench.main(["--only", "rowsum_good", "--copies", "2", "--repeat", "2", "--resume", str(first),
                       "--out", str(tmp_path / "other.json")]) == 2  # another batch is not resumed
    record = json.loads(out.read_text())
    assert [c["command"] for c in record["earlier_commands"]] == [json.loads(first.read_text())["command"]]
    assert record["batch"]["candidates"] == 2 and record["batch"]["cases"] == ["softmax_good"]
    assert [len(run["candidates"]) for run in record["runs"]] == [2, 2]
    for run in record["runs"]:
        summary = run["summary"]
        assert summary["candidates"] == 2 and summary["by_status"] == {"untimed": 2}
        assert {"load", "numerics", "artifacts"} <= set(summary["median_stage_seconds"])
        assert sorted(r["index"] for r in run["candidates"]) == [0, 1]
    assert record["options"]["concurrency"] is None  # no GPU: CPU lanes
    assert record["command"].startswith("python benchmarks/throughput.py --only softmax_good")
