"""Can the judge time the candidate's GPU work on its own clock, across processes? (investigation)

The gate's open hole (docs/hostile.md, "Not promised"): the candidate's process reports its own
event times, and the judge's only check, its wall clock around the round trip, has a resolution
of about 1.5 ms because the candidate's Python runs inside it. This probe measures a GPU-side
handshake that keeps the candidate's host out of the measured interval:

1. The candidate's process enqueues, on its stream: a wait on a 32-bit flag in memory the judge
   owns (``cuStreamWaitValue32``, driver API), its work, and a record of an interprocess event
   the judge made (``torch.cuda.Event(interprocess=True)``); then it replies, without syncing.
2. The judge then enqueues on its own stream: a copy of fresh values into the inputs (a cheat
   that does not wait for the flag reads stale values), the flag write, its mark event, a wait on
   the interprocess event, its end event; and syncs.

end - mark is the candidate's work plus the switch between the two processes' contexts, measured
with work of known length
(``torch.cuda._sleep``) and with a memory-bound copy of several sizes, beside the candidate's own
events around the same work. What decides whether the gate can use it: the spread of
(judge - candidate) per size, against the 1.5 to 2.5 ms of today's wall check.

3. A forger records the judge's event first and does its work after it (``early``). The judge
   queues a one-element kernel of its own behind the event and reads its clock at that kernel's
   end too: two processes' contexts are time-sliced, not run at once (no MPS), so if that clock
   includes the forger's work (up to a time slice), the early event hides nothing.

0. A preflight first: the judge raises the flag 0.3 s after its request, without waiting for the
   reply, and the candidate's side reports how long its host call that enqueues the wait took. On
   the H100 (2026-12-06, a9bc8ae) the candidate's side never replied to its first request within
   20 s; if the enqueue blocks the host until the flag is up, every later case would deadlock
   (the judge raises the flag only after the reply), and the probe stops there and says so.

    python3 benchmarks/probes/handshake_clock.py --out "$OUT/handshake_clock_h200.json"   # GPU only, ~1 min
    python3 benchmarks/probes/handshake_clock.py --only preflight --out "$OUT/handshake_preflight.json"  # ~15 s

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
SIZES_MB = (1, 16, 256)
SLEEP_CYCLES = (0, 20_000, 200_000, 2_000_000)  # about 0, 10 us, 100 us, 1 ms at ~2 GHz
EARLY_CYCLES = (200_000, 2_000_000, 20_000_000, 100_000_000)  # about 100 us, 1 ms, 10 ms, 50 ms
REPS = 40
REPLY_S = 20.0  # no reply from the candidate's side this long: it is stuck or dead, and the probe says which


def _driver_attribute(attribute: int) -> int | None:
    """cuDeviceGetAttribute on device 0 (None where the driver refuses)."""
    cuda = ctypes.CDLL("libcuda.so.1")
    value, device = ctypes.c_int(), ctypes.c_int()
    if cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return None
    return value.value if cuda.cuDeviceGetAttribute(ctypes.byref(value), attribute, device) == 0 else None


def _wait_value(stream: int, address: int, value: int) -> None:
    cuda = ctypes.CDLL("libcuda.so.1")
    fn = getattr(cuda, "cuStreamWaitValue32_v2", None) or cuda.cuStreamWaitValue32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    code = fn(ctypes.c_void_p(stream), ctypes.c_uint64(address), ctypes.c_uint32(value), ctypes.c_uint(WAIT_GEQ))
    if code != 0:
        raise RuntimeError(f"cuStreamWaitValue32 returned CUresult {code}")


def candidate(conn, flag, x, y, event_handle) -> None:
    """The candidate's side: per request, wait on the flag, work, record the judge's event. An error
    goes back to the judge as ("error", text) instead of leaving it waiting."""
    serve_reporting(_serve, conn, flag, x, y, event_handle, stuck_s=REPLY_S * 0.6)


def _serve(conn, flag, x, y, event_handle) -> None:
    print("candidate side: started", file=sys.stderr, flush=True)
    torch.cuda.init()
    done = torch.cuda.Event.from_ipc_handle(torch.cuda.current_device(), event_handle)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    stream = torch.cuda.current_stream()
    warm_up(torch, x, y)
    while True:
        request = conn.recv()
        faulthandler.dump_traceback_later(REPLY_S * 0.6)
        if request is None:
            return
        kind, amount, value, gated = request
        wait_call_ms = 0.0
        if value <= 2:
            print(f"candidate side: request {value} ({kind}, gated {gated}) received", file=sys.stderr, flush=True)
        began = time.perf_counter()
        if gated:
            _wait_value(stream.cuda_stream, flag.data_ptr(), value)
            wait_call_ms = (time.perf_counter() - began) * 1e3
            if value <= 2:
                print(f"candidate side: wait {value} enqueued", file=sys.stderr, flush=True)
        start.record()
        if kind == "early":  # a forger: the judge's event first, the work after it
            done.record(stream)
            torch.cuda._sleep(amount)
        elif kind == "sleep":
            torch.cuda._sleep(amount)
        else:  # a memory-bound copy of `amount` elements, doubled (reads x, writes y)
            torch.mul(x[:amount], 2.0, out=y[:amount])
        end.record()
        if kind != "early":
            done.record(stream)
        if kind == "preflight":  # how long the host call to enqueue the wait took
            conn.send(("enqueued", wait_call_ms))
            torch.cuda.synchronize()
            continue
        conn.send("enqueued")
        torch.cuda.synchronize()
        conn.send(start.elapsed_time(end))


def judge(conn, flag, x, y, staging, done, kind: str, amount: int, gated: bool,
          value: int) -> tuple[float, float, float, float]:
    """(the judge's clock from the flag write to the candidate's event, the judge's own part before
    it: fresh inputs and the flag, the candidate's own events, the judge's clock from the flag to
    the end of a one-element kernel of its own queued behind the candidate's event) for one
    handshake, in ms. The last one asks whether the GPU runs the judge's context while the
    candidate's still has work (a forger that records the event early): without MPS the two
    contexts are time-sliced, not concurrent."""
    start, mark, end, after = (torch.cuda.Event(enable_timing=True) for _ in range(4))
    conn.send((kind, amount, value, gated))
    assert _reply(conn, "enqueued") == "enqueued"
    stream = torch.cuda.current_stream()
    start.record()
    if kind == "copy":
        x[:amount].copy_(staging[:amount])  # fresh values: only a candidate that waited reads them
    flag.fill_(value)
    mark.record()
    stream.wait_event(done)
    end.record()
    flag.add_(0)  # one tiny kernel of the judge's own, behind the candidate's event
    after.record()
    limit = time.monotonic() + REPLY_S
    while not after.query():  # a wait that never ends (the flag not seen) is reported, not hung on
        if time.monotonic() > limit:
            raise RuntimeError(f"the judge's stream did not reach its end within {REPLY_S} s ({kind} {amount}, "
                               f"gated {gated}): the candidate's event was never recorded")
        time.sleep(1e-4)
    own = _reply(conn, "its own time")
    if kind == "copy" and gated and not torch.equal(y[:amount], staging[:amount] * 2.0):
        raise RuntimeError("the candidate read stale inputs: the flag did not order its work")
    return mark.elapsed_time(end), start.elapsed_time(mark), own, mark.elapsed_time(after)


def preflight(conn, flag, value: int, delay_s: float = 0.3) -> dict:
    """Does enqueueing the wait block the candidate's host thread until the flag is up? The judge
    raises the flag ``delay_s`` after its request without waiting for a reply: a host call that
    blocks returns after about ``delay_s`` (and the judge-after-reply order of the real cases would
    deadlock); a GPU-side wait returns at once."""
    conn.send(("preflight", 0, value, True))
    time.sleep(delay_s)
    flag.fill_(value)
    torch.cuda.synchronize()
    message = _reply(conn, "the preflight's enqueue time")
    wait_call_ms = message[1]
    return {"value": value, "flag_raised_after_ms": delay_s * 1e3, "wait_call_ms": wait_call_ms,
            "host_blocking": wait_call_ms > 0.5 * delay_s * 1e3}


def _reply(conn, what: str):
    """The candidate side's next message; RuntimeError when it reports an error or says nothing in time."""
    if not conn.poll(REPLY_S):
        raise RuntimeError(f"no reply ({what}) from the candidate's side within {REPLY_S} s")
    message = conn.recv()
    if isinstance(message, tuple) and message and message[0] == "error":
        raise RuntimeError(message[1])
    return message


def _write(out: str, argv: list[str] | None, began: float, reps: int, error: str | None, rows: list) -> None:
    """The record so far (after every row: a run cut short keeps what finished)."""
    record = {"command": " ".join(["python3 benchmarks/probes/handshake_clock.py", *(sys.argv[1:] if argv is None else argv)]),
              "date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
              "device": torch.cuda.get_device_name(0), **provenance(torch), "torch": torch.__version__, "python": platform.python_version(),
              "seconds": round(time.perf_counter() - began, 1), "reps": reps,
              "can_use_stream_mem_ops_v1": _driver_attribute(92),  # CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1
              "error": error, "rows": rows}
    with open(out, "w") as f:
        json.dump(record, f, indent=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=REPS)
    parser.add_argument("--only", choices=("sleep", "copy", "early", "preflight"), action="append",
                        help="run these kinds of case only (repeatable; default all)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("handshake_clock: no GPU here; this probe measures a GPU-side clock and needs one", file=sys.stderr)
        return 2
    mp.set_start_method("spawn", force=True)
    elements = max(SIZES_MB) * (1 << 20) // 4
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    x, y = torch.randn(elements, device="cuda"), torch.empty(elements, device="cuda")
    done = torch.cuda.Event(interprocess=True)
    ours, theirs = mp.Pipe()
    child = mp.Process(target=candidate, args=(theirs, flag, x, y, done.ipc_handle()), daemon=True)
    child.start()
    theirs.close()  # only the child holds that end now: its death reads as EOF here
    faulthandler.dump_traceback_later(REPLY_S * 6, exit=True)
    rows, value, error = [], 0, None
    began = time.perf_counter()
    try:
        for _ in range(2):  # the first one also pays for the candidate side's start
            value += 1
            rows.append({"kind": "preflight", **preflight(ours, flag, value)})
            print(json.dumps(rows[-1]), flush=True)
        _write(args.out, argv, began, args.reps, None, rows)
        if rows[-1]["host_blocking"]:
            raise RuntimeError("enqueueing cuStreamWaitValue32 blocks the candidate's host thread until the "
                               "flag is up: the handshake must raise the flag without waiting for a reply")
        cases = [("sleep", c) for c in SLEEP_CYCLES] + [("copy", mb * (1 << 20) // 4) for mb in SIZES_MB]
        forgers = [("early", c) for c in EARLY_CYCLES]
        plan = [(g, k, a) for g in (True, False) for k, a in cases] + [(True, k, a) for k, a in forgers]
        plan = [step for step in plan if not args.only or step[1] in args.only]
        for gated, kind, amount in plan:
            judged, prepared, own, behind = [], [], [], []
            faulthandler.dump_traceback_later(REPLY_S * 6, exit=True)
            for rep in range(args.reps + 3):
                value += 1
                staging = torch.randn(amount if kind == "copy" else 1, device="cuda")
                j, p, o, b = judge(ours, flag, x, y, staging, done, kind, amount, gated, value)
                if rep >= 3:  # warm-up
                    judged.append(j)
                    prepared.append(p)
                    own.append(o)
                    behind.append(b)
            gap = [a - b for a, b in zip(judged, own)]
            rows.append({"kind": kind, "amount": amount, "gated": gated, "judge_ms": summary(judged),
                         "judge_prepare_ms": summary(prepared), "candidate_ms": summary(own),
                         "judge_minus_candidate_ms": summary(gap),
                         "judge_to_own_kernel_ms": summary(behind)})
            _write(args.out, argv, began, args.reps, None, rows)
            print(json.dumps({k: rows[-1][k] for k in ("kind", "amount", "gated")}),
                  f"judge {rows[-1]['judge_ms']['median']:.4f} ms, own {rows[-1]['candidate_ms']['median']:.4f} ms,",
                  f"judge to its own kernel {rows[-1]['judge_to_own_kernel_ms']['median']:.4f} ms,",
                  f"gap p10..p90 {rows[-1]['judge_minus_candidate_ms']['p10']:.4f}..{rows[-1]['judge_minus_candidate_ms']['p90']:.4f}",
                  flush=True)
    except (EOFError, RuntimeError, AssertionError) as exc:  # the candidate's side died or the flag failed
        error = f"{type(exc).__name__}: {exc}"
        print("handshake_clock:", error, file=sys.stderr)
    finally:
        stop(child, ours, error)
    _write(args.out, argv, began, args.reps, error, rows)
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
