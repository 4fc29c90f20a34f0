"""One KernelBench batch end to end: a checkout, a runs folder, the verdict log and the HTML report.

    python benchmarks/kernelbench_batch.py --out benchmarks/results/kernelbench_batch_h200.json \
        --log /tmp/kg.sqlite --report /tmp/report

It does what a user does with the CLI (``kernelgate batch`` then ``kernelgate report``) on the
shipped synthetic checkout (``examples/kernelbench``) and its ``runs/triton_demo`` generations, and
records the device, versions, date, command, every verdict, KernelBench's ``eval_results.json``
fields and the seconds per kernel, so the run can be repeated and compared.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from kernelgate import __version__  # noqa: E402
from kernelgate.adapters.batch import kernelbench_eval_results, screen_runs  # noqa: E402
from kernelgate.hardware import detect  # noqa: E402
from kernelgate.report import write_report  # noqa: E402
from kernelgate.store import VerdictLog  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the results JSON to write")
    parser.add_argument("--log", required=True, help="the verdict log (SQLite) to write")
    parser.add_argument("--report", required=True, help="folder for the HTML report")
    parser.add_argument("--kernelbench", default=str(ROOT / "examples/kernelbench"))
    parser.add_argument("--runs", default=str(ROOT / "examples/kernelbench/runs/triton_demo"))
    parser.add_argument("--level", type=int, default=1)
    args = parser.parse_args(argv)

    import torch
    import triton

    device = detect()
    began = time.perf_counter()
    with VerdictLog(args.log) as log:
        result = screen_runs(args.kernelbench, args.level, args.runs, log=log)
        report = write_report(log, result.batch, args.report)
    seconds = time.perf_counter() - began
    items = [{"file": item.generation.path.name, "problem_id": item.generation.problem_id,
              "sample_id": item.generation.sample_id, "status": item.verdict.status.value,
              "reason": item.verdict.reason.value if item.verdict.reason else None,
              "lre": item.verdict.metrics.lre if item.verdict.metrics else None,
              "u_candidate": item.verdict.metrics.u_candidate if item.verdict.metrics else None,
              "u_library": item.verdict.metrics.u_library if item.verdict.metrics else None,
              "findings": [f.code for f in item.verdict.findings],
              "feedback": item.verdict.feedback, "seconds": item.verdict.seconds} for item in result.items]
    record = {
        "command": " ".join(["python benchmarks/kernelbench_batch.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device.model_dump(mode="json") if device else None,
        "versions": {"kernelgate": __version__, "torch": torch.__version__, "triton": triton.__version__,
                     "python": platform.python_version()},
        "batch": result.batch, "counts": result.counts(), "seconds_total": round(seconds, 2),
        "skipped": [[g.path.name, why] for g, why in result.skipped],
        "report": Path(report).name, "verdicts": items,
        "kernelbench_eval_results": kernelbench_eval_results(result),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({"counts": record["counts"], "seconds_total": record["seconds_total"],
                      "skipped": len(result.skipped)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
