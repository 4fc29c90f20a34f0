"""kernelgate.compile_cache: keys (stable, order-free, sensitive to every part), JSON entries (miss,
put, hit, counters, atomic replacement, unreadable entries are misses), build directories, the
default root and activation, all in temporary folders. The cache has no size limit to test: it
holds whatever is put in it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from kernelgate import compile_cache
from kernelgate.compile_cache import CompileCache, activate, active, default_root


@pytest.fixture(autouse=True)
def no_active_cache_leaks(monkeypatch):
    """activate() sets a module global and two environment variables: restore all three afterwards
    (conftest restores the environment)."""
    monkeypatch.setattr(compile_cache, "_ACTIVE", compile_cache._ACTIVE)


# ------------------------------------------------------------------ keys

def test_key_is_a_stable_sha256_of_the_parts_in_any_order():
    k = CompileCache.key(kind="nvcc", code="__global__ void k() {}", arch="sm_90", versions={"nvcc": "12.8"})
    assert len(k) == 64 and int(k, 16) >= 0
    assert k == CompileCache.key(versions={"nvcc": "12.8"}, arch="sm_90", code="__global__ void k() {}", kind="nvcc")
    blob = json.dumps({"v": 1, "arch": "sm_90", "code": "__global__ void k() {}", "kind": "nvcc",
                       "versions": {"nvcc": "12.8"}}, sort_keys=True)
    assert k == hashlib.sha256(blob.encode()).hexdigest()  # the entry layout version is part of every key


def test_key_changes_with_every_part():
    base = {"kind": "nvcc", "code": "a", "options": ["-O3"], "arch": "sm_90"}
    k = CompileCache.key(**base)
    for change in ({"code": "b"}, {"options": ["-O2"]}, {"arch": "sm_100"}, {"kind": "cuda-ext"}, {"extra": None}):
        assert CompileCache.key(**{**base, **change}) != k, change
    assert CompileCache.key(**{**base, "options": ["-O3", "-g"]}) != CompileCache.key(**{**base, "options": ["-g", "-O3"]})


def test_key_takes_non_json_parts_by_their_str():
    assert CompileCache.key(path=Path("/x/y")) == CompileCache.key(path="/x/y")


# ------------------------------------------------------------------ entries

def test_miss_put_hit_and_the_counters(tmp_path):
    cache = CompileCache(tmp_path / "cc")
    k = CompileCache.key(code="x")
    assert cache.get(k) is None and (cache.hits, cache.misses) == (0, 1)
    cache.put(k, {"ptx": ".version 8.0", "registers": 32})
    assert cache.get(k) == {"ptx": ".version 8.0", "registers": 32}
    assert (cache.hits, cache.misses) == (1, 1)
    path = tmp_path / "cc" / "entries" / k[:2] / f"{k}.json"
    assert path.is_file() and [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left
    other = CompileCache.key(code="y")
    assert cache.get(other) is None and (cache.hits, cache.misses) == (1, 2)


def test_entries_persist_across_instances_and_are_replaced_whole(tmp_path):
    k = CompileCache.key(code="x")
    CompileCache(tmp_path).put(k, {"a": 1, "b": 2})
    fresh = CompileCache(tmp_path)
    assert fresh.get(k) == {"a": 1, "b": 2} and fresh.hits == 1
    fresh.put(k, {"a": 3})
    assert CompileCache(tmp_path).get(k) == {"a": 3}


def test_an_unreadable_entry_is_a_miss(tmp_path):
    cache = CompileCache(tmp_path)
    k = CompileCache.key(code="x")
    cache.put(k, {"a": 1})
    (tmp_path / "entries" / k[:2] / f"{k}.json").write_text('{"a": 1')  # truncated by a crash
    assert cache.get(k) is None and (cache.hits, cache.misses) == (0, 1)
    cache.put(k, {"a": 2})  # the next compile repairs it
    assert cache.get(k) == {"a": 2}


def test_build_directories_belong_to_one_key(tmp_path):
    cache = CompileCache(tmp_path)
    k1, k2 = CompileCache.key(code="1"), CompileCache.key(code="2")
    d1 = cache.directory("cuda_ext", k1)
    assert d1 == tmp_path / "cuda_ext" / k1[:32] and d1.is_dir()
    (d1 / "ext.so").write_bytes(b"\x7fELF")
    assert cache.directory("cuda_ext", k1) == d1 and (d1 / "ext.so").exists()  # idempotent, keeps its files
    assert cache.directory("cuda_ext", k2) != d1
    assert cache.directory("other", k1) != d1


# ------------------------------------------------------------------ root and activation

def test_default_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", str(tmp_path / "kg"))
    assert default_root() == tmp_path / "kg" / "compile"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELGATE_CACHE_DIR", "~/cachedir")
    assert default_root() == tmp_path / "home" / "cachedir" / "compile"
    monkeypatch.delenv("KERNELGATE_CACHE_DIR")
    assert default_root() == tmp_path / "home" / ".cache" / "kernelgate" / "compile"


def test_activate_points_the_compilers_caches_under_the_root(tmp_path):
    root = tmp_path / "root"
    cache = activate(root)
    assert isinstance(cache, CompileCache) and active() is cache and root.is_dir()
    assert os.environ["TRITON_CACHE_DIR"] == str(root / "triton")
    assert os.environ["TILELANG_CACHE_DIR"] == str(root / "tilelang")
    k = CompileCache.key(code="x")
    active().put(k, {"a": 1})
    assert CompileCache(root).get(k) == {"a": 1}
    assert activate(None) is None and active() is None


def test_activate_none_restores_the_compilers_cache_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/users/own/triton")
    monkeypatch.delenv("TILELANG_CACHE_DIR", raising=False)
    activate(tmp_path / "a")
    activate(tmp_path / "b")
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "b" / "triton")
    activate(None)
    assert os.environ["TRITON_CACHE_DIR"] == "/users/own/triton"
    assert "TILELANG_CACHE_DIR" not in os.environ
