"""The short text a generator gets back: what is wrong and what to do, no harness internals."""

from __future__ import annotations

from kernelgate.models import Failure, Finding, Metrics, Reason, Status

__all__ = ["write_feedback", "write_summary"]

_REJECT_ADVICE = {
    Reason.syntax_error: "Fix the syntax error.",
    Reason.load_error: "The module fails at import; fix the error and import only what is installed.",
    Reason.missing_entry: "Define the entry point the task asks for (a ModelNew class or the named function).",
    Reason.compile_error: "The kernel does not compile; fix the line the compiler points at.",
    Reason.runtime_error: "The code raises when called; fix the error.",
    Reason.crash: "The process crashed; check indexing and masks (out-of-bounds accesses) and memory use.",
    Reason.load_timeout: "Compilation did not finish in time; simplify the kernel or its autotuning space.",
    Reason.run_timeout: "The kernel did not finish in time; check loop bounds and termination.",
    Reason.wrong_shape: "Return a tensor of the reference's shape.",
    Reason.wrong_dtype: "Return a tensor of the reference's dtype.",
    Reason.wrong_output_type: "Return a plain, dense torch.Tensor on the input's device.",
    Reason.nonfinite_output: "Write every output element and avoid overflow (subtract the max before exp, "
                             "accumulate in fp32).",
    Reason.numerics_mismatch: "The results are wrong; check the formula, masks and accumulation precision.",
    Reason.trivial_output: "The output is zero or constant; compute the real result.",
    Reason.no_kernel_launched: "Implement the computation in a kernel of the requested DSL; do not call the "
                               "library op or plain torch instead.",
    Reason.unsynchronized_work: "Run all work on the current stream; do not use side streams or threads.",
    Reason.timing_interference: "Leave the GPU idle once your call returns; do all work inside the call.",
    Reason.exceeds_roofline: "The reported time is physically impossible; compute the full result on every call.",
    Reason.out_of_memory: "The code ran out of memory; allocate only the output and small scratch buffers.",
    Reason.tampering: "Do not patch torch, timers, the evaluation or process-wide settings; only compute the result.",
    Reason.introspection: "Do not inspect the caller's frames or the garbage collector; use only the inputs you are given.",
    Reason.library_op_used: "Do the computation in your kernel; do not hand the main work to torch or a library op.",
    Reason.side_stream: "Launch every kernel on the current stream; do not create other streams.",
    Reason.output_caching: "Compute the result from the inputs on every call; return a fresh output tensor each time.",
    Reason.input_mutation: "Do not modify the inputs; write results only to the output.",
    Reason.host_work: "Compute on the GPU in your kernel; do not compute on the host (numpy, .tolist(), Python loops).",
    Reason.background_work: "Finish all work before returning; do not start threads.",
    Reason.forbidden_call: "Do not start processes or write files outside the working directory.",
    Reason.shape_specialized: "Handle every shape (masks for ragged edges); do not branch on the tested shape.",
    Reason.recheck_mismatch: "Return correct results on every call, not only the first ones.",
}


def write_feedback(status: Status, reason: Reason | None, failure: Failure | None, metrics: Metrics | None,
                   findings: list[Finding], message: str | None = None) -> str:
    if status is Status.reject:
        detail = (failure.message if failure else message or "").strip().splitlines()
        shown = "\n".join(detail[-4:])
        return f"Rejected ({reason.value}). {_REJECT_ADVICE[reason]}" + (f"\n{shown}" if shown else "")
    hints, seen = [], set()
    for f in findings:
        if f.code not in seen and (f.kind != "info" or f.code == "unexplained_gap"):
            seen.add(f.code)
            hints.append(f"{f.code}: {f.evidence}. Fix: {f.hint}.")
    if status is Status.untimed:
        head = "Correct on the checks that could run; not timed."
        return " ".join([head] + hints[:3]) if hints else head
    speed = ""
    if metrics is not None:
        rel = (f"{1 / metrics.lre:.1f}x slower than" if metrics.lre < 1 else f"{metrics.lre:.2f}x the speed of")
        speed = f" It runs {rel} the library and at {metrics.u_candidate:.0%} of the {metrics.bound} roofline."
    if status is Status.accept:
        return "Accepted: correct and efficient." + speed
    head = "Correct but slow." + speed
    return " ".join([head] + hints[:3])


def write_summary(status: Status, reason: Reason | None, metrics: Metrics | None, name: str | None) -> str:
    who = name or "candidate"
    if status is Status.reject:
        return f"{who}: reject ({reason.value})"
    if metrics is None:
        return f"{who}: {status.value} (not timed)"
    return (f"{who}: {status.value}; LRE {metrics.lre:.2f} [{metrics.lre_low:.2f}, {metrics.lre_high:.2f}], "
            f"U {metrics.u_candidate:.2f} (library {metrics.u_library:.2f}), "
            f"{metrics.t_candidate_ms:.4g} ms vs {metrics.t_library_ms:.4g} ms")
