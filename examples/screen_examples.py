"""Screen the shipped example kernels on whatever device is here (the README's main command).

    ./kg examples                      # every case, a table at the end
    ./kg examples --only layernorm     # cases whose name contains the word
    ./kg examples --repeat 2 --out benchmarks/results/core_h200.json

On a GPU each case runs at its problem's own (KernelBench-sized) shape and is timed against the
library. Without one, the script says so and screens smaller shapes: Triton numerics in the
interpreter and artifacts compiled ahead of time for sm_90; TileLang lowered for sm_90a and CUDA
compiled for sm_90 with nvcc (static checks only: neither can run without a GPU); no timing.
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
    """What the kernel is written to earn on an H200: ``accept``, ``not accept`` (a flag: repair or structural),
    ``reject`` (wrong on purpose, e.g. TF32 on a strict-fp32 problem); ``either``: measured, no claim."""
    cpu_shape: dict[str, int] = field(default_factory=dict)

    def problem_spec(self, gpu: bool) -> Problem:
        """The problem at its own (KernelBench-sized) shape on a GPU, at ``cpu_shape`` without one."""
        return Problem(kind="kernelbench_file", name=str(HERE / self.problem), shape={} if gpu else self.cpu_shape)


CASES = [
    Case("layernorm_good", "triton/layernorm_good.py", "problems/layernorm.py", "accept",
         {"BATCH": 64, "HIDDEN": 1024}),
    Case("layernorm_bad", "triton/layernorm_bad.py", "problems/layernorm.py", "not accept",
         {"BATCH": 8, "HIDDEN": 512}),
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
    # TileLang
    Case("tilelang_rowsum_good", "tilelang/rowsum_good.py", "problems/rowsum.py", "accept", {"ROWS": 32, "COLS": 2048}),
    Case("tilelang_rowsum_good_bf16", "tilelang/rowsum_good.py", "problems/rowsum_bf16.py", "accept",
         {"ROWS": 32, "COLS": 2048}),
    Case("tilelang_rowsum_bad", "tilelang/rowsum_bad.py", "problems/rowsum.py", "not accept",
         {"ROWS": 256, "COLS": 512}),
    Case("tilelang_rmsnorm_good", "tilelang/rmsnorm_good.py", "problems/rmsnorm.py", "accept",
         {"BATCH": 64, "HIDDEN": 1024}),
    Case("tilelang_layernorm_good", "tilelang/layernorm_good.py", "problems/layernorm.py", "accept",
         {"BATCH": 64, "HIDDEN": 1024}),
    Case("tilelang_layernorm_good_kb", "tilelang/layernorm_good.py", "problems/layernorm_kb.py", "not accept",
         {"BATCH_SIZE": 2, "FEATURES": 4, "DIM1": 32, "DIM2": 32}),
    Case("tilelang_matmul_good_fp16", "tilelang/matmul_good.py", "problems/matmul_fp16.py", "accept",
         {"M": 256, "N": 256, "K": 128}),
    # T.gemm on fp32 operands runs in TF32: a precision downgrade on a strict-fp32 problem
    Case("tilelang_matmul_good_fp32", "tilelang/matmul_good.py", "problems/matmul.py", "reject",
         {"M": 256, "N": 256, "K": 128}),
    Case("tilelang_matmul_naive_fp16", "tilelang/matmul_naive.py", "problems/matmul_fp16.py", "not accept",
         {"M": 64, "N": 64, "K": 64}),
    # CUDA through load_inline
    Case("cuda_rowsum_good", "cuda/rowsum_good.py", "problems/rowsum.py", "accept", {"ROWS": 32, "COLS": 2048}),
    Case("cuda_rowsum_good_bf16", "cuda/rowsum_good.py", "problems/rowsum_bf16.py", "accept",
         {"ROWS": 32, "COLS": 2048}),
    Case("cuda_rowsum_bad", "cuda/rowsum_bad.py", "problems/rowsum.py", "not accept", {"ROWS": 8, "COLS": 512}),
    Case("cuda_rmsnorm_good", "cuda/rmsnorm_good.py", "problems/rmsnorm.py", "accept", {"BATCH": 64, "HIDDEN": 1024}),
    Case("cuda_matmul_good", "cuda/matmul_good.py", "problems/matmul.py", "either", {"M": 256, "N": 256, "K": 128}),
    Case("cuda_matmul_naive", "cuda/matmul_naive.py", "problems/matmul.py", "not accept", {"M": 64, "N": 64, "K": 64}),
]


def run_case(case: Case, gpu: bool) -> dict:
    source = (HERE / case.candidate).read_text()
    problem = case.problem_spec(gpu)
    started = time.perf_counter()
    verdict = screen(Candidate(source=source, name=case.name), problem, options=ScreenOptions())
    wall = time.perf_counter() - started
    m = verdict.metrics
    met = None
    if gpu and case.expect_gpu == "reject":
        met = verdict.status.value == "reject"
    elif gpu and case.expect_gpu != "either":
        met = verdict.status.value != "reject" and (verdict.status.value == "accept") == (case.expect_gpu == "accept")
    return {
        "case": case.name, "candidate": case.candidate, "problem": case.problem, "shape": problem.shape,
        "dsl": verdict.dsl, "status": verdict.status.value, "reason": verdict.reason.value if verdict.reason else None,
        "confidence": verdict.confidence, "expected_on_gpu": case.expect_gpu, "as_expected": met,
        "lre": m.lre if m else None, "lre_interval": [m.lre_low, m.lre_high] if m else None,
        "u_candidate": m.u_candidate if m else None, "u_library": m.u_library if m else None,
        "t_candidate_ms": m.t_candidate_ms if m else None, "t_library_ms": m.t_library_ms if m else None,
        "t_floor_ms": m.t_floor_ms if m else None, "bound": m.bound if m else None,
        "peaks_source": m.peaks.source if m else None,
        "findings": [f.code for f in verdict.findings],
        "findings_by_kernel": _findings_by_kernel(verdict.findings), "feedback": verdict.feedback,
        "candidate_samples_ms": verdict.timing.candidate.samples_ms if verdict.timing else None,
        "library_samples_ms": verdict.timing.library.samples_ms if verdict.timing else None,
        "kernels": [{"name": k.name, "registers": k.registers, "spill_bytes": k.spill_bytes, "grid": k.grid,
                     "launches": k.launches, "from_cache": k.from_cache} for k in verdict.kernels],
        "numerics_passed": verdict.numerics.passed if verdict.numerics else None,
        "failure": verdict.failure.message[:600] if verdict.failure else None,
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
        print("No GPU on this machine: screening smaller shapes. Triton runs in its interpreter and is compiled "
              "ahead of time for sm_90; TileLang is lowered for sm_90a and CUDA compiled with nvcc for sm_90, "
              "checked statically (neither can run without a GPU). Nothing is timed, so no efficiency verdicts "
              "(status untimed, or repair where the compiled code shows a defect).\n")
    else:
        print(f"GPU: {device.name} ({device.sm_count} SMs); timing every case against the library.\n")
    cases = [c for c in CASES if not args.only or any(w in c.name for w in args.only)]
    rows = []
    total = len(cases) * args.repeat
    width = len(str(total))
    for case in cases:
        for rep in range(args.repeat):
            row = run_case(case, gpu)
            row["repeat"] = rep
            rows.append(row)
            print(f"[{len(rows):>{width}}/{total}] {case.name:<26} {row['status']:<10} {row['reason'] or '':<18} "
                  + (f"LRE {row['lre']:.3f} U {row['u_candidate']:.3f} (lib U {row['u_library']:.3f}) "
                     if row["lre"] is not None else "")
                  + f"{row['wall_seconds']:.1f}s", flush=True)
            for kernel, codes in row["findings_by_kernel"].items():
                print(f"{'':{2 * width + 4}}{case.name}: {kernel}: {', '.join(codes)}", flush=True)
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
    print(f"\n{len(rows)} screened: " + ", ".join(f"{n} {status}" for status, n in summary["statuses"].items()))
    return 0 if all(r["as_expected"] is not False for r in rows) else 1


WHOLE_CANDIDATE = "(whole candidate)"
"""How a finding that names no kernel is listed."""


def _findings_by_kernel(findings) -> dict[str, list[str]]:
    """Finding codes grouped under the kernel each concerns (a code once per kernel), in order."""
    grouped: dict[str, list[str]] = {}
    for f in findings:
        codes = grouped.setdefault(f.kernel or WHOLE_CANDIDATE, [])
        if f.code not in codes:
            codes.append(f.code)
    return grouped


def _summary(rows: list[dict], gpu: bool) -> dict:
    out: dict = {"cases": len({r["case"] for r in rows}), "screens": len(rows)}
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    out["statuses"] = dict(sorted(statuses.items(), key=lambda item: (-item[1], item[0])))
    screen_s = [r["wall_seconds"] - r["compile_seconds"] for r in rows]
    out["seconds_per_screen_excluding_compile_median"] = round(statistics.median(screen_s), 3) if rows else None
    out["seconds_per_screen_median"] = round(statistics.median(r["wall_seconds"] for r in rows), 3) if rows else None
    if gpu:
        out["as_expected"] = sum(bool(r["as_expected"]) for r in rows)
        out["with_expectation"] = sum(r["as_expected"] is not None for r in rows)
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
