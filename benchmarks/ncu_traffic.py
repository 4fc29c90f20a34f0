"""DRAM bytes really moved, against the compulsory bytes: study kernels screened with the Nsight Compute pass.

    python benchmarks/ncu_traffic.py --out benchmarks/results/ncu_traffic_h200.json
    python benchmarks/ncu_traffic.py --only rowsum --out /tmp/ncu.json

Each case is screened alone with ``ScreenOptions(ncu=True)``: the usual screen, then one more
process under ``ncu`` that profiles a single call (``kernelgate/ncu.py``). Per case the JSON holds
the verdict, LRE, U, the compulsory bytes of the roofline, the DRAM bytes ncu counted (read and
written, per kernel) and their ratio. A ratio near 1 says the kernel reads its operands once; well
above 1, that it reads them again (a GEMM without reuse through shared memory, a multi-pass
normalization). Without ncu (or without a GPU) each case carries the verdict's note saying why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

from _record import run_header  # noqa: E402
from study import CORPUS, EXAMPLES  # noqa: E402

from kernelgate import Candidate, ScreenOptions, screen  # noqa: E402
from kernelgate.hardware import detect  # noqa: E402

DEFAULT_CASES = ("triton_rowsum_bad", "triton_rowsum_good", "triton_layernorm_bad", "triton_layernorm_good",
                 "triton_matmul_naive", "triton_matmul_good", "tilelang_layernorm_serial", "tilelang_layernorm_good",
                 "tilelang_matmul_naive", "tilelang_matmul_good", "tilelang_conv2d_slow",
                 "tilelang_conv2d_nhwc_transpose")


def _row(name: str, verdict) -> dict:
    m = verdict.metrics
    report = verdict.ncu
    ratio = (m.dram_bytes / m.bytes_compulsory) if m and m.dram_bytes and m.bytes_compulsory else None
    return {
        "name": name, "status": verdict.status.value, "reason": verdict.reason.value if verdict.reason else None,
        "lre": m.lre if m else None, "u_candidate": m.u_candidate if m else None,
        "t_candidate_ms": m.t_candidate_ms if m else None, "bytes_compulsory": m.bytes_compulsory if m else None,
        "dram_bytes": m.dram_bytes if m else None, "traffic_ratio": ratio,
        "kernels": [k.model_dump(mode="json") for k in report.kernels] if report else [],
        "ncu_command": report.command if report else None,
        "ncu_seconds": verdict.seconds.get("ncu"),
        "notes": [n for n in verdict.notes if "ncu" in n],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--only", nargs="+", metavar="WORD", help="cases whose name contains one of these words "
                        "(default: a slow and a fast kernel of five ops)")
    args = parser.parse_args(argv)
    gpu = detect() is not None
    cases = [c for c in CORPUS if (any(w in c.name for w in args.only) if args.only else c.name in DEFAULT_CASES)]
    rows = []
    for case in cases:
        verdict = screen(Candidate(source=(EXAMPLES / case.kernel).read_text(), name=case.name), case.problem(gpu),
                         options=ScreenOptions(ncu=True))
        row = _row(case.name, verdict)
        rows.append(row)
        ratio = f"{row['traffic_ratio']:.2f}x compulsory" if row["traffic_ratio"] else "; ".join(row["notes"])[:120]
        print(f"  {case.name:<32} {row['status']:<10} {ratio}", flush=True)
    record = {**run_header("python benchmarks/ncu_traffic.py", argv), "cases": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
