"""The study: screen the corpus of slow and optimized kernels, and check the gate's verdicts against it.

    python benchmarks/study.py --out benchmarks/results/study_h200.json --table docs/study_table.md \\
        --plot docs/study_roofline.png
    python benchmarks/study.py --only triton_gelu --out /tmp/study.json       # some cases; CPU: untimed
    python benchmarks/study.py --rows benchmarks/results/study_h200.json --policy '{"u_min": 0.2}' --out /tmp/re.json
    python benchmarks/study.py --list-corpus                                   # the corpus as JSON

The corpus (``CORPUS``): for each op, in Triton and in TileLang, an idiomatic-but-slow kernel and
an optimized one, over five categories (normalization, reduction and softmax, GEMM, convolution,
elementwise and attention), each at its problem's own shape on a GPU. What counts as true comes
from the measurements, not from the file names:

- *inefficient*: correct, and the library is at least 1.25x faster (LRE <= 0.8) or a variant of
  the same op in the same DSL is at least 1.5x faster;
- an inefficient kernel is *repairable* when a variant of its op and DSL fixes it (is efficient,
  or at least 1.5x faster), *structural* when none does (our best attempt is still behind).

The gate agrees when it accepts the efficient kernels, says ``repair`` for the repairable and
``structural`` for the structural ones. The policy's thresholds (``lre_min``, ``u_min``,
``structural_lre_min``) are chosen on the cases of the ``fit`` half by a grid search and judged on
the ``judge`` half; the JSON holds both scores and the default policy's.

Outputs: the JSON (every verdict, the truth, the agreement, the fit), a markdown table, and a
roofline plot (achieved TFLOP/s against arithmetic intensity, candidates and library).

``--rows JSON`` screens nothing: it takes the rows of an earlier record (its ``cases``, or a list of
rows) and derives the truth, the agreement, the fit, the table and the plot again from those
measurements (on any machine); ``--policy`` adds the agreement under other thresholds.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
sys.path.insert(0, str(HERE))

from _record import run_header  # noqa: E402

from kernelgate import Candidate, Problem, ScreenOptions, Status  # noqa: E402
from kernelgate.hardware import detect  # noqa: E402
from kernelgate.many import screen_many, summarize  # noqa: E402
from kernelgate.policy import DEFAULT_POLICY, Policy, decide  # noqa: E402

LIBRARY_FASTER = 1.25
"""Inefficient when the library is at least this much faster..."""
VARIANT_FASTER = 1.5
"""...or a variant of the same op in the same DSL is at least this much faster."""
POLICY_CODES = {"unexplained_gap", "codegen_gap"}
"""Findings the policy adds itself: left out when a verdict is decided again under other thresholds."""


@dataclass
class StudyCase:
    name: str
    kernel: str
    """Path under examples/."""
    op: str
    """What the kernel computes; with the DSL, the group whose variants are compared."""
    category: str
    half: str
    """``fit`` (thresholds are chosen on it) or ``judge`` (they are judged on it); a pair shares a half."""
    problem_file: str | None = None
    catalogue: str | None = None
    dtype: str | None = None
    cpu_shape: dict[str, int] = field(default_factory=dict)

    def problem(self, gpu: bool) -> Problem:
        shape = {} if gpu else self.cpu_shape
        if self.problem_file:
            return Problem(kind="kernelbench_file", name=str(EXAMPLES / self.problem_file), shape=shape,
                           **({"dtype": self.dtype} if self.dtype else {}))
        return Problem.op(self.catalogue, dtype=self.dtype or "float32", **shape)


NORM, REDUCE, GEMM, CONV, ELEM = "normalization", "reduction/softmax", "gemm", "convolution", "elementwise/attention"
_LN, _RMS, _SM, _RS = "problems/layernorm.py", "problems/rmsnorm.py", "problems/softmax.py", "problems/rowsum.py"
_LN_CPU, _ROW_CPU = {"BATCH": 16, "HIDDEN": 512}, {"ROWS": 16, "COLS": 1024}
_CONV_CPU = {"batch": 1, "in_channels": 8, "out_channels": 16, "height": 12, "width": 20}
_MM_CPU = {"m": 128, "n": 128, "k": 64}


def _pair(dsl: str, op: str, category: str, half: str, slow: str, fast: str, *attempts: str,
          **problem) -> list[StudyCase]:
    """The slow and the optimized kernel of an op, then any further attempts at fixing the optimized one
    (they count as variants of the op like the first two)."""
    return [StudyCase(f"{dsl}_{Path(path).stem}", f"{dsl}/{path}", op, category, half, **problem)
            for path in (slow, fast, *attempts)]


CORPUS: list[StudyCase] = [
    # Triton
    *_pair("triton", "layernorm", NORM, "fit", "layernorm_bad.py", "layernorm_good.py", problem_file=_LN,
           cpu_shape=_LN_CPU),
    *_pair("triton", "softmax", REDUCE, "judge", "softmax_bad.py", "softmax_good.py", problem_file=_SM,
           cpu_shape=_ROW_CPU),
    *_pair("triton", "rowsum", REDUCE, "fit", "rowsum_bad.py", "rowsum_good.py", problem_file=_RS,
           cpu_shape=_ROW_CPU),
    *_pair("triton", "matmul_fp32", GEMM, "judge", "matmul_naive.py", "matmul_good.py",
           problem_file="problems/matmul.py", cpu_shape={"M": 64, "N": 64, "K": 64}),
    *_pair("triton", "conv2d_fp16", CONV, "fit", "conv2d_direct.py", "conv2d_igemm.py", catalogue="conv2d",
           dtype="float16", cpu_shape=_CONV_CPU),
    *_pair("triton", "gelu", ELEM, "judge", "gelu_slow.py", "gelu_fast.py", "gelu_autotuned.py",
           catalogue="gelu", cpu_shape={"rows": 64, "cols": 512}),
    *_pair("triton", "sdpa_fp16", ELEM, "fit", "attention_naive.py", "attention_flash.py", catalogue="sdpa",
           dtype="float16", cpu_shape={"batch": 1, "heads": 2, "seq": 64, "head_dim": 32}),
    # TileLang
    *_pair("tilelang", "layernorm", NORM, "judge", "layernorm_serial.py", "layernorm_good.py", problem_file=_LN,
           cpu_shape=_LN_CPU),
    *_pair("tilelang", "rmsnorm", NORM, "fit", "rmsnorm_serial.py", "rmsnorm_good.py", problem_file=_RMS,
           cpu_shape=_LN_CPU),
    *_pair("tilelang", "softmax", REDUCE, "fit", "softmax_slow.py", "softmax_fast.py", problem_file=_SM,
           cpu_shape=_ROW_CPU),
    *_pair("tilelang", "rowsum", REDUCE, "judge", "rowsum_bad.py", "rowsum_good.py", problem_file=_RS,
           cpu_shape=_ROW_CPU),
    *_pair("tilelang", "matmul_fp16", GEMM, "fit", "matmul_naive.py", "matmul_good.py",
           problem_file="problems/matmul_fp16.py", cpu_shape={"M": 128, "N": 128, "K": 64}),
    *_pair("tilelang", "matmul_bf16", GEMM, "judge", "matmul_bf16_slow.py", "matmul_bf16_fast.py",
           catalogue="matmul", dtype="bfloat16", cpu_shape=_MM_CPU),
    *_pair("tilelang", "conv2d_fp16", CONV, "judge", "conv2d_slow.py", "conv2d_fast.py",
           "conv2d_hoisted.py", "conv2d_nhwc_im2col.py", "conv2d_nhwc_transpose.py", catalogue="conv2d",
           dtype="float16", cpu_shape=_CONV_CPU),
    *_pair("tilelang", "gelu", ELEM, "judge", "gelu_slow.py", "gelu_fast.py", catalogue="gelu",
           cpu_shape={"rows": 64, "cols": 1024}),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="the results JSON (required)")
    parser.add_argument("--table", type=Path, help="also write the markdown table here")
    parser.add_argument("--plot", type=Path, help="also draw the roofline plot here (PNG)")
    parser.add_argument("--only", nargs="+", metavar="WORD", help="cases whose name contains one of these words")
    parser.add_argument("--rows", type=Path, help="screen nothing: decide again from an earlier record's rows")
    parser.add_argument("--policy", type=json.loads, default=None, metavar="JSON",
                        help='with --rows: also the agreement under these Policy fields, e.g. \'{"u_min": 0.2}\'')
    parser.add_argument("--list-corpus", action="store_true", help="print the corpus as JSON and stop")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="candidates in flight per GPU (default 1: timings as quiet as they get)")
    args = parser.parse_args(argv)
    if args.list_corpus:
        print(json.dumps([dataclasses.asdict(c) for c in CORPUS], indent=1))
        return 0
    if args.out is None:
        parser.error("--out is required")
    if args.rows:
        return _from_rows(args, argv)

    gpu = detect() is not None
    cases = [c for c in CORPUS if not args.only or any(w in c.name for w in args.only)]
    items = [(Candidate(source=(EXAMPLES / c.kernel).read_text(), name=c.name), c.problem(gpu)) for c in cases]
    print(f"{'GPU' if gpu else 'no GPU: CPU shapes, nothing timed'}: screening {len(cases)} corpus kernels",
          flush=True)
    results = {}
    for result in screen_many(items, options=ScreenOptions(), concurrency=args.concurrency):
        results[result.index] = result
        case = cases[result.index]
        print(f"  {case.name:<28} {_status(result):<10} {result.seconds:6.1f} s", flush=True)
    rows = [_row(case, results[i]) for i, case in enumerate(cases)]
    truth(rows)
    record = {**run_header("python benchmarks/study.py", argv),
              "definitions": {"library_faster": LIBRARY_FASTER, "variant_faster": VARIANT_FASTER},
              "concurrency": args.concurrency or 1, "run": summarize(results.values()), "cases": rows}
    if gpu:
        record["agreement_default_policy"] = agreement(rows, DEFAULT_POLICY)
        record["fit"] = fit(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    table = markdown_table(rows)
    print("\n" + table)
    if args.table:
        args.table.write_text(table + "\n")
    if args.plot and gpu:
        plot(rows, args.plot)
    if gpu:
        print(json.dumps({"default": record["agreement_default_policy"]["summary"],
                          "fit": {k: v for k, v in record["fit"].items() if k != "grid"}}, indent=2))
    return 0


def _from_rows(args: argparse.Namespace, argv: list[str] | None) -> int:
    """``--rows``: the truth, agreement and fit again from recorded measurements; nothing is screened."""
    data = json.loads(args.rows.read_text())
    rows = data["cases"] if isinstance(data, dict) else data
    truth(rows)
    record = {**run_header("python benchmarks/study.py", argv), "rows_from": str(args.rows),
              "definitions": {"library_faster": LIBRARY_FASTER, "variant_faster": VARIANT_FASTER}, "cases": rows,
              "agreement_default_policy": agreement(rows, DEFAULT_POLICY), "fit": fit(rows)}
    if args.policy is not None:
        policy = DEFAULT_POLICY.model_copy(update=args.policy)
        record["policy"] = policy.model_dump(mode="json")
        record["agreement_policy"] = agreement(rows, policy)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    table = markdown_table(rows)
    print(table)
    if args.table:
        args.table.write_text(table + "\n")
    if args.plot:
        plot(rows, args.plot)
    return 0


def _status(result) -> str:
    return result.verdict.status.value if result.verdict is not None else "error"


def _row(case: StudyCase, result) -> dict:
    v = result.verdict
    m = v.metrics if v is not None else None
    return {
        "name": case.name, "kernel": case.kernel, "dsl": v.dsl if v else None, "op": case.op,
        "category": case.category, "half": case.half,
        "status": _status(result), "reason": v.reason.value if v and v.reason else None,
        "confidence": v.confidence if v else None,
        "correct": bool(v and v.numerics and v.numerics.passed and v.failure is None),
        "lre": m.lre if m else None, "lre_interval": [m.lre_low, m.lre_high] if m else None,
        "u_candidate": m.u_candidate if m else None, "u_library": m.u_library if m else None,
        "t_candidate_ms": m.t_candidate_ms if m else None, "t_library_ms": m.t_library_ms if m else None,
        "t_floor_ms": m.t_floor_ms if m else None, "bound": m.bound if m else None,
        "flops": m.flops if m else None, "bytes": m.bytes_compulsory if m else None,
        "findings": [{"code": f.code, "kind": f.kind, "evidence": f.evidence[:240]} for f in (v.findings if v else [])],
        "feedback": v.feedback if v else result.error,
        "failure": v.failure.message[:400] if v and v.failure else None,
        "metrics": m.model_dump(mode="json") if m else None,
        "seconds": result.seconds,
    }


def truth(rows: list[dict]) -> None:
    """Fill ``inefficient`` and ``expected`` (accept, repair, structural) from the measurements."""
    timed = [r for r in rows if r["correct"] and r["t_candidate_ms"] is not None]
    for r in rows:
        r["inefficient"] = r["expected"] = None
    for r in timed:
        variants = [o for o in timed if o["op"] == r["op"] and o["dsl"] == r["dsl"] and o is not r]
        behind_library = r["lre"] <= 1 / LIBRARY_FASTER
        behind_variant = any(r["t_candidate_ms"] >= VARIANT_FASTER * o["t_candidate_ms"] for o in variants)
        r["inefficient"] = behind_library or behind_variant
        r["_variants"] = variants
    for r in timed:
        if not r["inefficient"]:
            r["expected"] = "accept"
            continue
        fixed = any(not o["inefficient"] or r["t_candidate_ms"] >= VARIANT_FASTER * o["t_candidate_ms"]
                    for o in r["_variants"])
        r["expected"] = "repair" if fixed else "structural"
    for r in timed:
        del r["_variants"]


def redecide(row: dict, policy: Policy) -> str:
    """The status this timed, correct row gets under ``policy`` (same measurement, same findings)."""
    from kernelgate.models import Finding, Metrics

    metrics = Metrics.model_validate(row["metrics"])
    findings = [Finding(code=f["code"], kind=f["kind"], evidence=f["evidence"], hint="")
                for f in row["findings"] if f["code"] not in POLICY_CODES]
    return decide(metrics, findings, numerics_checked=True, policy=policy).status.value


def agreement(rows: list[dict], policy: Policy, half: str | None = None) -> dict:
    """How many verdicts under ``policy`` match the truth, overall and by kind of error."""
    judged = [r for r in rows if r["expected"] is not None and (half is None or r["half"] == half)]
    out = {"cases": [], "summary": {}}
    counts = {"cases": len(judged), "agree": 0, "inefficient_flagged": 0, "inefficient": 0,
              "efficient_accepted": 0, "efficient": 0}
    for r in judged:
        got = redecide(r, policy)
        counts["agree"] += got == r["expected"]
        if r["inefficient"]:
            counts["inefficient"] += 1
            counts["inefficient_flagged"] += got in ("repair", "structural")
        else:
            counts["efficient"] += 1
            counts["efficient_accepted"] += got == "accept"
        out["cases"].append({"name": r["name"], "expected": r["expected"], "verdict": got})
    out["summary"] = counts
    return out


GRID = {"lre_min": [0.7, 0.75, 0.8, 0.85, 0.9], "u_min": [0.0, 0.05, 0.1, 0.2, 0.3, 0.4],
        "structural_lre_min": [0.2, 0.3, 0.4, 0.5, 0.6, 0.7]}


def fit(rows: list[dict]) -> dict:
    """Choose the thresholds on the fit half (most agreements; ties: closest to the defaults), judge them on the other."""
    default = DEFAULT_POLICY.model_dump()
    scored = []
    for values in itertools.product(*GRID.values()):
        chosen = dict(zip(GRID, values))
        policy = DEFAULT_POLICY.model_copy(update=chosen)
        score = agreement(rows, policy, "fit")["summary"]["agree"]
        distance = sum(abs(chosen[k] - default[k]) for k in chosen)
        scored.append((score, -distance, chosen))
    scored.sort(key=lambda s: (s[0], s[1]), reverse=True)
    best_score, _, best = scored[0]
    policy = DEFAULT_POLICY.model_copy(update=best)
    return {"grid": GRID, "chosen": best, "fit_agree": best_score,
            "fit": agreement(rows, policy, "fit")["summary"], "judge": agreement(rows, policy, "judge"),
            "default_on_fit": agreement(rows, DEFAULT_POLICY, "fit")["summary"],
            "default_on_judge": agreement(rows, DEFAULT_POLICY, "judge")["summary"]}


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def markdown_table(rows: list[dict]) -> str:
    lines = ["| kernel | category | half | correct | t ms | t_library ms | LRE | U | U_library | verdict | "
             "expected | findings |", "|" + " --- |" * 12]
    for r in rows:
        codes = ", ".join(dict.fromkeys(f["code"] for f in r["findings"])) or "-"
        verdict = r["status"] + (f" ({r['reason']})" if r["reason"] else "")
        lines.append(f"| {r['name']} | {r['category']} | {r['half']} | {'yes' if r['correct'] else 'no'} | "
                     f"{_fmt(r['t_candidate_ms'], 4)} | {_fmt(r['t_library_ms'], 4)} | {_fmt(r['lre'])} | "
                     f"{_fmt(r['u_candidate'])} | {_fmt(r['u_library'])} | {verdict} | {r['expected'] or '-'} | "
                     f"{codes} |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """Two panels: the roofline (achieved TFLOP/s against FLOP per byte, with the device's roofs; ops
    with a FLOP count) and the two screens (U against LRE, with the policy's thresholds; every
    timed kernel)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in rows if r["metrics"] is not None]
    if not timed:
        return
    peaks = timed[0]["metrics"]["peaks"]
    colors = {"accept": "tab:green", "repair": "tab:orange", "structural": "tab:purple", "reject": "tab:red"}
    fig, (roof, screens) = plt.subplots(1, 2, figsize=(15, 6.5))

    counted = [r for r in timed if r["flops"]]
    xs = [r["flops"] / r["bytes"] for r in counted]
    if counted:
        lo, hi = min(xs) / 2, max(xs) * 2
        grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        bw = peaks["bw_gbs"] * 1e9
        for mode, style in (("fp32", ":"), ("fp16", "--")):
            top = peaks["flops_tflops"].get(mode)
            if top:
                roof.plot(grid, [min(top, bw * x / 1e12) for x in grid], style, color="grey", label=f"roof ({mode})")
    for r, x in zip(counted, xs):
        achieved = r["flops"] / (r["t_candidate_ms"] * 1e-3) / 1e12
        library = r["flops"] / (r["t_library_ms"] * 1e-3) / 1e12
        roof.scatter([x], [achieved], marker="o" if r["dsl"] == "triton" else "s",
                     color=colors.get(r["status"], "black"), zorder=3)
        roof.scatter([x], [library], marker="x", color="black", zorder=2)
        roof.annotate(_short(r["name"]), (x, achieved), fontsize=6, xytext=(3, 3), textcoords="offset points")
    roof.set(xscale="log", yscale="log", xlabel="arithmetic intensity, FLOP per compulsory byte",
             ylabel="achieved TFLOP/s", title="Roofline (kernels whose op has a FLOP count)")

    for r in timed:
        screens.scatter([r["lre"]], [r["u_candidate"]], marker="o" if r["dsl"] == "triton" else "s",
                        color=colors.get(r["status"], "black"), zorder=3)
        screens.annotate(_short(r["name"]), (r["lre"], r["u_candidate"]), fontsize=6, xytext=(3, 3),
                         textcoords="offset points")
    screens.axvline(DEFAULT_POLICY.lre_min, color="grey", linestyle="--")
    screens.axhline(DEFAULT_POLICY.u_min, color="grey", linestyle=":")
    screens.set(xscale="log", yscale="log", xlabel="LRE = t_library / t_candidate",
                ylabel="U = t_floor / t_candidate",
                title=f"The two screens (accepted: LRE >= {DEFAULT_POLICY.lre_min} and U >= {DEFAULT_POLICY.u_min})")

    handles = [plt.Line2D([], [], marker="o", linestyle="", color=c, label=s) for s, c in colors.items()]
    handles += [plt.Line2D([], [], marker="o", linestyle="", color="grey", label="Triton"),
                plt.Line2D([], [], marker="s", linestyle="", color="grey", label="TileLang"),
                plt.Line2D([], [], marker="x", linestyle="", color="black", label="library")]
    roof.legend(handles=handles + list(roof.get_lines()), fontsize=7, loc="lower right")
    fig.suptitle(f"Study corpus on {peaks.get('device_name', 'the GPU')}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _short(name: str) -> str:
    return name.replace("tilelang_", "tl_").replace("triton_", "tr_")


if __name__ == "__main__":
    sys.exit(main())
