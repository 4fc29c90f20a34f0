"""Tests for kernelgate.hardware: datasheet table, name matching, cache, fallbacks."""

from __future__ import annotations

import json
import logging

import pytest

from kernelgate import hardware
from kernelgate.errors import NoGPUError
from kernelgate.hardware import (
    GENERIC_SOURCE,
    SPEC_TABLE,
    DeviceInfo,
    MathMode,
    Peaks,
    cache_path,
    calibrate,
    detect,
    load_calibration,
    match_spec,
    peaks_for,
    save_calibration,
)

TENSOR_AND_CORE_MODES = (MathMode.fp32, MathMode.tf32, MathMode.fp16, MathMode.bf16)


def _info(name: str = "NVIDIA H200", uuid: str | None = "GPU-1234") -> DeviceInfo:
    return DeviceInfo(name=name, uuid=uuid, compute_capability="9.0", sm_count=132)


def _calibrated(name: str = "NVIDIA H200") -> Peaks:
    return Peaks(
        device_name=name,
        bw_gbs=4321.0,
        flops_tflops={MathMode.fp32: 50.0, MathMode.tf32: 400.0, MathMode.bf16: 790.0},
        launch_latency_us=2.5,
        source=f"calibrated on {name} 2026-01-01T00:00:00+00:00",
        kind="calibrated",
    )


@pytest.mark.parametrize(
    ("printed", "key"),
    [
        ("NVIDIA H200", "H200-SXM-141GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
        ("NVIDIA H100 PCIe", "H100-PCIE-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-PCIE-80GB"),
        ("NVIDIA GH200 480GB", "GH200-96GB"),
        ("NVIDIA GH200 144G HBM3e", "GH200-144GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA B200", "B200"),
        ("h200-sxm-141gb", "H200-SXM-141GB"),
    ],
)
def test_match_spec_maps_printed_names(printed: str, key: str) -> None:
    assert match_spec(printed) is SPEC_TABLE[key]


@pytest.mark.parametrize(
    "printed", ["NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-16GB", "NVIDIA L40", "NVIDIA GB200", "", "AMD MI300X"]
)
def test_match_spec_unknown_is_none(printed: str) -> None:
    assert match_spec(printed) is None


def test_every_row_complete_and_cited() -> None:
    assert len(SPEC_TABLE) >= 7
    for key, row in SPEC_TABLE.items():
        assert row.kind == "datasheet", key
        for mode in TENSOR_AND_CORE_MODES:
            assert row.flops_tflops.get(mode, 0) > 0, (key, mode)
        assert "datasheet" in row.source.lower(), key
        assert "dense" in row.source.lower(), key
        assert row.launch_latency_us == 4.0
        assert row.bw_gbs > 500


def test_table_figures() -> None:
    h100, h200, b200 = SPEC_TABLE["H100-SXM5-80GB"], SPEC_TABLE["H200-SXM-141GB"], SPEC_TABLE["B200"]
    assert h200.flops_tflops == h100.flops_tflops
    assert (h100.bw_gbs, h200.bw_gbs, b200.bw_gbs) == (3350, 4800, 8000)
    assert h100.tflops(MathMode.bf16) == pytest.approx(989.4)
    assert SPEC_TABLE["A100-SXM4-40GB"].bw_gbs == 1555 and SPEC_TABLE["A100-SXM4-80GB"].bw_gbs == 2039
    assert SPEC_TABLE["A100-SXM4-80GB"].tflops(MathMode.tf32) == 156
    assert "4900" in SPEC_TABLE["GH200-96GB"].source and SPEC_TABLE["GH200-96GB"].bw_gbs == 4000
    assert SPEC_TABLE["L40S"].tflops(MathMode.fp16) == pytest.approx(362.05)
    assert b200.tflops(MathMode.tf32) == 1100 and b200.tflops(MathMode.fp64) == 40


def test_tflops_fallbacks() -> None:
    only_fp32 = Peaks(device_name="x", bw_gbs=1.0, flops_tflops={MathMode.fp32: 10.0}, source="s", kind="datasheet")
    assert only_fp32.tflops(MathMode.tf32) == 10.0
    assert only_fp32.tflops(MathMode.fp64) == 10.0
    assert only_fp32.tflops("bf16") == 10.0
    halves = Peaks(
        device_name="x", bw_gbs=1.0, flops_tflops={MathMode.fp32: 10.0, MathMode.fp16: 300.0},
        source="s", kind="datasheet",
    )
    assert halves.tflops(MathMode.bf16) == 300.0
    halves2 = halves.model_copy(update={"flops_tflops": {MathMode.fp32: 10.0, MathMode.bf16: 250.0}})
    assert halves2.tflops(MathMode.fp16) == 250.0
    no_fp32 = Peaks(device_name="x", bw_gbs=1.0, flops_tflops={MathMode.bf16: 7.0}, source="s", kind="datasheet")
    assert no_fp32.tflops(MathMode.fp32) == 7.0
    assert SPEC_TABLE["L40S"].tflops(MathMode.fp64) == SPEC_TABLE["L40S"].tflops(MathMode.fp32)


def test_peaks_validation_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Peaks(device_name="x", bw_gbs=0.0, flops_tflops={MathMode.fp32: 1.0}, source="s", kind="datasheet")
    with pytest.raises(ValueError):
        Peaks(device_name="x", bw_gbs=1.0, flops_tflops={}, source="s", kind="datasheet")
    with pytest.raises(ValueError):
        Peaks(device_name="x", bw_gbs=1.0, flops_tflops={MathMode.fp32: 1.0}, source="s", kind="guess")


def test_math_mode_values() -> None:
    assert [m.value for m in MathMode] == ["fp32", "tf32", "fp16", "bf16", "fp64"]
    assert MathMode("bf16") is MathMode.bf16 and MathMode.fp16 == "fp16"


def test_models_document_every_field() -> None:
    for model in (DeviceInfo, Peaks):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"


def test_detect_is_none_without_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert detect() is None
    assert detect(3) is None


def test_calibrate_raises_without_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(NoGPUError):
        calibrate()


def test_cache_path_env_and_sanitizing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path))
    path = cache_path(_info("NVIDIA A100-SXM4-80GB / weird:name"))
    assert path.parent == tmp_path
    assert path.name == "calibration-NVIDIA-A100-SXM4-80GB-weird-name.json"
    assert cache_path(_info("???", uuid="GPU-ab12")).name == "calibration-GPU-ab12.json"
    monkeypatch.delenv("KERNELGATE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_path(_info()) == tmp_path / "home" / ".cache" / "kernelgate" / "calibration-NVIDIA-H200.json"


def test_save_load_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path / "cache"))
    info, peaks = _info(), _calibrated()
    assert load_calibration(info) is None
    path = save_calibration(peaks, info)
    assert path.exists() and path.parent == tmp_path / "cache"
    assert json.loads(path.read_text())["flops_tflops"]["bf16"] == 790.0
    loaded = load_calibration(info)
    assert loaded == peaks
    assert loaded.tflops(MathMode.fp16) == 790.0
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_save_refuses_datasheet_rows(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path))
    with pytest.raises(ValueError):
        save_calibration(SPEC_TABLE["B200"], _info("NVIDIA B200"))


def test_load_ignores_corrupt_cache(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path))
    info = _info()
    cache_path(info).write_text("{not json")
    with caplog.at_level(logging.WARNING, logger=hardware.__name__):
        assert load_calibration(info) is None
    assert "invalid calibration cache" in caplog.text


def test_peaks_for_prefers_calibrated_then_datasheet(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path))
    info = _info()
    datasheet = peaks_for(info)
    assert datasheet.kind == "datasheet" and datasheet == SPEC_TABLE["H200-SXM-141GB"]
    assert datasheet is not SPEC_TABLE["H200-SXM-141GB"]  # callers cannot mutate the table
    save_calibration(_calibrated(), info)
    chosen = peaks_for(info)
    assert chosen.kind == "calibrated" and chosen.bw_gbs == 4321.0
    assert peaks_for(info, prefer_calibrated=False).kind == "datasheet"


def test_peaks_for_unknown_device_is_generic(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path))
    info = _info("Mystery Accelerator 9000", uuid=None)
    with caplog.at_level(logging.WARNING, logger=hardware.__name__):
        generic = peaks_for(info)
    assert generic.source.startswith(GENERIC_SOURCE)
    assert generic.device_name == "Mystery Accelerator 9000"
    assert all(generic.tflops(m) > 0 for m in MathMode) and generic.bw_gbs > 0
    assert "generic guess" in caplog.text
    save_calibration(_calibrated("Mystery Accelerator 9000"), info)
    assert peaks_for(info).kind == "calibrated"


@pytest.mark.gpu
def test_calibrate_on_real_gpu(tmp_path, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path))
    info = detect()
    assert info is not None and info.sm_count and info.memory_total_bytes
    flag = torch.backends.cuda.matmul.allow_tf32
    peaks = calibrate(size_bytes=1 << 30, gemm_n=4096)
    assert torch.backends.cuda.matmul.allow_tf32 == flag
    assert peaks.kind == "calibrated" and peaks.source.startswith(f"calibrated on {info.name} ")
    assert 1000 < peaks.bw_gbs < 10000
    assert peaks.tflops(MathMode.bf16) > peaks.tflops(MathMode.fp32)
    assert all(m in peaks.flops_tflops for m in TENSOR_AND_CORE_MODES)
    assert 0 < peaks.launch_latency_us < 100
    save_calibration(peaks, info)
    assert peaks_for(info) == peaks


def test_a_processs_gpu_memory_is_unknown_without_a_driver():
    """process_gpu_bytes asks NVML; on a machine without an NVIDIA driver it says None, never raises."""
    import os

    import torch

    from kernelgate.hardware import process_gpu_bytes

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the driver answers")
    assert process_gpu_bytes(os.getpid()) is None
