"""Tests for kernelgate.roofline against hand computations."""

from __future__ import annotations

import math

import pytest

from kernelgate import roofline
from kernelgate.hardware import SPEC_TABLE, MathMode, Peaks

H200 = SPEC_TABLE["H200-SXM-141GB"]  # 4800 GB/s, fp32 67, tf32 494.7, fp16/bf16 989.4 TFLOP/s, 4 us launch

# round figures, so the hand computations are obvious
ROUND = Peaks(device_name="round", bw_gbs=1000.0, launch_latency_us=5.0, source="test", kind="datasheet",
              flops_tflops={MathMode.fp32: 10.0, MathMode.tf32: 100.0, MathMode.fp16: 200.0})


# --- memory-bound ----------------------------------------------------------------------------


def test_memory_bound_round_numbers():
    # 1 GB at 1000 GB/s = 1 ms; 1 GFLOP at 10 TFLOP/s = 0.1 ms; launch 0.005 ms
    flops, nbytes = 1e9, 1e9
    assert roofline.t_floor_ms(flops, nbytes, ROUND, MathMode.fp32) == pytest.approx(1.0)
    assert roofline.bound(flops, nbytes, ROUND, MathMode.fp32) == "memory"


def test_memory_bound_layernorm_on_h200():
    rows = cols = 4096
    flops = 5.0 * rows * cols
    nbytes = (2.0 * rows * cols + 2.0 * cols) * 4
    hand_memory_ms = nbytes / 4800e9 * 1e3          # 0.027969 ms
    hand_compute_ms = flops / 67e12 * 1e3            # 0.00125 ms
    assert hand_memory_ms > hand_compute_ms and hand_memory_ms > 0.004
    floor = roofline.t_floor_ms(flops, nbytes, H200, MathMode.fp32)
    assert floor == pytest.approx(hand_memory_ms, rel=1e-12)
    assert floor == pytest.approx(0.0279688533, rel=1e-6)
    assert roofline.bound(flops, nbytes, H200, MathMode.fp32) == "memory"
    # a candidate taking 0.05 ms uses 56% of it
    assert roofline.utilization(floor, 0.05) == pytest.approx(hand_memory_ms / 0.05)


# --- compute-bound ---------------------------------------------------------------------------


def test_compute_bound_round_numbers_per_mode():
    flops, nbytes = 1e12, 1e6  # 1 TFLOP, 1 MB (0.001 ms)
    assert roofline.t_floor_ms(flops, nbytes, ROUND, MathMode.fp32) == pytest.approx(100.0)
    assert roofline.t_floor_ms(flops, nbytes, ROUND, MathMode.tf32) == pytest.approx(10.0)
    assert roofline.t_floor_ms(flops, nbytes, ROUND, MathMode.fp16) == pytest.approx(5.0)
    # no bf16 figure: falls back to fp16
    assert roofline.t_floor_ms(flops, nbytes, ROUND, MathMode.bf16) == pytest.approx(5.0)
    # no fp64 figure: falls back to fp32
    assert roofline.t_floor_ms(flops, nbytes, ROUND, MathMode.fp64) == pytest.approx(100.0)
    for mode in MathMode:
        assert roofline.bound(flops, nbytes, ROUND, mode) == "compute"


def test_compute_bound_fp16_matmul_on_h200():
    m = n = k = 4096
    flops = 2.0 * m * n * k
    nbytes = (m * k + k * n + m * n) * 2.0
    hand_ms = flops / 989.4e12 * 1e3  # 0.1389114 ms
    assert nbytes / 4800e9 * 1e3 < hand_ms
    assert roofline.t_floor_ms(flops, nbytes, H200, MathMode.fp16) == pytest.approx(hand_ms, rel=1e-12)
    assert roofline.t_floor_ms(flops, nbytes, H200, "fp16") == pytest.approx(0.1389114, rel=1e-6)
    assert roofline.bound(flops, nbytes, H200, MathMode.fp16) == "compute"


def test_fp32_matmul_physics_floor_uses_tf32():
    m = n = k = 4096
    flops = 2.0 * m * n * k
    nbytes = (m * k + k * n + m * n) * 4.0
    fp32 = roofline.t_floor_ms(flops, nbytes, H200, MathMode.fp32)
    tf32 = roofline.t_floor_ms(flops, nbytes, H200, MathMode.tf32)
    assert fp32 == pytest.approx(flops / 67e12 * 1e3)
    assert tf32 == pytest.approx(flops / 494.7e12 * 1e3)
    assert fp32 / tf32 == pytest.approx(494.7 / 67)


def test_bound_switches_at_ridge_point():
    # ridge of ROUND in fp32: 10e12 / 1000e9 = 10 flop/byte
    nbytes = 1e9
    assert roofline.bound(9.0 * nbytes, nbytes, ROUND, MathMode.fp32) == "memory"
    assert roofline.bound(11.0 * nbytes, nbytes, ROUND, MathMode.fp32) == "compute"


# --- launch-bound ----------------------------------------------------------------------------


def test_launch_bound_tiny_problem():
    flops, nbytes = 1024.0, 8192.0
    assert roofline.t_floor_ms(flops, nbytes, ROUND, MathMode.fp32) == pytest.approx(0.005)
    assert roofline.bound(flops, nbytes, ROUND, MathMode.fp32) == "launch"
    assert roofline.t_floor_ms(flops, nbytes, H200, MathMode.fp32) == pytest.approx(0.004)
    assert roofline.bound(flops, nbytes, H200, MathMode.fp32) == "launch"


def test_zero_work_floor_is_the_launch():
    assert roofline.t_floor_ms(0.0, 0.0, ROUND, MathMode.fp32) == pytest.approx(0.005)
    assert roofline.bound(0.0, 0.0, ROUND, MathMode.fp32) == "launch"


def test_launch_latency_zero_gives_pure_roofline():
    peaks = ROUND.model_copy(update={"launch_latency_us": 0.0})
    assert roofline.t_floor_ms(1e3, 1e3, peaks, MathMode.fp32) == pytest.approx(1e3 / 1000e9 * 1e3)
    assert roofline.bound(1e3, 1e3, peaks, MathMode.fp32) == "memory"


# --- U and LRE -------------------------------------------------------------------------------


def test_utilization():
    assert roofline.utilization(0.5, 2.0) == pytest.approx(0.25)
    assert roofline.utilization(1.0, 1.0) == pytest.approx(1.0)
    assert roofline.utilization(2.0, 1.0) == pytest.approx(2.0)  # impossible, but the formula says so
    assert math.isinf(roofline.utilization(1.0, 0.0))


def test_lre():
    assert roofline.lre(2.0, 1.0) == pytest.approx(2.0)   # twice as fast as the library
    assert roofline.lre(1.0, 4.0) == pytest.approx(0.25)  # four times slower
    assert roofline.lre(0.3, 0.3) == pytest.approx(1.0)
