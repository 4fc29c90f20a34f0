"""What GPU is this, and how fast can it possibly go?

The roofline needs two ceilings for the device a kernel ran on: memory bandwidth and math
throughput (per math mode), plus the cost of one empty kernel launch. This module:

* ``detect`` reads what the device says about itself (torch for name, compute capability, SM
  count and memory; NVML, when importable, for UUID, driver and clocks). No GPU -> ``None``.
* ``SPEC_TABLE`` / ``match_spec`` hold the vendor datasheet peaks, stored **dense** (datasheets
  usually print tensor-core figures with 2:4 sparsity; those are halved here and the row's
  ``source`` says so).
* ``calibrate`` measures the ceilings on the present GPU (copy bandwidth, GEMM rate per mode,
  launch latency); ``save_calibration`` / ``load_calibration`` keep the result in a JSON cache.
* ``peaks_for`` picks the best ceilings known: calibrated cache, else datasheet, else a
  generic guess (with a warning).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import statistics
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Annotated, Callable, Literal

from pydantic import Field, ValidationError

from kernelgate._base import Model
from kernelgate.errors import CalibrationError, NoGPUError

__all__ = [
    "MathMode",
    "DeviceInfo",
    "Peaks",
    "SPEC_TABLE",
    "GENERIC_SOURCE",
    "match_spec",
    "detect",
    "calibrate",
    "cache_path",
    "save_calibration",
    "load_calibration",
    "peaks_for",
]

logger = logging.getLogger(__name__)

GENERIC_SOURCE = "unknown device: generic guess"
"""``source`` of the fallback row used when a device matches no datasheet row."""


class MathMode(str, Enum):
    """Which arithmetic units a GEMM-like kernel runs on."""

    fp32 = "fp32"  # CUDA-core fp32 FMA (no TF32)
    tf32 = "tf32"  # tensor cores, fp32 storage with TF32 inputs
    fp16 = "fp16"  # tensor cores
    bf16 = "bf16"  # tensor cores
    fp64 = "fp64"  # fp64 (datasheet: the non-tensor figure)


# Where tflops() looks when a mode is missing, in order. Always ends at fp32.
_FALLBACK: dict[MathMode, tuple[MathMode, ...]] = {
    MathMode.fp32: (MathMode.fp32,),
    MathMode.tf32: (MathMode.tf32, MathMode.fp32),
    MathMode.fp16: (MathMode.fp16, MathMode.bf16, MathMode.fp32),
    MathMode.bf16: (MathMode.bf16, MathMode.fp16, MathMode.fp32),
    MathMode.fp64: (MathMode.fp64, MathMode.fp32),
}


class DeviceInfo(Model):
    """What was detected about one GPU. Fields are ``None`` where the source could not tell."""

    name: str
    """Device name as the driver prints it, e.g. ``"NVIDIA H200"``."""
    uuid: str | None = None
    """NVML UUID (``"GPU-..."``); ``None`` without NVML."""
    compute_capability: str
    """``"major.minor"``, e.g. ``"9.0"``."""
    sm_count: int | None = None
    """Number of streaming multiprocessors."""
    memory_total_bytes: int | None = None
    """Device memory, bytes."""
    l2_bytes: int | None = None
    """L2 cache size, bytes."""
    driver_version: str | None = None
    """NVIDIA driver version string; ``None`` without NVML."""
    sm_clock_mhz: int | None = None
    """SM clock at detection time, MHz (idle clocks are low; this is not a ceiling)."""
    mem_clock_mhz: int | None = None
    """Memory clock at detection time, MHz."""
    sm_clock_max_mhz: int | None = None
    """Maximum SM clock, MHz."""


class Peaks(Model):
    """Ceilings the roofline divides by: bandwidth, dense math rate per mode, launch cost."""

    device_name: str
    """Product the figures are for (datasheet product name, or the detected device name)."""
    bw_gbs: Annotated[float, Field(gt=0)]
    """Memory bandwidth, GB/s (1e9 bytes/s)."""
    flops_tflops: Annotated[dict[MathMode, Annotated[float, Field(gt=0)]], Field(min_length=1)]
    """Dense (no sparsity) math rate per mode, TFLOP/s (1e12 flop/s)."""
    launch_latency_us: Annotated[float, Field(ge=0)] = 4.0
    """Cost of one empty kernel launch, microseconds (4.0 is a typical figure, not a datasheet one)."""
    source: str
    """Citation of the datasheet, or ``"calibrated on <device> <iso date>"``."""
    kind: Literal["datasheet", "calibrated"]
    """Whether the figures were read from a datasheet or measured on the device."""

    def tflops(self, mode: MathMode | str) -> float:
        """Dense TFLOP/s for ``mode``; a missing mode falls back (tf32->fp32, fp16<->bf16, ...)."""
        mode = MathMode(mode)
        for candidate in _FALLBACK[mode]:
            if candidate in self.flops_tflops:
                if candidate is not mode:
                    logger.debug("%s: no %s figure, using %s", self.device_name, mode.value, candidate.value)
                return self.flops_tflops[candidate]
        # No fp32 either (hand-built row): the smallest known figure is the safe guess.
        return min(self.flops_tflops.values())


def _row(name: str, bw: float, fp32: float, tf32: float, half: float, fp64: float | None, source: str) -> Peaks:
    flops = {MathMode.fp32: fp32, MathMode.tf32: tf32, MathMode.fp16: half, MathMode.bf16: half}
    if fp64 is not None:
        flops[MathMode.fp64] = fp64
    return Peaks(device_name=name, bw_gbs=bw, flops_tflops=flops, source=source, kind="datasheet")


_DENSE = "tensor figures dense (non-sparse), i.e. the printed sparse figure / 2"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (2020)"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet (2022)"
_GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet (2023)"

SPEC_TABLE: dict[str, Peaks] = {
    "A100-SXM4-40GB": _row("NVIDIA A100-SXM4-40GB", 1555, 19.5, 156, 312, 9.7,
                           f"{_A100}, SXM4 40GB column; {_DENSE}"),
    "A100-SXM4-80GB": _row("NVIDIA A100-SXM4-80GB", 2039, 19.5, 156, 312, 9.7,
                           f"{_A100}, SXM4 80GB column; {_DENSE}"),
    "A100-PCIE-40GB": _row("NVIDIA A100-PCIE-40GB", 1555, 19.5, 156, 312, 9.7,
                           f"{_A100}, PCIe 40GB column; {_DENSE}"),
    "A100-PCIE-80GB": _row("NVIDIA A100 80GB PCIe", 1935, 19.5, 156, 312, 9.7,
                           f"{_A100}, PCIe 80GB column; {_DENSE}"),
    "H100-SXM5-80GB": _row("NVIDIA H100 SXM5 80GB", 3350, 67, 494.7, 989.4, 34,
                           f"{_H100}, H100 SXM column; {_DENSE}"),
    "H100-PCIE-80GB": _row("NVIDIA H100 PCIe", 2000, 51, 378, 756, 26,
                           f"{_H100}, H100 PCIe column; {_DENSE}"),
    "H200-SXM-141GB": _row("NVIDIA H200 SXM 141GB", 4800, 67, 494.7, 989.4, 34,
                           f"NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column; {_DENSE}"),
    "GH200-96GB": _row("NVIDIA GH200 96GB HBM3", 4000, 67, 494.7, 989.4, 34,
                       f"{_GH200}, H100-class GPU, 96GB HBM3 part (4000 GB/s; the 144GB HBM3e part "
                       f"is 4900 GB/s); {_DENSE}"),
    "GH200-144GB": _row("NVIDIA GH200 144GB HBM3e", 4900, 67, 494.7, 989.4, 34,
                        f"{_GH200}, H100-class GPU, 144GB HBM3e part; {_DENSE}"),
    "L40S": _row("NVIDIA L40S", 864, 91.6, 183, 362.05, None,
                 f"NVIDIA L40S GPU datasheet (2023); {_DENSE}; no fp64 figure printed"),
    "B200": _row("NVIDIA B200", 8000, 80, 1100, 2250, 40,
                 f"NVIDIA HGX B200 / Blackwell datasheet (2024), per-GPU figures (8-GPU totals / 8); "
                 f"{_DENSE}"),
}
"""Datasheet ceilings, keyed by a canonical name (see ``match_spec`` for the names drivers print)."""

_GENERIC_FIGURES = (1000.0, 15.0, 100.0, 200.0, 1.0)
"""Generic guess (bw GB/s, fp32, tf32, fp16/bf16, fp64 TFLOP/s): modest, data-centre-class figures."""


def match_spec(device_name: str) -> Peaks | None:
    """The datasheet row for a device name as torch / nvidia-smi print it, or ``None``."""
    up = device_name.strip().upper()
    for key, row in SPEC_TABLE.items():  # a canonical key or row name given verbatim
        if up in (key.upper(), row.device_name.upper()):
            return row
    text = " " + re.sub(r"[^A-Z0-9]+", " ", up) + " "

    def has(*words: str) -> bool:
        return any(f" {w} " in text for w in words)

    key: str | None = None
    if has("GH200"):
        key = "GH200-144GB" if has("HBM3E", "144G", "144GB") else "GH200-96GB"
    elif has("H200"):
        key = None if has("NVL") else "H200-SXM-141GB"
    elif has("H100"):
        key = "H100-PCIE-80GB" if has("PCIE") else (None if has("NVL") else "H100-SXM5-80GB")
    elif has("A100"):
        size = "80GB" if has("80GB", "80G") else "40GB"  # unspecified: the slower part
        key = f"A100-{'PCIE' if has('PCIE') else 'SXM4'}-{size}"
    elif has("L40S"):
        key = "L40S"
    elif has("B200"):
        key = "B200"
    return SPEC_TABLE[key] if key else None


def detect(device_index: int = 0) -> DeviceInfo | None:
    """Describe CUDA device ``device_index``; ``None`` when no CUDA GPU is usable."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        count = torch.cuda.device_count()
    except Exception as exc:  # broken driver / CUDA init failure: treat as "no GPU"
        logger.warning("CUDA is not usable: %s", exc)
        return None
    if not 0 <= device_index < count:
        raise ValueError(f"device_index {device_index} out of range: {count} CUDA device(s) visible")
    props = torch.cuda.get_device_properties(device_index)
    fields: dict[str, object] = dict(
        name=props.name,
        compute_capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        memory_total_bytes=props.total_memory,
        l2_bytes=getattr(props, "L2_cache_size", None),
    )
    fields.update(_nvml_fields(props, device_index))
    return DeviceInfo(**fields)


def _nvml_fields(props: object, device_index: int) -> dict[str, object]:
    """UUID, driver and clocks via NVML; empty where NVML is missing or fails."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except ImportError as exc:
        logger.info("NVML unavailable (%s; it comes with pip install 'kernelgate[gpu]'): uuid, driver and clocks "
                    "left empty", exc)
        return {}
    except Exception as exc:
        logger.info("NVML unavailable (%s): uuid, driver and clocks left empty", exc)
        return {}
    nv, out = pynvml, {}
    try:
        try:  # by UUID: the same physical GPU as torch's, whatever CUDA_VISIBLE_DEVICES says
            handle = nv.nvmlDeviceGetHandleByUUID(f"GPU-{props.uuid}")
        except Exception:
            handle = nv.nvmlDeviceGetHandleByIndex(device_index)
        queries: dict[str, Callable[[], object]] = {
            "uuid": lambda: nv.nvmlDeviceGetUUID(handle),
            "driver_version": nv.nvmlSystemGetDriverVersion,
            "sm_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_MEM),
            "sm_clock_max_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM),
        }
        for field, query in queries.items():
            try:
                value = query()
                out[field] = value.decode() if isinstance(value, bytes) else value
            except Exception as exc:
                logger.debug("NVML query %s failed: %s", field, exc)
    except Exception as exc:
        logger.info("NVML device lookup failed: %s", exc)
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
    return out


def _median_ms(torch_mod, fn: Callable[[], object], *, warmup: int, reps: int) -> float:
    """Median of ``reps`` CUDA-event timings of ``fn()`` after ``warmup`` untimed calls, ms."""
    for _ in range(warmup):
        fn()
    pairs = [(torch_mod.cuda.Event(enable_timing=True), torch_mod.cuda.Event(enable_timing=True))
             for _ in range(reps)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    torch_mod.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in pairs)


def calibrate(device_index: int = 0, *, size_bytes: int = 2 << 30, gemm_n: int = 8192) -> Peaks:
    """Measure copy bandwidth, GEMM TFLOP/s per mode and launch latency on the present GPU."""
    info = detect(device_index)
    if info is None:
        raise NoGPUError("calibrate() needs a CUDA GPU and none is visible")
    import torch

    reps = 10
    flops: dict[MathMode, float] = {}
    with torch.cuda.device(device_index):
        free_bytes, _ = torch.cuda.mem_get_info()
        size = min(size_bytes, int(free_bytes * 0.4)) // 4 * 4  # two buffers must fit
        if size < 64 << 20:
            raise CalibrationError(f"only {free_bytes} bytes free on {info.name}: too little to calibrate")
        src = torch.randint(0, 255, (size,), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy_ms = _median_ms(torch, lambda: dst.copy_(src), warmup=3, reps=2 * reps)
        bw_gbs = 2 * size / (copy_ms * 1e-3) / 1e9  # bytes read + written
        del src, dst

        plans = [(MathMode.fp32, torch.float32, False), (MathMode.tf32, torch.float32, True),
                 (MathMode.fp16, torch.float16, None), (MathMode.bf16, torch.bfloat16, None),
                 (MathMode.fp64, torch.float64, None)]
        saved_tf32 = torch.backends.cuda.matmul.allow_tf32
        try:
            for mode, dtype, tf32 in plans:
                n = max(gemm_n // 2, 256) if mode is MathMode.fp64 else gemm_n  # fp64 can be slow
                if tf32 is not None:
                    torch.backends.cuda.matmul.allow_tf32 = tf32
                try:
                    a = torch.randn(n, n, dtype=dtype, device="cuda")
                    b = torch.randn(n, n, dtype=dtype, device="cuda")
                    ms = _median_ms(torch, lambda: torch.mm(a, b), warmup=3, reps=reps)
                    flops[mode] = 2 * n**3 / (ms * 1e-3) / 1e12
                except RuntimeError as exc:
                    logger.warning("GEMM %s failed on %s, no figure: %s", mode.value, info.name, exc)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved_tf32

        x = torch.zeros(1, device="cuda")
        batch = 200

        def launches() -> None:
            for _ in range(batch):
                x.add_(1)

        launch_us = _median_ms(torch, launches, warmup=1, reps=reps) * 1e3 / batch
        del x
        torch.cuda.empty_cache()

    if MathMode.fp32 not in flops:
        raise CalibrationError(f"fp32 GEMM could not be measured on {info.name}")
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        peaks = Peaks(device_name=info.name, bw_gbs=bw_gbs, flops_tflops=flops, launch_latency_us=launch_us,
                      source=f"calibrated on {info.name} {stamp}", kind="calibrated")
    except ValidationError as exc:
        raise CalibrationError(f"implausible measurements on {info.name}: {exc}") from exc
    logger.info("calibrated %s: %.0f GB/s, %s TFLOP/s, launch %.2f us", info.name, peaks.bw_gbs,
                {m.value: round(v, 1) for m, v in flops.items()}, launch_us)
    return peaks


def cache_path(info: DeviceInfo) -> Path:
    """Calibration file for ``info``: ``$KERNELGATE_CACHE_DIR`` or ``~/.cache/kernelgate``.

    Keyed by device name (identical SKUs share ceilings and a shared home reuses one file);
    the UUID is used only when the name sanitizes to nothing.
    """
    env = os.environ.get("KERNELGATE_CACHE_DIR")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "kernelgate"
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", info.name).strip("-.")
    if not stem:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", info.uuid or "").strip("-.") or "unknown-device"
    return root / f"calibration-{stem}.json"


def save_calibration(peaks: Peaks, info: DeviceInfo) -> Path:
    """Write calibrated ``peaks`` for ``info`` to its cache file (atomically); returns the path."""
    if peaks.kind != "calibrated":
        raise ValueError(f"only calibrated peaks are cached, got kind={peaks.kind!r}")
    path = cache_path(info)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(peaks.model_dump_json(indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    logger.info("saved calibration for %s to %s", info.name, path)
    return path


def load_calibration(info: DeviceInfo) -> Peaks | None:
    """The cached calibration for ``info``, or ``None`` if absent or unreadable (logged)."""
    path = cache_path(info)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read calibration cache %s: %s", path, exc)
        return None
    try:
        peaks = Peaks.model_validate_json(raw)
    except ValidationError as exc:
        logger.warning("ignoring invalid calibration cache %s: %s", path, exc)
        return None
    if peaks.kind != "calibrated":
        logger.warning("ignoring calibration cache %s: kind is %r", path, peaks.kind)
        return None
    return peaks


def peaks_for(info: DeviceInfo, *, prefer_calibrated: bool = True) -> Peaks:
    """Best ceilings known for ``info``: calibrated cache, else datasheet row, else a generic guess."""
    if prefer_calibrated:
        cached = load_calibration(info)
        if cached is not None:
            return cached
    row = match_spec(info.name)
    if row is not None:
        return row.model_copy(deep=True)
    logger.warning("no datasheet row for %r and no calibration: using a generic guess; "
                   "run kernelgate.hardware.calibrate() for real ceilings", info.name)
    return _row(info.name, *_GENERIC_FIGURES, f"{GENERIC_SOURCE} (no datasheet row matched {info.name!r})")


def process_gpu_bytes(pid: int) -> int | None:
    """GPU memory the process ``pid`` holds on any device, as the driver counts it (NVML: its context
    and every allocation, whatever allocator made it); None where NVML is missing or says nothing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        held = None
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if process.pid == pid and process.usedGpuMemory is not None:
                    held = (held or 0) + int(process.usedGpuMemory)
        return held
    except Exception:  # ImportError, or an NVML error: not known
        return None
