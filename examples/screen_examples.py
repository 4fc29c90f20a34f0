"""Screen the shipped example kernels on whatever device is here (the README's main command).

    ./kg examples                      # every case, a table at the end
    ./kg examples --only layernorm     # cases whose name contains the word
    ./kg examples --repeat 2 --out benchmarks/results/core_h200.json

On a GPU each case runs at its problem's own (KernelBench-sized) shape and is timed against the
library. Without one, the script says so and screens smaller shapes: numerics in the Triton
interpreter, artifacts compiled ahead of time for sm_90, no timing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelgate import Candidate, Problem, ScreenOptions, __version__, screen
from kernelgate.hardware import detect

HERE = Path(__file__).resolve().parent


@dataclass
class Case:
    name: str
    candidate: str
    problem: str
    expect_gpu: str
    """``accept`` or ``not accept``: what the kernel is written to earn on an H200."""
    cpu_shape: dict[str, int] = field(default_factory=dict)


CASES = [
    Case("layernorm_good", "triton/layernorm_good.py", "problems/layernorm.py", "accept", {"BATCH": 64, "HIDDEN": 1024}),
    Case("layernorm_bad", "triton/layernorm_bad.py", "problems/layernorm.py", "not accept", {"BATCH": 8, "HIDDEN": 512}),
    Case("layernorm_split_kb", "triton/layernorm_split.py", "problems/layernorm_kb.py", "accept",
         {"BATCH_SIZE": 2, "FEATURES": 4, "DIM1": 32, "DIM2": 32}),
    Case("layernorm_good_kb", "triton/layernorm_good.py", "problems/layernorm_kb.py", "not accept",
         {"BATCH_SIZE": 2, "FEATURES": 4, "DIM1": 32, "DIM2": 32}),
    Case("softmax_good", "triton/softmax_good.py", "problems/softmax.py", "accept", {"ROWS": 32, "COLS": 2048}),
    Case("softmax_bad", "triton/softmax_bad.py", "problems/softmax.py", "not accept", {"ROWS": 4, "COLS": 256}),
    Case("rowsum_good", "triton/rowsum_good.py", "problems/rowsum.py", "accept", {"ROWS": 32, "COLS": 2048}),
    Case("rowsum_bad", "triton/rowsum_bad.py", "problems/rowsum.py", "not accept", {"ROWS": 8, "COLS": 512}),
    Case("matmul_good", "triton/matmul_good.py", "problems/matmul.py", "accept", {"M": 128, "N": 128, "K": 64}),
    Case("matmul_naive", "triton/matmul_naive.py", "problems/matmul.py", "not accept", {"M": 16, "N": 16, "K": 64}),
]


def run_case(case: Case, gpu: bool) -> dict:
    source = (HERE / case.candidate).read_text()
    problem = Problem(kind="kernelbench_file", name=str(HERE / case.problem), shape={} if gpu else case.cpu_shape)
    started = time.perf_counter()
    verdict = screen(Candidate(source=source, name=case.name), problem, options=ScreenOptions())
    wall = time.perf_counter() - started
    m = verdict.metrics
    met = None
    if gpu:
        met = (verdict.status.value == "accept") == (case.expect_gpu == "accept")
    return {
        "case": case.name, "candidate": case.candidate, "problem": case.problem, "shape": problem.shape,
        "status": verdict.status.value, "reason": verdict.reason.value if verdict.reason else None,
        "confidence": verdict.confidence, "expected_on_gpu": case.expect_gpu, "as_expected": met,
        "lre": m.lre if m else None, "lre_interval": [m.lre_low, m.lre_high] if m else None,
        "u_candidate": m.u_candidate if m else None, "u_library": m.u_library if m else None,
        "t_candidate_ms": m.t_candidate_ms if m else None, "t_library_ms": m.t_library_ms if m else None,
        "t_floor_ms": m.t_floor_ms if m else None, "bound": m.bound if m else None,
        "peaks_source": m.peaks.source if m else None,
        "findings": [f.code for f in verdict.findings], "feedback": verdict.feedback,
        "candidate_samples_ms": verdict.timing.candidate.samples_ms if verdict.timing else None,
        "library_samples_ms": verdict.timing.library.samples_ms if verdict.timing else None,
        "seconds": verdict.seconds, "wall_seconds": round(wall, 3),
        "compile_seconds": verdict.seconds.get("compile", 0.0),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="run cases whose name contains one of these words")
    parser.add_argument("--repeat", type=int, default=1, help="screen each case this many times (LRE repeatability)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    device = detect()
    gpu = device is not None
    if not gpu:
        print("No GPU on this machine: screening smaller shapes with the Triton interpreter and ahead-of-time "
              "compilation for sm_90; nothing is timed, so no efficiency verdicts (status untimed or repair).\n")
    else:
        print(f"GPU: {device.name} ({device.sm_count} SMs); timing every case against the library.\n")
    cases = [c for c in CASES if not args.only or any(w in c.name for w in args.only)]
    rows = []
    for case in cases:
        for rep in range(args.repeat):
            row = run_case(case, gpu)
            row["repeat"] = rep
            rows.append(row)
            print(f"{case.name:<20} {row['status']:<10} {row['reason'] or '':<18} "
                  + (f"LRE {row['lre']:.3f} U {row['u_candidate']:.3f} (lib U {row['u_library']:.3f}) "
                     if row["lre"] is not None else "")
                  + f"[{', '.join(row['findings'])}] {row['wall_seconds']:.1f}s", flush=True)
    summary = _summary(rows, gpu)
    if args.out:
        import torch
        import triton

        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "command": "./kg examples " + " ".join(sys.argv[1:]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": device.model_dump(mode="json") if device else None,
            "versions": {"kernelgate": __version__, "torch": torch.__version__, "triton": triton.__version__,
                         "python": platform.python_version()},
            "summary": summary, "results": rows}, indent=2))
        print(f"\nwrote {args.out}")
    print("\n" + json.dumps(summary, indent=2))
    return 0 if all(r["as_expected"] is not False for r in rows) else 1


def _summary(rows: list[dict], gpu: bool) -> dict:
    out: dict = {"cases": len({r["case"] for r in rows}), "screens": len(rows)}
    screen_s = [r["wall_seconds"] - r["compile_seconds"] for r in rows]
    out["seconds_per_screen_excluding_compile_median"] = round(statistics.median(screen_s), 3) if rows else None
    out["seconds_per_screen_median"] = round(statistics.median(r["wall_seconds"] for r in rows), 3) if rows else None
    if gpu:
        out["as_expected"] = sum(bool(r["as_expected"]) for r in rows)
        drift = {}
        for case in {r["case"] for r in rows}:
            lres = [r["lre"] for r in rows if r["case"] == case and r["lre"] is not None]
            if len(lres) >= 2:
                drift[case] = round(abs(lres[1] - lres[0]) / lres[0], 4)
        if drift:
            out["lre_relative_change_between_two_screens"] = drift
            out["lre_relative_change_max"] = max(drift.values())
    return out


if __name__ == "__main__":
    sys.exit(main())
