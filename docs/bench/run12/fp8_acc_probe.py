"""What does the H200's fp8 wgmma accumulation keep? Run the fp8 kernel without promotion (the
FAILing build of device call 2) and compare its f32 output against numpy/torch models of the
accumulator: exact products, summed per chunk of C consecutive k, added to the accumulator and
then cut to F fraction bits (toward zero or to nearest)."""
import sys, numpy as np, torch
from mmaflow.runtime.bench import _inputs
from mmaflow.runtime.iree_runner import CompiledModule

n = 4096
a, b = _inputs(n, "f8E4M3FN")  # b: N x K
mod = CompiledModule(open(sys.argv[1], "rb").read(), "cuda")
out = torch.tensor(np.asarray(mod("matmul", a, b), np.float64)).cuda()
A = torch.tensor(a.astype(np.float64)).cuda(); B = torch.tensor(b.astype(np.float64)).cuda()
rows = slice(0, 1024)  # a quarter of the rows is plenty
A, out = A[rows], out[rows]
exact = A @ B.T
print("kernel vs exact: max |d|", (out - exact).abs().max().item(), " mean d", (out - exact).mean().item(),
      " mean |d|", (out - exact).abs().mean().item())

def cut(x, bits, mode):
    m, e = torch.frexp(x)
    s = 2.0 ** (bits + 1)
    y = m * s
    y = torch.trunc(y) if mode == "rz" else torch.round(y)
    return torch.ldexp(y / s, e)

for chunk in (32, 16, 64, 128):
    parts = [A[:, k:k + chunk] @ B[:, k:k + chunk].T for k in range(0, n, chunk)]
    for bits in (12, 13, 14, 15, 23):
        for mode in ("rz", "rn"):
            d = torch.zeros_like(exact)
            for p in parts:
                d = cut(d + p, bits, mode)
            eq = (d == out).double().mean().item()
            print(f"chunk {chunk:3d} bits {bits:2d} {mode}: equal {eq*100:7.3f}%  max|model-kernel| {(d-out).abs().max().item():.3e}")
    del parts
