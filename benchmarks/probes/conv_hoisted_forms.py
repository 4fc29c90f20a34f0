"""Run conv2d_hoisted's kernel in its variants on the GPU: which crash, which are right, how fast (investigation).

GPU only; one config per process (a crash poisons the CUDA context): module attributes as NAME=VALUE
arguments. Results of the H200 run: benchmarks/results/conv_probes_h200.json, hoisted_forms.
"""
import importlib.util, os, sys, time, traceback, torch, torch.nn.functional as F
variant = sys.argv[1:]
spec = importlib.util.spec_from_file_location("cand", "examples/tilelang/conv2d_hoisted.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
for kv in variant:
    k, v = kv.split("=")
    setattr(mod, k, int(v) if v.isdigit() else v)
N, C, H, W, Fo = 8, 64, 256, 512, 128
x = torch.randn(N, C, H, W, device="cuda", dtype=torch.float16)
w = torch.randn(Fo, C, 3, 3, device="cuda", dtype=torch.float16) * 0.05
ref = F.conv2d(x, w)
m = mod.ModelNew()
try:
    t0 = time.time(); y = m(x, w); torch.cuda.synchronize()
    err = (y.float() - ref.float()).abs().max().item()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ts = []
    for fn in (lambda: m(x, w), lambda: F.conv2d(x, w)):
        for _ in range(5): fn()
        torch.cuda.synchronize(); ev[0].record()
        for _ in range(20): fn()
        ev[1].record(); torch.cuda.synchronize(); ts.append(ev[0].elapsed_time(ev[1]) / 20)
    print(f"{variant}: max err {err:.3g}, candidate {ts[0]:.4f} ms, cudnn {ts[1]:.4f} ms, compile+first {time.time()-t0:.1f} s")
except Exception as exc:
    print(f"{variant}: FAILED {type(exc).__name__}: {str(exc)[:300]}")
    src = getattr(m, "_kernels", {})
    for k, kern in src.items():
        try:
            open(os.environ["OUT"] + f"/hoisted_{'_'.join(variant) or 'default'}.cu", "w").write(kern.get_kernel_source())
        except Exception as e2:
            print("no source", e2)
