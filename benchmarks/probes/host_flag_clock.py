"""Can the judge time the candidate's GPU work with its own host clock, across processes? (investigation)

The variant of ``handshake_clock.py`` that keeps the judge's GPU context out of the handshake.
The flag lives in shared host memory (``share_memory_()``), which the candidate's process pins and
maps for the GPU (``cudaHostRegister``, mapped and portable). Per call:

1. The candidate's process enqueues on its stream: a wait until the flag reaches the call's number
   (``cuStreamWaitValue32`` on the mapped host word), its work between its own events, and a
   record of an interprocess event the judge made. Then it replies, and (in the gate) would be
   stopped.
2. The judge writes fresh input values (its own GPU context; it synchronizes), then stores the
   flag from the host and starts its host clock; it stops the clock when the interprocess event
   completes (``query()``, polled). Nothing of the judge's is queued on the GPU meanwhile.

Rows: ``sleep`` (a GPU sleep of N cycles), ``copy`` (a memory-bound call of N elements), ``stream``
(N calls of 1 MB back to back behind one wait: the host's cost per call is out of the clock) and
``judge_side`` (the same N calls in the judge's own process behind a wait on a word it mapped
itself: how the library would be timed beside it).

What decides whether the gate can use it: that enqueueing the wait does not block the candidate's
host thread (the preflight: the flag is stored 0.3 s after the request, without waiting for the
reply), and the spread of (judge - candidate) per size of work, against the 1.5 to 2.5 ms of the
gate's wall check today.

    python3 benchmarks/probes/host_flag_clock.py --out "$OUT/host_flag_clock_h200.json"   # GPU only, < 1 min

Imports torch only (no kernelgate). Without a GPU it says so and exits 2.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import platform
import sys
import time

import torch
import torch.multiprocessing as mp
from _ipc_probe import provenance, serve_reporting, stop, summary, warm_up

WAIT_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ: (int32)(*addr - value) >= 0
HOST_REGISTER_PORTABLE, HOST_REGISTER_DEVICEMAP = 0x1, 0x2
SLEEP_CYCLES = (0, 20_000, 200_000, 2_000_000)  # about 0, 10 us, 100 us, 1 ms at ~2 GHz
SIZES_MB = (1, 16, 256)
SLICE = (1 << 20) // 4  # one call of a stream: 1 MB in, 1 MB out
STREAM_CALLS = (1, 16, 64)
REPS = 30
REPLY_S = 20.0


def _libcuda():
    return ctypes.CDLL("libcuda.so.1")


def _mapped_pointer(host: torch.Tensor) -> int:
    """Pin ``host`` (shared host memory) for this process's context, mapped; its device address."""
    cuda = _libcuda()
    size = host.numel() * host.element_size()
    fn = getattr(cuda, "cuMemHostRegister_v2", None) or cuda.cuMemHostRegister
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    code = fn(ctypes.c_void_p(host.data_ptr()), ctypes.c_size_t(size),
              ctypes.c_uint(HOST_REGISTER_PORTABLE | HOST_REGISTER_DEVICEMAP))
    if code != 0:
        raise RuntimeError(f"cuMemHostRegister returned CUresult {code}")
    device = ctypes.c_uint64()
    get = getattr(cuda, "cuMemHostGetDevicePointer_v2", None) or cuda.cuMemHostGetDevicePointer
    get.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p, ctypes.c_uint]
    code = get(ctypes.byref(device), ctypes.c_void_p(host.data_ptr()), ctypes.c_uint(0))
    if code != 0:
        raise RuntimeError(f"cuMemHostGetDevicePointer returned CUresult {code}")
    return device.value


def _wait_value(stream: int, address: int, value: int) -> None:
    fn = _libcuda().cuStreamWaitValue32_v2
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    code = fn(ctypes.c_void_p(stream), ctypes.c_uint64(address), ctypes.c_uint32(value), ctypes.c_uint(WAIT_GEQ))
    if code != 0:
        raise RuntimeError(f"cuStreamWaitValue32_v2 returned CUresult {code}")


def candidate(conn, words, x, y, event_handle) -> None:
    """The candidate's side. An error goes back to the judge as ("error", text)."""
    serve_reporting(_serve, conn, words, x, y, event_handle, stuck_s=REPLY_S * 0.6)


def _serve(conn, words, x, y, event_handle) -> None:
    print("candidate side: started", file=sys.stderr, flush=True)
    torch.empty(1, device="cuda")  # the primary context, current on this thread, for the driver calls
    flag = _mapped_pointer(words)
    print("candidate side: flag mapped", file=sys.stderr, flush=True)
    done = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), event_handle)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream()
    warm_up(torch, x, y)
    conn.send(("ready", None))
    while True:
        request = conn.recv()
        faulthandler.dump_traceback_later(REPLY_S * 0.6)
        if request is None:
            return
        kind, amount, value = request
        began = time.perf_counter()
        _wait_value(stream.cuda_stream, flag, value)
        wait_call_ms = (time.perf_counter() - began) * 1e3
        start.record()
        if kind == "copy":
            torch.mul(x[:amount], 2.0, out=y[:amount])
        elif kind == "stream":  # `amount` calls back to back behind the one wait, each on its own slice
            for i in range(amount):
                torch.mul(x[i * SLICE:(i + 1) * SLICE], 2.0, out=y[i * SLICE:(i + 1) * SLICE])
        elif amount:
            torch.cuda._sleep(amount)
        end.record()
        done.record(stream)
        conn.send(("enqueued", wait_call_ms))
        torch.cuda.synchronize()
        conn.send(("own", start.elapsed_time(end)))


def _reply(conn, what: str):
    if not conn.poll(REPLY_S):
        raise RuntimeError(f"no reply ({what}) from the candidate's side within {REPLY_S} s")
    tag, payload = conn.recv()
    if tag == "error":
        raise RuntimeError(payload)
    return payload


def _until(done: torch.cuda.Event, what: str) -> float:
    """Poll the interprocess event from the host; the perf_counter when it completed."""
    limit = time.monotonic() + REPLY_S
    while not done.query():
        if time.monotonic() > limit:
            raise RuntimeError(f"{what}: the candidate's event did not complete within {REPLY_S} s")
    return time.perf_counter()


def preflight(conn, words, done, value: int, delay_s: float = 0.3) -> dict:
    """The flag stored ``delay_s`` after the request, without waiting for the reply: an enqueue
    that blocks the host returns after about ``delay_s``, a GPU-side wait at once."""
    conn.send(("sleep", 0, value))
    time.sleep(delay_s)
    words[0] = value
    wait_call_ms = _reply(conn, "the preflight's enqueue")
    _until(done, "preflight")
    _reply(conn, "the preflight's own time")
    return {"kind": "preflight", "value": value, "flag_stored_after_ms": delay_s * 1e3,
            "wait_call_ms": wait_call_ms, "host_blocking": wait_call_ms > 0.5 * delay_s * 1e3}


def judge(conn, words, x, y, staging, done, kind: str, amount: int, value: int) -> tuple[float, float, float]:
    """(the judge's host clock from the flag store to the candidate's event, the candidate's own
    events, the candidate's host time to enqueue its wait) for one call, in ms."""
    conn.send((kind, amount, value))
    wait_call_ms = _reply(conn, "enqueued")
    if kind in ("copy", "stream"):  # fresh values, written from the judge's context while the candidate's stream
        x[:staging.numel()].copy_(staging)  # waits: only work that waited for the flag reads them
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    words[0] = value
    t1 = _until(done, f"{kind} {amount}")
    own = _reply(conn, "its own time")
    if kind in ("copy", "stream") and not torch.equal(y[:staging.numel()], staging * 2.0):
        raise RuntimeError("the candidate read stale inputs: the flag did not order its work")
    return (t1 - t0) * 1e3, own, wait_call_ms


def judge_side(words, flag: int, x, y, staging, value: int) -> tuple[float, float, float]:
    """The library's side of the same clock, in the judge's own process: its stream waits on a host
    word it mapped itself, then ``len(staging) / SLICE`` calls; the judge stores the word and polls
    its own event. (the judge's clock, its own events, 0) in ms."""
    calls = staging.numel() // SLICE
    x[:staging.numel()].copy_(staging)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    finished = torch.cuda.Event()
    _wait_value(torch.cuda.current_stream().cuda_stream, flag, value)
    start.record()
    for i in range(calls):
        torch.mul(x[i * SLICE:(i + 1) * SLICE], 2.0, out=y[i * SLICE:(i + 1) * SLICE])
    end.record()
    finished.record()
    t0 = time.perf_counter()
    words[1] = value
    t1 = _until(finished, f"judge side {calls}")
    torch.cuda.synchronize()
    if not torch.equal(y[:staging.numel()], staging * 2.0):
        raise RuntimeError("the judge's own gated stream read stale inputs")
    return (t1 - t0) * 1e3, start.elapsed_time(end), 0.0


def _write(out: str, argv: list[str] | None, began: float, reps: int, error: str | None, rows: list) -> None:
    record = {"command": " ".join(["python3 benchmarks/probes/host_flag_clock.py",
                                   *(sys.argv[1:] if argv is None else argv)]),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
              "device": torch.cuda.get_device_name(0), **provenance(torch), "torch": torch.__version__,
              "python": platform.python_version(), "seconds": round(time.perf_counter() - began, 1),
              "reps": reps, "error": error, "rows": rows}
    with open(out, "w") as f:
        json.dump(record, f, indent=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=REPS)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_flag_clock: no GPU here; this probe measures a GPU-side handshake and needs one", file=sys.stderr)
        return 2
    mp.set_start_method("spawn", force=True)
    words = torch.zeros(16, dtype=torch.int32).share_memory_()
    elements = max(SIZES_MB) * (1 << 20) // 4
    x, y = torch.randn(elements, device="cuda"), torch.empty(elements, device="cuda")
    done = torch.cuda.Event(interprocess=True)
    ours, theirs = mp.Pipe()
    child = mp.Process(target=candidate, args=(theirs, words, x, y, done.ipc_handle()), daemon=True)
    child.start()
    theirs.close()
    faulthandler.dump_traceback_later(REPLY_S * 6, exit=True)
    rows, value, error = [], 0, None
    began = time.perf_counter()
    try:
        _reply(conn=ours, what="ready")
        for _ in range(2):
            value += 1
            rows.append(preflight(ours, words, done, value))
            print(json.dumps(rows[-1]), flush=True)
        _write(args.out, argv, began, args.reps, None, rows)
        if rows[-1]["host_blocking"]:
            raise RuntimeError("enqueueing the wait blocks the candidate's host thread until the flag is stored")
        plan = ([("sleep", c) for c in SLEEP_CYCLES] + [("copy", mb * (1 << 20) // 4) for mb in SIZES_MB]
                + [("stream", k) for k in STREAM_CALLS] + [("judge_side", k) for k in (0, *STREAM_CALLS)])
        own_flag = _mapped_pointer(words)  # the judge's own context maps the same word array (word 1)
        warm_up(torch, x, y)  # the judge's own stream waits too (judge_side): its kernels loaded first
        for kind, amount in plan:
            faulthandler.dump_traceback_later(REPLY_S * 6, exit=True)
            judged, own, enqueue = [], [], []
            for rep in range(args.reps + 3):
                value += 1
                size = {"copy": amount, "stream": amount * SLICE, "judge_side": amount * SLICE}.get(kind, 1)
                staging = torch.randn(max(size, 1) if kind != "judge_side" else size, device="cuda")
                if kind == "judge_side":
                    j, o, w = judge_side(words, own_flag + 4, x, y, staging, value)
                else:
                    j, o, w = judge(ours, words, x, y, staging, done, kind, amount, value)
                if rep >= 3:  # warm-up
                    judged.append(j)
                    own.append(o)
                    enqueue.append(w)
            rows.append({"kind": kind, "amount": amount, "judge_ms": summary(judged), "candidate_ms": summary(own),
                         "judge_minus_candidate_ms": summary([a - b for a, b in zip(judged, own)]),
                         "candidate_wait_enqueue_ms": summary(enqueue)})
            _write(args.out, argv, began, args.reps, None, rows)
            gap = rows[-1]["judge_minus_candidate_ms"]
            print(f"{kind} {amount}: judge {rows[-1]['judge_ms']['median']:.4f} ms, own "
                  f"{rows[-1]['candidate_ms']['median']:.4f} ms, gap p10..p90 {gap['p10']:.4f}..{gap['p90']:.4f}",
                  flush=True)
    except (EOFError, RuntimeError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        print("host_flag_clock:", error, file=sys.stderr)
    finally:
        words[0] = words[1] = 1 << 30  # release any wait still queued, on either side
        stop(child, ours, error)
    _write(args.out, argv, began, args.reps, error, rows)
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
