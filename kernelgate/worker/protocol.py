"""What crosses the trust boundary between the judge and the candidate's process, and how.

The judge never imports candidate code and never unpickles anything the candidate's process
sends: every message from the candidate is one JSON line, validated by a model here. Messages
from the judge are JSON too (the candidate may read them as it likes).

Tensors do not travel in messages: both sides map the same memory, named by a ``TensorRef``.

- On a GPU, the judge allocates shared tensors in a memory pool of their own
  (``torch.cuda.MemPool``), so an IPC handle, which opens a whole allocator segment, reaches
  only other shared tensors (inputs and output slots), never the judge's expected outputs,
  pristine copies or the reference's state. The candidate opens them with CUDA IPC.
- On the CPU, a shared tensor is a file in a judge-owned folder (``/dev/shm`` where it exists),
  mapped by both processes (``torch.from_file(shared=True)``).

The candidate's outputs come back by copy: the judge hands it an output slot shaped like the
reference's output, filled with NaN; the candidate's process copies the forward's result into it
(after checking its type, shape and dtype, which it reports) before replying. What the judge
checks is what is in that slot when it reads it, whatever the candidate's process claims.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from kernelgate._base import Model

__all__ = ["TensorRef", "OutputMeta", "CallReply", "LoadReply", "ArtifactsReply", "SharedSpace", "open_ref",
           "encode_value", "decode_value", "START_GATE"]

START_GATE = "KERNELGATE_START_GATE"
"""Set to 1 by a ``TurnPool``: after its imports (CPU work) the judge says ``started`` and waits for
a go-ahead before creating its CUDA context (and letting its candidate process create one)."""


OOM_TEXTS = ("out of memory", "alloc_failed")
"""How an allocation the device refused reads in an error's text, torch's or a library's
(``CUBLAS_STATUS_ALLOC_FAILED``): the judge weighs it (``stages.crowded_out``), the pool runs it again alone."""


class TensorRef(Model):
    """A tensor both processes map: where it lives and how to view it."""

    kind: Literal["cpu", "cuda"]
    dtype: str
    """``float32``, ``int64``...: a ``torch`` attribute name."""
    shape: list[int]
    stride: list[int]
    path: str | None = None
    """CPU: the shared file."""
    nbytes: int = 0
    ipc: str | None = None
    """CUDA: the arguments of ``torch.multiprocessing.reductions.rebuild_cuda_tensor``, pickled by
    the judge (the candidate's side unpickles what the judge wrote, never the other way)."""


class OutputMeta(Model):
    """What the candidate's process says its forward returned (checked against the slot it filled)."""

    type_name: str
    plain_tensor: bool
    shape: list[int] | None = None
    dtype: str | None = None
    device: str | None = None
    strided: bool = True
    data_ptr: int | None = None


class Violation(Model):
    reason: str
    message: str


class CallReply(Model):
    """One forward call, as the candidate's process reports it."""

    type: Literal["call"] = "call"
    error: Violation | None = None
    """The call raised (reason ``runtime_error``, ``compile_error``, ``out_of_memory``...): classified there."""
    violation: Violation | None = None
    """The in-process guard saw tampering, a thread, a side stream... (the cheap first layer)."""
    meta: OutputMeta | None = None
    copied: bool = False
    """The output matched the slot's shape and dtype and was copied into it."""
    launches: dict[str, int] = Field(default_factory=dict)
    """Launches of the candidate's DSL kernels during the call, by kernel name."""
    ops: list[tuple[str, int]] = Field(default_factory=list)
    """Torch calls made by the candidate during the call, with their largest operand (elements)."""
    copies: list[tuple[str, int]] = Field(default_factory=list)
    to_host: list[tuple[str, int]] = Field(default_factory=list)
    """Reads of device tensors into host memory during the call, summed per call name (elements)."""
    event_ms: float | None = Field(default=None, gt=0)
    """Timed calls: the candidate's own CUDA-event time of the call (a claim of 0 is invalid)."""
    host_ms: float | None = Field(default=None, ge=0)
    """Host time to enqueue the call."""
    late: bool = False
    profile: tuple[float, list[str]] | None = None
    """Profiled calls: the share of device time outside the candidate's own kernels, and the top ones."""
    peak_bytes: int | None = None
    """``torch.cuda.max_memory_allocated`` of the candidate's process since its load."""
    held_bytes: int | None = None
    """``torch.cuda.memory_reserved`` of the candidate's process as it replied: what its allocator
    holds now (a claim; the driver's count, where there is one, is the judge's own evidence)."""
    compile_seconds: dict[str, float] = Field(default_factory=dict)
    runner_ms: float | None = None
    """Host time the candidate's process says it spent on the request (diagnosis only)."""
    gate_error: str | None = None
    """``stream_open``: the judge's flag page or event could not be mapped (``gpu_gate``)."""


class LoadReply(Model):
    type: Literal["load"] = "load"
    error: Violation | None = None
    violation: Violation | None = None
    state_copied: bool | None = None
    note: str | None = None
    cpu_numerics: bool = True
    """The DSL's kernels can run without a GPU (Triton's interpreter)."""
    versions: dict[str, str] = Field(default_factory=dict)
    held_bytes: int | None = None
    """As ``CallReply.held_bytes``, after the candidate's import and construction."""


class ArtifactsReply(Model):
    type: Literal["artifacts"] = "artifacts"
    kernels: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    compile_errors: list[str] = Field(default_factory=list)
    violation: Violation | None = None


class SharedSpace:
    """The judge's side: allocates tensors the candidate's process may map, and names them."""

    def __init__(self, device, folder: Path | None = None) -> None:
        import torch

        self.device = device
        self.cuda = device.type == "cuda"
        self._pool = None
        self._count = 0
        self._keep: list = []
        if self.cuda:
            pool_class = getattr(torch.cuda, "MemPool", None)
            self._pool = pool_class() if pool_class is not None else None
        else:
            base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
            self.folder = Path(folder or tempfile.mkdtemp(prefix="kernelgate-shared-", dir=base))

    def renew(self) -> None:
        """Share from a fresh pool from now on. The caching allocator keeps a live pool's freed blocks
        reserved (``torch.cuda.empty_cache`` releases the default pool's only): a large problem's
        released inputs and slots stayed the judge's. The old pool, dropped, gives its free blocks
        back to the device now and the rest as they are freed."""
        if self._pool is not None:
            import torch

            self._pool = torch.cuda.MemPool()

    @property
    def pooled(self) -> bool:
        """Shared tensors live in a pool of their own (no IPC handle reaches the judge's private memory)."""
        return self._pool is not None

    def empty(self, shape, dtype):
        """A new shared tensor (contiguous; contents undefined)."""
        import torch

        if self.cuda:
            if self._pool is not None:
                with torch.cuda.use_mem_pool(self._pool):
                    return torch.empty(tuple(shape), dtype=dtype, device=self.device)
            return torch.empty(tuple(shape), dtype=dtype, device=self.device)
        numel = 1
        for s in shape:
            numel *= int(s)
        nbytes = max(1, numel * torch.empty((), dtype=dtype).element_size())
        self._count += 1
        path = self.folder / f"t{self._count}"
        raw = torch.from_file(str(path), shared=True, size=nbytes, dtype=torch.uint8)
        tensor = raw[: numel * torch.empty((), dtype=dtype).element_size()].view(dtype).view(tuple(shape))
        tensor._kernelgate_path = str(path)  # type: ignore[attr-defined]
        tensor._kernelgate_nbytes = nbytes  # type: ignore[attr-defined]
        return tensor

    def copy_of(self, x):
        """A shared copy of ``x`` (non-tensors pass through unchanged)."""
        import torch

        if not isinstance(x, torch.Tensor):
            return x
        shared = self.empty(x.shape, x.dtype)
        shared.copy_(x)
        return shared

    def ref(self, tensor) -> TensorRef:
        """The name the candidate's process opens ``tensor`` by (``tensor`` must come from ``empty``)."""
        dtype = str(tensor.dtype).removeprefix("torch.")
        if self.cuda:
            from torch.multiprocessing.reductions import reduce_tensor

            _, args = reduce_tensor(tensor)
            self._keep.append(tensor)  # the producer keeps what it shared alive while the job runs
            return TensorRef(kind="cuda", dtype=dtype, shape=list(tensor.shape), stride=list(tensor.stride()),
                             ipc=base64.b64encode(pickle.dumps(args)).decode())
        return TensorRef(kind="cpu", dtype=dtype, shape=list(tensor.shape), stride=list(tensor.stride()),
                         path=tensor._kernelgate_path, nbytes=tensor._kernelgate_nbytes)

    def forget(self, tensor) -> None:
        """Stop sharing ``tensor`` once the candidate's process has let go of it (``Remote.release``):
        on a GPU its block returns to the pool when the last mapping goes (``torch.cuda.ipc_collect``),
        on the CPU its file is unlinked (a mapping still open stays valid until it is closed)."""
        if self.cuda:
            self._keep = [t for t in self._keep if t is not tensor]
            return
        path = getattr(tensor, "_kernelgate_path", None)
        if path:
            try:
                os.unlink(path)
            except OSError:
                pass

    def close(self) -> None:
        self._keep.clear()
        if not self.cuda:
            import shutil

            shutil.rmtree(self.folder, ignore_errors=True)


def ref_key(ref: dict) -> str:
    """The name under which the candidate's process keeps a tensor it opened (``open_ref_cached``)
    and lets it go again (a request's ``release``)."""
    key = ref.get("path") or ref.get("ipc") or json.dumps(ref, sort_keys=True)
    return f"{key}|{ref.get('dtype')}|{ref.get('shape')}|{ref.get('stride')}"


def encode_value(value: Any) -> dict:
    """A non-tensor argument (an int, a tuple of kernel sizes, a dtype) for the candidate's process:
    pickled by the judge, which is the trusted side of this direction."""
    return {"pickled": base64.b64encode(pickle.dumps(value)).decode()}


def decode_value(item: dict) -> Any:
    """The candidate's side of ``encode_value``."""
    return pickle.loads(base64.b64decode(item["pickled"]))


def open_ref(ref: TensorRef):
    """The candidate's side: map a shared tensor."""
    import torch

    dtype = getattr(torch, ref.dtype)
    if ref.kind == "cuda":
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        return rebuild_cuda_tensor(*pickle.loads(base64.b64decode(ref.ipc)))
    raw = torch.from_file(ref.path, shared=True, size=ref.nbytes, dtype=torch.uint8)
    numel = 1
    for s in ref.shape:
        numel *= s
    size = numel * torch.empty((), dtype=dtype).element_size()
    return raw[:size].view(dtype).as_strided(tuple(ref.shape), tuple(ref.stride))
