"""Optional Nsight Compute pass: the DRAM bytes a candidate's kernels really move (``ScreenOptions.ncu``).

The roofline's floor counts the compulsory bytes (read each input once, write the output once);
a kernel that re-reads its operands moves more. Where ``ncu`` is present and a screen timed the
candidate, ``profile`` runs one more process under ``ncu``. That process loads the candidate the
way a worker does (the runtime guard armed), calls it once to compile and warm up, then once more
on fresh inputs inside an NVTX range, and only that range is profiled (``--nvtx-include``). ncu
replays each kernel of the call with its counters on, leaving the clocks alone
(``--clock-control none``), and reports per kernel the DRAM bytes read and written and the
duration. The verdict gets their sum as ``Metrics.dram_bytes`` and an ``info`` finding that
compares it with the compulsory bytes; the policy does not use it (yet).

    python -m kernelgate.ncu REQUEST.json ANSWER.json      # the profiled process (run under ncu)
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kernelgate.models import KernelCounters, NcuReport

__all__ = ["METRICS", "RANGE", "find_ncu", "ncu_command", "parse_csv", "profile"]

METRICS = {"dram__bytes_read.sum": "dram_bytes_read", "dram__bytes_write.sum": "dram_bytes_written",
           "gpu__time_duration.sum": "duration_ns"}
"""ncu metric -> ``KernelCounters`` field."""

RANGE = "kernelgate_profiled"
"""The NVTX range around the profiled call."""

_SEARCH = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")


def find_ncu() -> str | None:
    """The ``ncu`` executable: on PATH, else where CUDA and Nsight Compute install it; None if absent."""
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in _SEARCH:
        matches = sorted(Path("/").glob(pattern.lstrip("/")), reverse=True)
        if matches and os.access(matches[0], os.X_OK):
            return str(matches[0])
    return None


def ncu_command(ncu: str, request: Path, answer: Path, report: Path) -> list[str]:
    return [ncu, "--nvtx", "--nvtx-include", f"{RANGE}/", "--metrics", ",".join(METRICS),
            "--clock-control", "none", "--target-processes", "all", "--csv", "--print-units", "base",
            "--log-file", str(report), sys.executable, "-m", "kernelgate.ncu", str(request), str(answer)]


def parse_csv(text: str) -> list[KernelCounters]:
    """Per-kernel counters from ncu's ``--csv`` output (one row per kernel and metric), in launch order.

    Lines before the CSV header (ncu's own messages, ``==PROF==``) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') and '"Metric Name"' in line), None)
    if start is None:
        return []
    kernels: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        field = METRICS.get(row.get("Metric Name", ""))
        if field is None or not row.get("ID"):
            continue
        kernel = kernels.setdefault(row["ID"], {"name": row.get("Kernel Name", "?")})
        try:
            value = float(row.get("Metric Value", "").replace(",", ""))
        except ValueError:
            continue
        unit = row.get("Metric Unit", "")
        kernel[field] = value * _UNIT_SCALE.get(unit, 1.0)
    out = []
    for _, values in sorted(kernels.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        if "dram_bytes_read" in values and "dram_bytes_written" in values:
            out.append(KernelCounters(**values))
    return out


_UNIT_SCALE = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "nsecond": 1.0, "usecond": 1e3,
               "msecond": 1e6}
"""To bytes and nanoseconds, should ncu print scaled units despite ``--print-units base``."""


def profile(job, timeout_s: float = 300.0) -> tuple[NcuReport | None, str]:
    """Run the candidate of ``job`` once under ncu: the report, or None and why not."""
    from kernelgate.worker import child_environment

    ncu = find_ncu()
    if ncu is None:
        return None, "ncu pass skipped: Nsight Compute (ncu) is not installed here"
    workdir = Path(tempfile.mkdtemp(prefix="kernelgate-ncu-"))
    request, answer, report = workdir / "request.json", workdir / "answer.json", workdir / "ncu.csv"
    request.write_text(job.model_dump_json())
    cmd = ncu_command(ncu, request, answer, report)
    try:
        done = subprocess.run(cmd, cwd=workdir, env=child_environment(dict(os.environ), workdir),
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        shutil.rmtree(workdir, ignore_errors=True)
        return None, f"ncu pass gave no result: it ran past {timeout_s:g} s"
    try:
        outcome = json.loads(answer.read_text()) if answer.exists() else {}
        text = report.read_text(errors="replace") if report.exists() else done.stdout
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if not outcome.get("ok"):
        why = outcome.get("error") or (done.stderr or done.stdout or f"exit code {done.returncode}").strip()[-300:]
        return None, f"ncu pass gave no result: {why}"
    kernels = parse_csv(text)
    if not kernels:
        return None, "ncu pass gave no result: no kernel counters in its report (" + text.strip()[-300:] + ")"
    return NcuReport(kernels=kernels, command=" ".join(cmd[:cmd.index(sys.executable)])), ""


def _run_profiled(request: Path) -> None:
    """The profiled process: load the candidate as a worker does, warm it up, call it once in ``RANGE``."""
    import torch

    from kernelgate import integrity
    from kernelgate.dsl import get_plugin
    from kernelgate.problems import build_problem
    from kernelgate.worker import Job
    from kernelgate.worker.candidate import allowed_write_dirs, load_candidate, use_compile_cache
    from kernelgate.worker.judge import start_cuda

    job = Job.model_validate_json(request.read_text())
    workdir = request.parent
    plugin = get_plugin(job.candidate.dsl)
    plugin.prepare(interpret=False)
    use_compile_cache(job.options.compile_cache, job.options.compile_cache_dir, workdir)
    problem = build_problem(job.problem, torch.device("cuda"), int.from_bytes(os.urandom(4), "little"))
    start_cuda()  # before the guard, as in a worker (else TileLang's import brings CUDA up under it)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    guard = integrity.Guard(workdir, workdir / "candidate.py", allowed_write_dirs(job.options.compile_cache, job.options.compile_cache_dir))
    guard.arm()
    _, entry = load_candidate(plugin, job.candidate.source, job.candidate.entry, workdir)
    candidate, _, _ = problem.build_candidate(entry)
    with torch.no_grad():
        candidate(*problem.make_inputs("normal", gen))  # compiles, autotunes, warms up: not profiled
        torch.cuda.synchronize()
        inputs = problem.make_inputs("normal", gen)
        torch.cuda.nvtx.range_push(RANGE)
        candidate(*inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    violation = guard.check("in the ncu pass")
    if violation is not None:
        raise RuntimeError(f"{violation[0].value}: {violation[1]}")


def main(argv: list[str]) -> int:
    request, answer = Path(argv[0]), Path(argv[1])
    try:
        _run_profiled(request)
        answer.write_text(json.dumps({"ok": True}))
        return 0
    except BaseException as exc:  # the answer says why; the parent reports it as a note
        answer.write_text(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
