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


def cutq(x, q, mode):
    f = {"rz": torch.trunc, "rd": torch.floor, "rn": torch.round}[mode]
    return f(x / q) * q

def run(chunk, F, pmode, amode, emode, recut):
    d = torch.zeros_like(exact)
    for k in range(0, n, chunk):
        P = A[:, None, k:k + chunk] * B[None, :, k:k + chunk]
        pm = P.abs().amax(-1)
        mx = pm if emode == "products" else torch.maximum(pm, d.abs())
        _, E = torch.frexp(mx)
        q = torch.ldexp(torch.ones_like(mx), E - F)
        d = cutq(d, q, amode) + cutq(P, q[..., None], pmode).sum(-1)
        if recut:
            _, E2 = torch.frexp(d.abs())
            d = cutq(d, torch.ldexp(torch.ones_like(d), E2 - recut), "rz")
        d = d.float().double()
    return d

variants = []
for F in (14, 15):
    for pmode in ("rz",):
        for amode in ("rz", "rn", "rd"):
            for emode in ("both", "products"):
                for recut in (0, 23, 24):
                    variants.append((32, F, pmode, amode, emode, recut))
variants += [(32, 14, "rn", "rz", "both", 0), (32, 13, "rz", "rz", "both", 0)]
for v in variants:
    d = run(*v)
    eq = (d == out).double().mean().item()
    if eq > 0.5:
        print(f"{v}: equal {eq*100:7.3f}%  max|model-kernel| {(d-out).abs().max().item():.3e}  mean {(d-out).abs().mean().item():.3e}", flush=True)
