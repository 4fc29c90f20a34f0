"""Screen every hostile fixture (exploits and faults) and write what the gate said about each.

    python benchmarks/hostile.py --out benchmarks/results/hostile_h200.json     # on the H200
    python benchmarks/hostile.py --out /tmp/hostile_cpu.json                    # CPU: GPU cases skipped
    python benchmarks/hostile.py --table benchmarks/results/hostile_h200.json benchmarks/results/hostile_cpu.json

One worker pool serves every case, in order, and a known-good kernel is screened before and after
the batch (and after every fault with --check-between), so the file also shows that the gate kept
serving.
Each record: fixture, kind, layer, expected, got, caught, status, seconds, message (trimmed).
The header has the device, versions, date and the command line. Exit status 1 if any case was
not caught or the good kernel was rejected.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # the installed kernelgate first (its adapters live outside the source folder)

from kernelgate import Candidate, screen  # noqa: E402
from kernelgate.worker import WorkerPool  # noqa: E402
from tests.hostile_cases import ALL, FIXTURES, OPTIONS, PROBLEM  # noqa: E402


def _environment() -> dict:
    import torch
    import triton

    cuda = torch.cuda.is_available()
    return {"device": torch.cuda.get_device_name(0) if cuda else "cpu (Triton interpreter)",
            "gpu": cuda, "torch": torch.__version__, "triton": triton.__version__,
            "python": platform.python_version(), "platform": platform.platform(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.executable).name] + sys.argv), "commit": _commit()}


def _commit() -> str | None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _record import commit

    return commit()


def _good(pool: WorkerPool) -> dict:
    began = time.perf_counter()
    v = screen(Candidate(source=(FIXTURES / "rowsum_good.py").read_text(), entry="kernel", name="rowsum_good.py"),
               PROBLEM, options=OPTIONS, runner=pool)
    return {"fixture": "rowsum_good.py", "status": v.status.value, "reason": v.reason.value if v.reason else None,
            "served": v.status.value != "reject", "seconds": round(time.perf_counter() - began, 2)}


def markdown_table(results: list[Path]) -> str:
    """One row per fixture, one column per results file: what was tried, and what the gate said."""
    runs = [json.loads(Path(p).read_text()) for p in results]
    head = "| fixture | kind | what it tries | expected | " + " | ".join(
        f"{r['environment']['device']}" for r in runs) + " |"
    lines = [head, "|" + " --- |" * (4 + len(runs))]
    by_run = [{c["fixture"]: c for c in r["cases"]} for r in runs]
    for case in runs[0]["cases"]:
        cells = []
        for cases in by_run:
            c = cases.get(case["fixture"])
            cells.append("not run" if c is None else f"skipped ({c['skipped']})" if c.get("caught") is None
                         else f"caught: {c['got']}" if c["caught"] else f"**survived**: {c['got']}")
        what = re.split(r"[.;:] ", case["what"])[0].rstrip(".")[:140].replace("|", "/")
        lines.append(f"| `{Path(case['fixture']).stem}` | {case['kind']} | {what} | {case['expected']} | "
                     + " | ".join(cells) + " |")
    totals = [f"{r['summary']['caught']} of {r['summary']['tried']} caught, "
              f"{len(r['summary']['survived'])} survived, {len(r['summary']['skipped'])} skipped; "
              f"good kernel served: {r['summary']['good_kernel_served']}" for r in runs]
    lines.append("| **total** | | | | " + " | ".join(totals) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the results JSON to write")
    parser.add_argument("--only", nargs="*", help="fixture names (stems) to run")
    parser.add_argument("--check-between", action="store_true", help="screen the good kernel after every fault")
    parser.add_argument("--table", nargs="+", type=Path, metavar="RESULTS_JSON",
                        help="print the markdown table of docs/hostile.md from results files, run nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(markdown_table(args.table))
        return 0
    if not args.out:
        parser.error("--out is required to run the fixtures")
    env = _environment()
    pool = WorkerPool(spares=1)
    records, good = [], []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def write() -> dict:  # after every case, so a run cut short still leaves what it found
        ran = [r for r in records if r.get("caught") is not None]
        summary = {"tried": len(ran), "caught": sum(bool(r["caught"]) for r in ran),
                   "survived": [r["fixture"] for r in ran if not r["caught"]],
                   "skipped": [r["fixture"] for r in records if r.get("caught") is None],
                   "good_kernel_served": bool(good) and all(g["served"] for g in good)}
        out.write_text(json.dumps({"environment": env, "problem": PROBLEM.model_dump(),
                                   "options": OPTIONS.model_dump(), "summary": summary,
                                   "cases": records, "good_kernel": good}, indent=2) + "\n")
        return summary

    try:
        good.append(_good(pool))  # first, so no case pays for a fresh machine's first compile and CUDA start
        for case in ALL:
            if args.only and case.name not in args.only:
                continue
            record = {"fixture": case.fixture, "kind": case.kind, "layer": case.layer, "what": case.what,
                      "expected": case.expected.value, "gpu_only": case.gpu}
            if case.gpu and not env["gpu"]:
                records.append({**record, "got": None, "caught": None, "skipped": "needs a CUDA GPU"})
                print(f"{case.name:<28} skipped (needs a CUDA GPU)", flush=True)
                continue
            began = time.perf_counter()
            v = screen(Candidate(source=(FIXTURES / case.fixture).read_text(), entry=case.entry, name=case.name),
                       PROBLEM, options=case.screen_options(), runner=pool)
            got = v.reason.value if v.reason else None
            caught = v.status.value == "reject" and case.accepts(v.reason, env["gpu"])
            records.append({**record, "got": got, "status": v.status.value, "caught": caught,
                            "seconds": round(time.perf_counter() - began, 2),
                            "message": (v.failure.message if v.failure else "")[:600]})
            print(f"{case.name:<28} expected {case.expected.value:<20} got {got!s:<20} "
                  f"{'caught' if caught else 'SURVIVED'} ({records[-1]['seconds']} s)", flush=True)
            if args.check_between and case.kind == "fault":
                good.append(_good(pool))
            write()
        good.append(_good(pool))
    finally:
        pool.close()
    summary = write()
    print(json.dumps(summary))
    return 0 if not summary["survived"] and summary["good_kernel_served"] else 1


if __name__ == "__main__":
    sys.exit(main())
