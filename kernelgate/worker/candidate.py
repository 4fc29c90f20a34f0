"""The candidate's process: ``python -m kernelgate.worker.candidate REQUESTS_FD REPLIES_FD WORKDIR FLAG``.

It loads the candidate (through its DSL plug-in), runs its forward on tensors the judge shares,
copies each output into the slot the judge names, and reports what it saw: the output's type,
shape and dtype, the DSL launches, the torch calls, its own CUDA-event times. Nothing here
decides anything; the judge checks what lands in its slots and corroborates the times with its
own clock. The in-process guard (``kernelgate.integrity``) still runs here as a cheap first layer.

Order matters, as in every worker: the reply channel is taken and stdout/stderr go to a log
file before torch or the candidate is imported, so nothing the candidate prints reaches the
judge. The judge stops this process (SIGSTOP) whenever it is not asked to run.
"""

from __future__ import annotations

import importlib.util
import json
import linecache
import mmap
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Callable

__all__ = ["describe_exception", "load_candidate", "use_compile_cache", "allowed_write_dirs", "CandidateFailure"]

_OOM_TEXTS = ("out of memory", "can't allocate memory", "cannot allocate memory", "memoryerror")


class CandidateFailure(Exception):
    """Ends a request with a classified failure (reason name, message)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def describe_exception(exc: BaseException, source_path: Path) -> str:
    """The exception with only the candidate's own frames, as 'line N: code'."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(source_path)]
    lines = [f"line {f.lineno}: {(f.line or linecache.getline(f.filename, f.lineno)).strip()}" for f in frames[-5:]]
    message = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, SyntaxError) and exc.lineno:
        lines = [f"line {exc.lineno}: {(exc.text or '').strip()}"]
        message = f"SyntaxError: {exc.msg}"
    return "\n".join(lines + [message[:2000]])


def classify(plugin, exc: BaseException, source_path: Path, default: str) -> CandidateFailure:
    """A candidate's exception as a reason: the guard's refusal first, then the DSL's compiler, then OOM."""
    from kernelgate import integrity

    if isinstance(exc, CandidateFailure):
        return exc
    guard = integrity.Guard._current
    if guard is not None and guard.violations:  # the guard refused a call: that is the reason
        reason, message = guard.violations[0]
        evidence = integrity.evidence_for(getattr(guard, "static_hits", []), reason)
        return CandidateFailure(reason.value, f"{message} (then: {type(exc).__name__}: {str(exc)[:200]}){evidence}")
    mapped = plugin.classify_error(exc)
    if mapped is not None:
        return CandidateFailure(mapped[0].value, mapped[1])
    text = describe_exception(exc, source_path)
    if isinstance(exc, MemoryError) or any(t in text.lower() for t in _OOM_TEXTS):
        return CandidateFailure("out_of_memory", "out of memory: " + text)
    return CandidateFailure(default, text)


def load_candidate(plugin, source: str, entry: str, workdir: Path):
    """Write the source, import it as ``kernelgate_candidate``, return (path, entry object)."""
    path = workdir / "candidate.py"
    path.write_text(source)
    try:
        compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise CandidateFailure("syntax_error", describe_exception(exc, path)) from None
    spec = importlib.util.spec_from_file_location("kernelgate_candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
        raise CandidateFailure("load_error", f"the candidate raised {type(exc).__name__}({exc!s:.100}) at "
                               "import") from None
    except CandidateFailure:
        raise
    except Exception as exc:
        raise classify(plugin, exc, path, "load_error") from None
    if not hasattr(module, entry):
        defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_")
                         and getattr(v, "__module__", None) == spec.name)
        raise CandidateFailure("missing_entry", f"no {entry!r} in the candidate; it defines: "
                               f"{', '.join(defined) or 'nothing callable'}")
    return path, getattr(module, entry)


def use_compile_cache(enabled: bool, cache_dir: str, workdir: Path) -> None:
    """Point every compiler of this process at the shared cache, or at private directories."""
    from kernelgate import compile_cache

    if enabled:
        compile_cache.activate(cache_dir)
    else:
        compile_cache.activate(None)
        os.environ["TRITON_CACHE_DIR"] = str(workdir / "triton-cache")
        os.environ["TILELANG_CACHE_DIR"] = str(workdir / "tilelang-cache")


def allowed_write_dirs(enabled: bool, cache_dir: str) -> list[str]:
    """Where code running on the candidate's behalf may write besides its temp dir: the compile caches."""
    dirs = [os.environ.get("TRITON_CACHE_DIR", ""), os.environ.get("TILELANG_CACHE_DIR", "")]
    if enabled:
        dirs.append(cache_dir)
    return [d for d in dirs if d]


class _CandidateExit(Exception):
    pass


def _shielded(fn: Callable) -> Callable:
    """``fn`` with exits turned into an ordinary exception (the process does not leave with it)."""

    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
            raise _CandidateExit(f"the candidate raised {type(exc).__name__}({exc!s:.100}) while running") from exc

    return call


class Runner:
    """Everything the candidate's process holds: the plug-in, its launch log, the guard, the model."""

    def __init__(self, workdir: Path, send: Callable[[dict], None], flag: mmap.mmap | None) -> None:
        import torch

        self.torch = torch
        self.workdir = workdir
        self.send = send
        self.cuda = torch.cuda.is_available()
        self.flag = flag
        self.plugin = self.log = self.guard = self.fn = self.path = None
        self.hits: list = []
        self.opened: dict[str, object] = {}
        self.kept: dict[int, object] = {}
        self.stream_inputs: list[list] = []
        self.stream_outs: list = []
        self.gate = None  # the judge's flag page and event (gpu_gate.CandidateGate), from stream_open
        self.calibration_out = None
        """What a calibration call returns: a buffer of the output's size, so that its copy into the slot
        costs what a real output's does (dropped at load, back to this process's allocator)."""

    # --- requests ----------------------------------------------------------------------------

    def load(self, req: dict) -> dict:
        from kernelgate import integrity
        from kernelgate.dsl import get_plugin

        torch = self.torch
        self.calibration_out = None
        if self.cuda:  # the calibration's output-sized buffer is the harness's, not the candidate's memory
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        self.plugin = get_plugin(req["dsl"])
        _limit(req["limits"], torch)
        use_compile_cache(req["compile_cache"], req["compile_cache_dir"], self.workdir)
        self.log = self.plugin.prepare(interpret=not self.cuda)
        self.log.problem_dtype = req["dtype"]
        self.hits = integrity.scan(req["source"])
        static = integrity.static_failure(self.hits)
        if static is not None:
            return {"type": "load", "error": {"reason": static.reason.value, "message": static.message}}
        guard = integrity.Guard(self.workdir, self.workdir / "candidate.py",
                                allowed_write_dirs(req["compile_cache"], req["compile_cache_dir"]))
        guard.static_hits = self.hits
        guard.arm()
        self.guard = guard
        guard.pin(self, "torch", "guard", "send", "flag", "workdir", "plugin", "log", "gate")
        reply: dict = {"type": "load", "versions": self.plugin.versions(),
                       "cpu_numerics": bool(getattr(self.plugin, "cpu_numerics", True))}
        try:
            self.path, entry = load_candidate(self.plugin, req["source"], req["entry"], self.workdir)
            violation = self._check("after the import")
            if violation:
                return {**reply, "violation": violation}
            self.fn, reply["state_copied"], reply["note"] = self._build(entry, req)
            guard.pin(self, "fn")
        except CandidateFailure as failure:
            return {**reply, "error": {"reason": failure.reason, "message": failure.message}}
        violation = self._check("after construction")
        if violation:
            reply["violation"] = violation
        if self.cuda:  # what its import and construction left held (a hoard before the first call)
            reply["held_bytes"] = int(torch.cuda.memory_reserved())
        return reply

    def _build(self, entry, req: dict):
        """Instantiate a ``ModelNew`` with the problem's init inputs and copy the reference's state in."""
        from kernelgate.problems import instantiate

        torch = self.torch
        state = {name: open_ref_cached(self, ref) for name, ref in req["state"].items()}
        try:
            built, copied, note = instantiate(entry, [self._arg(a) for a in req["init"]],
                                              torch.device("cuda" if self.cuda else "cpu"),
                                              getattr(torch, req["dtype"]), state)
        except (SystemExit, KeyboardInterrupt, GeneratorExit) as exc:
            raise CandidateFailure("runtime_error", f"the candidate raised {type(exc).__name__} while being "
                                   "constructed") from None
        except Exception as exc:
            raise classify(self.plugin, exc, self.path, "runtime_error") from None
        return _shielded(built), copied, note

    def _arg(self, item: dict):
        from kernelgate.worker.protocol import decode_value

        return open_ref_cached(self, item["ref"]) if "ref" in item else decode_value(item)

    def call(self, req: dict, fn: Callable | None = None) -> dict:
        """One forward call: run it, report it, copy the output into the judge's slot."""
        from kernelgate import integrity
        from kernelgate.dsl import LaunchLog
        from kernelgate.numerics import poisoned_allocations

        torch = self.torch
        if self.log is None:  # a calibration call, before any candidate was loaded
            self.log = LaunchLog()
        inputs = [self._arg(a) for a in req["inputs"]]
        self.log.reset()
        self.log.dry_run = bool(req.get("dry"))
        reply: dict = {"type": "call"}
        recorder = integrity.OpRecorder() if req.get("record") else None
        timed = req.get("timed")
        try:
            if req.get("profile"):
                reply["profile"] = self._profile(inputs)
            elif timed is not None:
                out = self._timed(inputs, timed, recorder, reply, fn=fn)
            else:
                with torch.no_grad(), (poisoned_allocations() if req.get("poison", True) and not self.log.dry_run
                                       else _null()):
                    with recorder if recorder is not None else _null():
                        out = (fn or self.fn)(*inputs)
                    _sync(torch)
        except Exception as exc:
            failure = self._failure(exc)
            reply["error"] = {"reason": failure.reason, "message": failure.message}
        finally:
            self.log.dry_run = False
        reply["launches"] = dict(self.log.counts)
        reply["compile_seconds"] = {k: round(v, 4) for k, v in self.log.first_call_seconds.items()}
        if recorder is not None:  # summed per op, never cut short: the 201st call counts too
            reply["ops"], reply["copies"] = _summed(recorder.calls), recorder.copies[:200]
            reply["to_host"] = _summed(recorder.to_host)
        violation = self._check(req.get("when", "after a call")) if req.get("guard", True) else None
        if violation:
            reply["violation"] = violation
        if not ("error" in reply or "violation" in reply or req.get("profile") or req.get("dry")):
            reply["meta"] = _meta(out, torch)
            if req.get("slot") is not None:
                self.kept[req["slot"]] = out
            if req.get("out") is not None:
                reply["copied"] = self._copy_out(out, req["out"])
        out = None  # a kept slot holds its own reference
        if self.cuda:
            if req.get("free_cache"):  # a large problem's check comes next: only what the module keeps stays held
                torch.cuda.empty_cache()
            reply["peak_bytes"] = int(torch.cuda.max_memory_allocated())
            reply["held_bytes"] = int(torch.cuda.memory_reserved())
        return reply

    def _timed(self, inputs: list, timed: dict, recorder, reply: dict, fn=None):
        """The candidate's own timing of one call: GPU idle window, start event, call, end event."""
        torch = self.torch
        fn = fn or self.fn
        before, start, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        torch.cuda.synchronize()
        t_before = time.perf_counter()
        with torch.no_grad():
            before.record()
            if timed.get("window_cycles"):
                torch.cuda._sleep(int(timed["window_cycles"]))
            start.record()
            t_call = time.perf_counter()
            with recorder if recorder is not None else _null():
                out = fn(*inputs)
            t_enqueued = time.perf_counter()
            end.record()
            torch.cuda.synchronize()
        ready_ms = before.elapsed_time(start)
        reply["event_ms"] = start.elapsed_time(end)
        reply["host_ms"] = (t_enqueued - t_call) * 1e3
        reply["late"] = (t_enqueued - t_before) * 1e3 > ready_ms
        return out

    def stream_open(self, req: dict) -> dict:
        """Map the inputs and output slots of a judge-clocked stream, one per call (untimed)."""
        self.stream_inputs = [[self._arg(a) for a in call] for call in req["calls"]]
        self.stream_outs = [open_ref_cached(self, ref) for ref in req["outs"]]
        if req.get("gate") and self.cuda and self.gate is None:
            from kernelgate.worker.gpu_gate import CandidateGate

            try:
                self.gate = CandidateGate(req["gate"])
            except Exception as exc:  # the driver's, before any candidate code: the judge turns the check off
                return {"type": "call", "gate_error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            if self.guard is not None:
                self.guard.pin(self, "gate")
        return {"type": "call"}

    def stream(self, req: dict) -> dict:
        """Every call of the stream back to back, each output copied into its slot. Ungated (a warm-up):
        one sync at the end. Gated (``value``): behind a wait for the judge's word, then a record of
        the judge's event, and the reply at once, unsynchronized: the judge's clock runs from its
        store of the word to the event, and it reads the slots itself afterwards."""
        from kernelgate import integrity

        torch = self.torch
        fn = self.fn if self.fn is not None else (lambda *args: None)  # a calibration stream: the harness alone
        gated = req.get("value") is not None and self.gate is not None
        stream = torch.cuda.current_stream() if gated else None  # the wait's stream: the event goes there
        reply: dict = {"type": "call"}
        recorder = integrity.OpRecorder() if req.get("record") else None
        try:
            if gated:
                from kernelgate.worker.gpu_gate import wait_value

                wait_value(self.gate.address, int(req["value"]))
            with torch.no_grad(), recorder if recorder is not None else _null():
                for inputs, slot in zip(self.stream_inputs, self.stream_outs):
                    out = fn(*inputs)
                    if type(out) is torch.Tensor and out.shape == slot.shape and out.dtype == slot.dtype:
                        slot.copy_(out)  # anything else leaves the slot as the judge filled it
                    del out
            if gated:
                self.gate.event.record(stream)
            else:
                _sync(torch)
        except Exception as exc:
            failure = self._failure(exc)
            reply["error"] = {"reason": failure.reason, "message": failure.message}
        if recorder is not None:  # the torch calls of every call of the stream, summed per op
            reply["ops"] = _summed(recorder.calls)
        return reply

    def stream_close(self, req: dict) -> dict:
        """Drop the stream's inputs and slots."""
        self.stream_inputs, self.stream_outs = [], []
        return {"type": "call"}

    def _profile(self, inputs: list):
        """One call under the profiler: device time outside the kernels this candidate's DSL compiled."""
        from kernelgate import integrity

        found = integrity.gpu_kernel_share(self.fn, inputs, _compiled_names(self.log))
        return list(found) if found is not None else None

    def calibrate(self, req: dict) -> dict:
        """A timed call that runs everything but forward, asked for before the candidate is loaded:
        what the harness costs per timed call, from a process no candidate code has touched yet.
        Its output is a buffer of the slot's shape, so the copy into the slot is timed too (on a
        6.4 GB output that copy takes milliseconds: the judge's clock sees it on every timed call)."""
        if self.plugin is not None:
            return {"type": "call", "error": {"reason": "runtime_error", "message": "calibration after load"}}
        slot = open_ref_cached(self, req["out"])
        held = self.calibration_out
        if held is None or held.shape != slot.shape or held.dtype != slot.dtype or held.device != slot.device:
            held = self.calibration_out = self.torch.empty_like(slot)
        return self.call(req, fn=lambda *args: held)

    def ping(self, req: dict) -> dict:
        """A request that only carries releases; with ``free_cache`` this process's freed blocks go
        back to the device too (a large problem: the judge allocates next, and this process's caching
        allocator would otherwise keep the outputs it let go of reserved)."""
        if req.get("free_cache") and self.cuda:
            self.torch.cuda.empty_cache()
        return {"type": "call", "held_bytes": int(self.torch.cuda.memory_reserved())} if self.cuda else {"type": "call"}

    def recopy(self, req: dict) -> dict:
        """Copy a kept output into the judge's slot again; it is read once, so it is let go of then,
        with the kept outputs named in ``forget``."""
        out = self.kept.pop(req["slot"], None)
        for slot in req.get("forget") or ():
            self.kept.pop(slot, None)
        reply: dict = {"type": "call"}
        if out is None:
            reply["error"] = {"reason": "runtime_error", "message": "no output kept in that slot"}
            return reply
        _sync(self.torch)
        reply["meta"] = _meta(out, self.torch)
        reply["copied"] = self._copy_out(out, req["out"])
        violation = self._check(req.get("when", "after a delay"))
        if violation:
            reply["violation"] = violation
        return reply

    def check(self, req: dict) -> dict:
        """The guard alone (timed calls skip it: its snapshot takes milliseconds of host time)."""
        violation = self._check(req.get("when", "after timing"))
        return {"type": "call", **({"violation": violation} if violation else {})}

    def artifacts(self, req: dict) -> dict:
        kernels, notes = self.plugin.artifacts(self.log, self.path, interpret=not self.cuda)
        reply = {"type": "artifacts", "kernels": [k.model_dump(mode="json") for k in kernels], "notes": notes,
                 "compile_errors": list(self.log.compile_errors)}
        violation = self._check("after the artifacts")
        if violation:
            reply["violation"] = violation
        return reply

    # --- helpers -----------------------------------------------------------------------------

    def _failure(self, exc: Exception) -> CandidateFailure:
        """What a forward call raised, classified."""
        if isinstance(exc, CandidateFailure):
            return exc
        if isinstance(exc, _CandidateExit):
            return CandidateFailure("runtime_error", str(exc))
        return classify(self.plugin, exc, self.path, "runtime_error")

    def _copy_out(self, out, ref: dict) -> bool:
        torch = self.torch
        slot = open_ref_cached(self, ref)
        if type(out) is not torch.Tensor or out.layout is not torch.strided or tuple(out.shape) != tuple(slot.shape) \
                or out.dtype != slot.dtype or out.device.type != slot.device.type:
            return False
        slot.copy_(out)
        _sync(torch)
        return True

    def _check(self, when: str) -> dict | None:
        from kernelgate import integrity

        torch = self.torch
        if self.guard is None:
            return None
        found = self.guard.check(when)
        if found is None and torch.cuda.is_initialized() and torch.cuda.current_stream() != torch.cuda.default_stream():
            found = (integrity.Reason.side_stream, f"the current CUDA stream is not the default stream {when}")
        if found is None:
            return None
        reason, message = found
        return {"reason": reason.value, "message": message + integrity.evidence_for(self.hits, reason)}


_GLOBAL_RE = None


def _summed(calls: list[tuple[str, int]]) -> list[tuple[str, int]]:
    totals: dict[str, int] = {}
    for name, size in calls:
        totals[name] = totals.get(name, 0) + size
    return list(totals.items())


def _compiled_names(log) -> set[str]:
    """The exact names of the kernels the candidate's DSL compiled: the plug-in's launch names,
    Triton's compiled symbols, and the ``__global__`` functions of TileLang's and CUDA's sources."""
    import re

    global _GLOBAL_RE
    _GLOBAL_RE = _GLOBAL_RE or re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                                          r"(?:void\s+)?(\w+)\s*\(")
    names = set(log.first.keys())
    for launch in log.first.values():
        compiled = getattr(launch, "compiled", None)
        for symbol in (getattr(compiled, "name", None), getattr(getattr(compiled, "metadata", None), "name", None)):
            if isinstance(symbol, str):
                names.add(symbol)
        kernel = getattr(launch, "kernel", None)
        for source in (getattr(kernel, "kernel_source", None), getattr(kernel, "cuda_source", None)):
            if isinstance(source, str):
                names.update(_GLOBAL_RE.findall(source))
    return names


def open_ref_cached(runner: Runner, ref: dict):
    from kernelgate.worker.protocol import TensorRef, open_ref

    from kernelgate.worker.protocol import ref_key

    key = ref_key(ref)
    if key not in runner.opened:
        runner.opened[key] = open_ref(TensorRef.model_validate(ref))
    return runner.opened[key]


def _meta(out, torch) -> dict:
    meta = {"type_name": f"{type(out).__module__}.{type(out).__name__}", "plain_tensor": type(out) is torch.Tensor}
    if isinstance(out, torch.Tensor):
        meta.update(shape=list(out.shape), dtype=str(out.dtype).removeprefix("torch."), device=out.device.type,
                    strided=out.layout is torch.strided)
        try:
            meta["data_ptr"] = int(out.data_ptr())
        except Exception:
            pass
    return meta


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None


def _sync(torch) -> None:
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _limit(limits: dict, torch) -> None:
    """Per-job limits, set before the candidate is imported.

    Files: ``RLIMIT_FSIZE``, with SIGXFSZ ignored so that a write past it fails with an error the
    candidate sees. Host memory: ``RLIMIT_DATA`` where no GPU is visible (the CUDA driver maps
    large regions that address-space limits would refuse; there the supervisor's watchdog on the
    resident size applies). GPU memory: the caching allocator's share of the device.
    """
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    size = limits["max_file_mb"] << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    if torch.cuda.is_available():
        torch.cuda.set_per_process_memory_fraction(limits["gpu_memory_fraction"])
    else:
        data = limits["host_memory_mb"] << 20
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard == resource.RLIM_INFINITY or data < hard:
            resource.setrlimit(resource.RLIMIT_DATA, (data, data if hard == resource.RLIM_INFINITY else hard))


def _compile_watch(flag: mmap.mmap | None) -> None:
    """Tell the judge, through a shared word, when a DSL compiler runs (its deadline is the load one)."""
    from kernelgate import integrity

    if flag is None:
        return

    def on_change(depth: int) -> None:
        flag[0:8] = int(max(depth, 0)).to_bytes(8, "little")

    integrity.compiler_section.on_change = on_change


def main() -> None:
    requests_fd, replies_fd, workdir, flag_path = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    replies = os.fdopen(replies_fd, "w", buffering=1)
    requests = os.fdopen(requests_fd, "r", buffering=1)
    log_fd = os.open(workdir / "candidate.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    from kernelgate.worker import stacks
    from kernelgate.worker.judge import exit_with_parent

    stacks.arm(workdir / stacks.CANDIDATE_DUMP)  # where it was, if a request times out (the judge asks)

    exit_with_parent(os.getppid(), "kernelgate-judge-watch")

    def send(record: dict) -> None:
        replies.write(json.dumps(record, allow_nan=False) + "\n")
        replies.flush()

    import torch

    import kernelgate.integrity  # noqa: F401  (ahead of the job)
    import kernelgate.numerics  # noqa: F401
    from kernelgate.dsl import plugins

    plugins()
    if torch.cuda.is_available():
        import torch._inductor.config  # noqa: F401  (use_deterministic_algorithms imports it on first use)
    flag = None
    if flag_path != "-":
        with open(flag_path, "r+b") as handle:
            flag = mmap.mmap(handle.fileno(), 8)
    requests.readline()  # the judge's go-ahead for the CUDA context
    if torch.cuda.is_available():
        from kernelgate.worker.judge import start_cuda

        start_cuda(blocking_sync=True)
    send({"type": "ready", "pid": os.getpid()})
    runner = Runner(workdir, send, flag)
    _compile_watch(flag)
    handlers = {"load": runner.load, "call": runner.call, "recopy": runner.recopy, "artifacts": runner.artifacts,
                "ping": runner.ping, "check": runner.check, "calibrate": runner.calibrate,
                "stream_open": runner.stream_open, "stream": runner.stream, "stream_close": runner.stream_close}
    for line in requests:
        received = time.perf_counter()
        req = json.loads(line)
        if req.get("type") == "exit":
            break
        for key in req.get("release") or ():  # the judge frees these next: drop the mappings
            runner.opened.pop(key, None)
        try:
            reply = handlers[req["type"]](req)
        except Exception as exc:  # the runner's own fault, or the candidate's reaching it: say so, go on
            reply = {"type": req["type"] if req["type"] in ("load", "artifacts") else "call",
                     "error": {"reason": "runtime_error", "message": f"{type(exc).__name__}: {str(exc)[:500]}"}}
        if reply.get("type") == "call":
            reply["runner_ms"] = (time.perf_counter() - received) * 1e3
        send(reply)
    replies.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
