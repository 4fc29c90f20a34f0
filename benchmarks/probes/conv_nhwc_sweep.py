"""conv2d_nhwc_im2col's tile configs on the GPU, and how much of its time the NHWC copy takes (investigation).

GPU only; one config per process (a crash poisons the CUDA context): module attributes as NAME=VALUE
arguments. Results of the H200 run: benchmarks/results/conv_probes_h200.json, rows.
"""
import importlib.util, json, os, statistics, sys, torch, torch.nn.functional as F
spec = importlib.util.spec_from_file_location("cand", "examples/tilelang/conv2d_nhwc_im2col.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
cfg = dict(kv.split("=") for kv in sys.argv[1:])
for k, v in cfg.items():
    setattr(mod, k, int(v))
N, C, H, W, Fo = 8, 64, 256, 512, 128
x = torch.randn(N, C, H, W, device="cuda", dtype=torch.float16)
w = torch.randn(Fo, C, 3, 3, device="cuda", dtype=torch.float16) * 0.05
ref = F.conv2d(x, w)

def t(fn, reps=20, groups=7):
    for _ in range(5): fn()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    out = []
    for _ in range(groups):
        torch.cuda.synchronize(); ev[0].record()
        for _ in range(reps): fn()
        ev[1].record(); torch.cuda.synchronize(); out.append(ev[0].elapsed_time(ev[1]) / reps)
    return statistics.median(out)

m = mod.ModelNew()
try:
    y = m(x, w); torch.cuda.synchronize()
    err = (y.float() - ref.float()).abs().max().item()
    row = {"config": cfg, "max_err": err, "candidate_ms": t(lambda: m(x, w)), "cudnn_ms": t(lambda: F.conv2d(x, w))}
    if not cfg:
        xn = x.permute(0, 2, 3, 1).contiguous()
        w2 = w.permute(0, 2, 3, 1).contiguous().view(Fo, -1)
        kern = next(iter(m._kernels.values()))
        row["permute_ms"] = t(lambda: x.permute(0, 2, 3, 1).contiguous())
        row["kernel_only_ms"] = t(lambda: kern(xn, w2))
except Exception as exc:
    row = {"config": cfg, "failed": f"{type(exc).__name__}: {str(exc)[:200]}"}
print(json.dumps(row))
