"""Command line: ``kernelgate screen``, ``batch``, ``report``, ``calibrate``, ``ops``.

Exit codes of ``screen``: 0 accept, 10 repair, 11 structural, 12 reject, 13 untimed,
2 usage error (bad arguments, unknown problem), 3 a fault of the gate itself.
``batch`` (a folder of KernelBench generations into the verdict log) and ``report`` (HTML from the
log) exit 0 when they did their job, whatever the verdicts, and 2 or 3 as above.
With ``--json``, a usage error or a fault prints ``{"error": ..., "exit_code": 2 or 3}`` on stdout
(the message also goes to stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from kernelgate.errors import KernelgateError, PluginError, ProblemError
from kernelgate.models import Status

__all__ = ["main", "EXIT_CODES"]

EXIT_CODES = {Status.accept: 0, Status.repair: 10, Status.structural: 11, Status.reject: 12, Status.untimed: 13}
EXIT_USAGE, EXIT_FAULT = 2, 3


EPILOG = """exit codes:
  0   accept (screen)
  10  repair (screen)
  11  structural (screen)
  12  reject (screen)
  13  untimed (screen)
  0   batch, report, ops, calibrate: done, whatever the verdicts
  2   usage error: bad arguments, an unknown problem or DSL, a missing file, no GPU to calibrate
  3   a fault of the gate itself
with --json, errors are printed on stdout as {"error": "...", "exit_code": 2 or 3}"""


def _version() -> str:
    from kernelgate import __version__

    return __version__


def _print_error(message: str, code: int, as_json: bool) -> None:
    label = "error" if code == EXIT_USAGE else "internal fault"
    print(f"kernelgate: {label}: {message}", file=sys.stderr)
    if as_json:
        print(json.dumps({"error": message, "exit_code": code}))


class _Parser(argparse.ArgumentParser):
    """argparse with kernelgate's exit code for usage errors, and JSON errors when ``--json`` was given."""

    json_errors = False
    """Set by ``main`` when the command line asks for ``--json``: argparse errors then go to stdout as JSON."""

    def error(self, message: str):  # argparse exits 2 itself; keep its message short
        if not _Parser.json_errors:
            self.print_usage(sys.stderr)
        _print_error(message, EXIT_USAGE, _Parser.json_errors)
        raise SystemExit(EXIT_USAGE)


def _parse_shape(items: list[str]) -> dict[str, int]:
    shape = {}
    for item in items:
        key, sep, value = item.partition("=")
        value = value.strip()
        digits = value[1:] if value[:1] in "+-" else value
        if not sep or not key.strip() or not digits.isdigit():
            raise ProblemError(f"--shape takes NAME=INT, got {item!r}")
        if int(value) < 1:
            raise ProblemError(f"--shape {key.strip()}={int(value)}: a size must be at least 1")
        shape[key.strip()] = int(value)
    return shape


def _problem(args):
    from pydantic import ValidationError

    from kernelgate.models import Problem

    shape = _parse_shape(args.shape or [])
    try:
        if Path(args.problem).suffix == ".py" or Path(args.problem).is_file():
            if not Path(args.problem).is_file():
                raise ProblemError(f"problem file not found: {args.problem}")
            return Problem.file(str(Path(args.problem).resolve()), shape=shape, dtype=args.dtype)
        problem = Problem.op(args.problem, dtype=args.dtype, **shape)
    except ValidationError as exc:
        raise ProblemError("; ".join(e["msg"] for e in exc.errors())) from exc
    from kernelgate.reference_ops import get_op

    try:
        op = get_op(args.problem)
        op.shape(shape)
    except KeyError as exc:
        raise ProblemError(str(exc.args[0])) from exc
    return problem


def print_verdict(verdict, out=sys.stdout) -> None:
    m = verdict.metrics
    lines = [verdict.summary, f"  status      {verdict.status.value} (confidence {verdict.confidence:.2f})"]
    if verdict.reason:
        lines.append(f"  reason      {verdict.reason.value}")
    if verdict.numerics:
        n = verdict.numerics
        state = "checked" if n.checked else f"not checked: {n.skipped_reason}"
        lines.append(f"  numerics    {state}; {len(n.trials)} trials on {n.executor}"
                     + ("" if not n.trials else f", worst normalized error "
                        f"{max(t.normalized_error or 0 for t in n.trials):.3g}"))
    if m:
        lines.append(f"  timing      candidate {m.t_candidate_ms:.4g} ms, library {m.t_library_ms:.4g} ms, "
                     f"floor {m.t_floor_ms:.4g} ms ({m.bound}-bound)")
        lines.append(f"  screens     LRE {m.lre:.3f} [{m.lre_low:.3f}, {m.lre_high:.3f}]; U {m.u_candidate:.3f}, "
                     f"library U {m.u_library:.3f}; peaks: {m.peaks.source}")
    for k in verdict.kernels:
        lines.append(f"  kernel      {k.name} on {k.target}: {k.launches} launch(es), grid {k.grid}, "
                     f"warps {k.num_warps}, stages {k.num_stages}, regs {k.registers}, spills {k.spill_bytes}")
    for f in verdict.findings:
        lines.append(f"  finding     {f.code} ({f.kind}): {f.evidence}")
    for note in verdict.notes:
        lines.append(f"  note        {note}")
    if verdict.failure:
        lines.append("  evidence    " + verdict.failure.message.replace("\n", "\n              "))
    lines.append("  feedback    " + verdict.feedback.replace("\n", "\n              "))
    print("\n".join(lines), file=out)


def _cmd_screen(args) -> int:
    from kernelgate.gate import screen
    from kernelgate.models import Candidate
    from kernelgate.worker import ScreenOptions

    path = Path(args.candidate)
    if not path.is_file():
        raise ProblemError(f"candidate file not found: {path}")
    try:
        source = path.read_text()
    except UnicodeDecodeError as exc:
        raise ProblemError(f"candidate file {path} is not UTF-8 text") from exc
    problem = _problem(args)
    options = ScreenOptions(**({"timing_reps": args.reps} if args.reps else {}), ncu=args.ncu)
    verdict = screen(Candidate(source=source, dsl=args.dsl, entry=args.entry, name=path.name), problem, options=options)
    if args.json:
        print(verdict.model_dump_json())
    else:
        print_verdict(verdict)
    return EXIT_CODES[verdict.status]


def _cmd_calibrate(args) -> int:
    from kernelgate import hardware

    info = hardware.detect()
    if info is None:
        raise ProblemError("no GPU on this machine: nothing to calibrate")
    peaks = hardware.calibrate()
    path = hardware.save_calibration(peaks, info)
    print(peaks.model_dump_json(indent=2) if args.json else
          f"{info.name}: copy {peaks.bw_gbs:.0f} GB/s; "
          + ", ".join(f"{k.value} {v:.1f} TFLOP/s" for k, v in peaks.flops_tflops.items()) + f"\ncached in {path}")
    return 0


def _short_dtype(dtype: str) -> str:
    return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(dtype, dtype)


def _cmd_ops(args) -> int:
    from kernelgate.numerics import TOLERANCES
    from kernelgate.reference_ops import DTYPES, list_ops

    def tolerance(op) -> dict[str, dict[str, float]] | None:
        own = {d: op.tolerance_for(d) for d in DTYPES if op.tolerance_for(d) is not None}
        return {d: {"atol": t.atol, "rtol": t.rtol} for d, t in own.items()} or None

    rows = [{"name": op.name, "category": op.category, "default_shape": op.default_shape,
             "dtype": op.default_dtype, "dtypes": list(op.dtypes), "matmul_like": op.matmul_like,
             "kernelbench_level1": list(op.kernelbench_level1), "tolerance": tolerance(op)} for op in list_ops()]
    if args.json:
        print(json.dumps(rows))
        return 0
    table = [("name", "category", "dtypes", "default shape", "KernelBench L1", "tolerance")]
    for r in rows:
        tol = "; ".join(f"{_short_dtype(d)} {t['atol']:g}/{t['rtol']:g}" for d, t in (r["tolerance"] or {}).items())
        table.append((r["name"], r["category"], ",".join(_short_dtype(d) for d in r["dtypes"]),
                      " ".join(f"{k}={v}" for k, v in r["default_shape"].items()),
                      ",".join(str(i) for i in r["kernelbench_level1"]) or "-", tol or "default"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])
    default = ", ".join(f"{_short_dtype(d)} {TOLERANCES[t].atol:g}/{TOLERANCES[t].rtol:g}" for d, t in DTYPES.items())
    print(f"\n{len(rows)} ops. Override a shape with --shape NAME=INT and the dtype with --dtype (default fp32). "
          f"Tolerance atol/rtol (atol scales the output's rms); the default by dtype: {default}.")
    return 0


def _cmd_batch(args) -> int:
    from kernelgate.adapters.batch import kernelbench_eval_results, screen_runs
    from kernelgate.store import VerdictLog
    from kernelgate.worker import ScreenOptions

    options = ScreenOptions(**({"timing_reps": args.reps} if args.reps else {}))
    with VerdictLog(args.log) as log:
        result = screen_runs(args.kernelbench, args.level, args.runs, log=log, batch=args.batch,
                             backend=args.backend, dtype=args.dtype, problem_ids=args.problem or None, options=options,
                             rescreen=args.rescreen)
    if args.eval_json:
        Path(args.eval_json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.eval_json).write_text(json.dumps(kernelbench_eval_results(result), indent=2))
    for gen, why in result.skipped:
        print(f"skipped {gen.path.name}: {why}", file=sys.stderr)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.counts().items())) or "nothing screened"
    again = f", {len(result.logged)} already in the log (not screened again; --rescreen to screen them)" \
        if result.logged else ""
    print(f"batch {result.batch}: {len(result.items)} verdicts ({counts}), {len(result.skipped)} skipped{again}; "
          f"log {args.log}")
    return 0


def _cmd_report(args) -> int:
    from kernelgate.report import write_report
    from kernelgate.store import VerdictLog

    if not Path(args.log).is_file():
        raise ProblemError(f"log file not found: {args.log}")
    with VerdictLog(args.log) as log:
        names = [args.batch] if args.batch else [b.name for b in log.batches()]
        if not names:
            raise ProblemError(f"{args.log} holds no verdicts")
        for name in names:
            print(write_report(log, name, args.out))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kernelgate", description="Screen GPU kernels written by LLMs.", epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kernelgate {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    s = sub.add_parser("screen", help="screen one candidate file", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("candidate", help="the candidate's source file")
    s.add_argument("--problem", required=True, help="a KernelBench-style file or a reference op name (see `ops`)")
    s.add_argument("--dsl", default=None, help="the candidate's DSL (detected from the source by default)")
    s.add_argument("--entry", default="ModelNew", help="entry point: a ModelNew-style class or a function")
    s.add_argument("--shape", action="append", metavar="NAME=INT", help="override a shape parameter (repeatable)")
    s.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None)
    s.add_argument("--reps", type=int, default=None, help="timing repetitions (default 30)")
    s.add_argument("--ncu", action="store_true",
                   help="also count the DRAM bytes moved with Nsight Compute, where ncu is installed")
    s.add_argument("--json", action="store_true", help="print only the verdict as JSON")
    s.set_defaults(func=_cmd_screen)
    b = sub.add_parser("batch", help="screen a folder of KernelBench generations into the verdict log")
    b.add_argument("--kernelbench", required=True, metavar="CHECKOUT",
                   help="a KernelBench checkout (or its KernelBench/ folder)")
    b.add_argument("--level", type=int, required=True, help="the KernelBench level of the generations")
    b.add_argument("--runs", required=True, metavar="DIR",
                   help="a folder of level_<l>_problem_<id>_sample_<s>_kernel.py files (KernelBench's runs/<name>)")
    b.add_argument("--log", default="kernelgate.sqlite", help="the verdict log (SQLite; default ./kernelgate.sqlite)")
    b.add_argument("--batch", default=None, help="the batch name in the log (default: the runs folder's name)")
    b.add_argument("--backend", default=None,
                   help="KernelBench's backend of every file, one with a DSL plug-in (triton, tilelang, cuda, ...); "
                        "detected per file by default")
    b.add_argument("--problem", type=int, action="append", metavar="ID", help="only this problem id (repeatable)")
    b.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default=None)
    b.add_argument("--reps", type=int, default=None, help="timing repetitions (default 30)")
    b.add_argument("--eval-json", default=None, metavar="FILE",
                   help="also write KernelBench's eval_results.json layout (problem id -> samples)")
    b.add_argument("--rescreen", action="store_true",
                   help="screen and log again the files whose source and problem already have a verdict in the log "
                        "(by default they are skipped and counted)")
    b.set_defaults(func=_cmd_batch)
    r = sub.add_parser("report", help="write an HTML page per batch from the verdict log")
    r.add_argument("--log", default="kernelgate.sqlite", help="the verdict log (default ./kernelgate.sqlite)")
    r.add_argument("--batch", default=None, help="one batch (default: every batch in the log)")
    r.add_argument("--out", required=True, metavar="DIR", help="folder for <batch>.html and <batch>-roofline.png")
    r.set_defaults(func=_cmd_report)
    c = sub.add_parser("calibrate", help="measure this GPU's bandwidth and GEMM rates and cache them")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_cmd_calibrate)
    o = sub.add_parser("ops", help="list the reference-op catalogue")
    o.add_argument("--json", action="store_true")
    o.set_defaults(func=_cmd_ops)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="kernelgate: %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    as_json = "--json" in argv[:argv.index("--")] if "--" in argv else "--json" in argv
    _Parser.json_errors = as_json
    try:
        args = build_parser().parse_args(argv)
    finally:
        _Parser.json_errors = False
    try:
        return args.func(args)
    except (ProblemError, PluginError) as exc:
        _print_error(str(exc), EXIT_USAGE, as_json)
        return EXIT_USAGE
    except KernelgateError as exc:
        _print_error(str(exc), EXIT_FAULT, as_json)
        return EXIT_FAULT
    except Exception as exc:  # a gate bug must still exit with its own code, not a bare traceback
        logging.getLogger(__name__).exception("internal fault")
        _print_error(f"{type(exc).__name__}: {exc}", EXIT_FAULT, as_json)
        return EXIT_FAULT


if __name__ == "__main__":
    sys.exit(main())
