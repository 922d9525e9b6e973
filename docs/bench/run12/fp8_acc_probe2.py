"""Alignment model of the fp8 wgmma accumulator: per instruction chunk of C products, every
addend (the accumulator and the C exact products) is cut to a multiple of 2^(E - F), E the
largest exponent among them (frexp convention), then summed exactly (and rounded to f32)."""
import sys, numpy as np, torch
from mmaflow.runtime.bench import _inputs
from mmaflow.runtime.iree_runner import CompiledModule

n = 4096
a, b = _inputs(n, "f8E4M3FN")  # b: N x K
mod = CompiledModule(open(sys.argv[1], "rb").read(), "cuda")
out = torch.tensor(np.asarray(mod("matmul", a, b), np.float64)).cuda()
R = 128
A = torch.tensor(a.astype(np.float64)).cuda()[:R]; B = torch.tensor(b.astype(np.float64)).cuda()
out = out[:R]
exact = A @ B.T
print("kernel vs exact: max |d|", (out - exact).abs().max().item(), " mean d", (out - exact).mean().item(),
      " mean |d|", (out - exact).abs().mean().item(), flush=True)

def run(chunk, F, mode, acc_cut, f32):
    d = torch.zeros_like(exact)
    for k in range(0, n, chunk):
        P = A[:, None, k:k + chunk] * B[None, :, k:k + chunk]          # R x N x C, exact
        mx = torch.maximum(P.abs().amax(-1), d.abs())
        _, E = torch.frexp(mx)                                          # mx < 2^E
        q = torch.ldexp(torch.ones_like(mx), E - F)[..., None]          # grain 2^(E-F)
        cutf = torch.trunc if mode == "rz" else torch.floor
        Pc = cutf(P / q) * q
        dc = cutf(d / q[..., 0]) * q[..., 0] if acc_cut else d
        d = dc + Pc.sum(-1)
        if f32:
            d = d.float().double()
    return d

for chunk in (32, 16):
    for F in (13, 14, 15, 16, 17, 18, 20, 22, 24, 25, 26):
        for mode in ("rz", "rd"):
            for acc_cut in (False, True):
                d = run(chunk, F, mode, acc_cut, True)
                eq = (d == out).double().mean().item()
                if eq > 0.02 or (F in (13, 24) and not acc_cut):
                    print(f"chunk {chunk} F {F} {mode} acc_cut {acc_cut}: equal {eq*100:7.3f}%  "
                          f"max|model-kernel| {(d-out).abs().max().item():.3e}  mean|model-kernel| {(d-out).abs().mean().item():.3e}", flush=True)
