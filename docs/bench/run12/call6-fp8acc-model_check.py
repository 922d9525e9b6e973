"""On the GPU machine (torch with CUDA; run from the worktree root):

    python3 .devrun/fp8acc/model_check.py [.devrun/fp8acc/e4m3]

Runs the promoted 4096^3 e4m3 kernel (mmaflow_sm_90a_4096.vmfb) -- and, where present, its
two-tiles-per-iteration variant (mmaflow-pairs_..., same arithmetic) and the same kernel without
promotion (mmaflow-nopromo_...: the first H200 run's arithmetic, checks the model itself) -- on bench._inputs(4096, "f8E4M3FN")
through mmaflow.runtime.iree_runner.CompiledModule, and reports for the first 128 rows (524288
outputs) the fraction bit-identical to the executor's model of that kernel's arithmetic
(runtime/isa/wgmma.fp8_accumulate per 32-k wgmma, partial per 128-k K tile promoted with an f32
add; numerics.fp8_tensor_core_reference), evaluated here in torch float64 on the GPU; also
exact f32 (float64 rounded once) for comparison, the error against exact, and the f32 bound.
Writes model_check.json next to the modules. About a minute."""
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from mmaflow.runtime.bench import _inputs
from mmaflow.runtime.iree_runner import CompiledModule
from mmaflow.runtime.isa.wgmma import FP8_ACCUMULATOR_BITS, FP8_CHUNK

ROWS, SIZE, K_TILE = 128, 4096, 128
d = Path(sys.argv[1] if len(sys.argv) > 1 else ".devrun/fp8acc/e4m3")
t0 = time.time()
a, b = _inputs(SIZE, "f8E4M3FN")  # a: M x K, b: N x K (the module's B^T form)
dev = torch.device("cuda")
A = torch.from_numpy(a[:ROWS].astype(np.float64)).to(dev)  # (128, K)
B = torch.from_numpy(b.astype(np.float64)).to(dev)  # (N, K)


def accumulate(acc, prods):
    """fp8_accumulate in torch float64: acc (R, N), prods (R, N, 32)."""
    top = torch.maximum(acc.abs(), prods.abs().amax(-1))
    _, e = torch.frexp(top)
    q = torch.ldexp(torch.ones_like(top), (e - FP8_ACCUMULATOR_BITS).to(torch.float64))
    return torch.trunc(acc / q) * q + (torch.trunc(prods / q[..., None]) * q[..., None]).sum(-1)


def model(promote: bool):
    acc = torch.zeros(ROWS, SIZE, dtype=torch.float32, device=dev)
    part = torch.zeros(ROWS, SIZE, dtype=torch.float64, device=dev)
    for k0 in range(0, SIZE, FP8_CHUNK):
        prods = A[:, None, k0:k0 + FP8_CHUNK] * B[None, :, k0:k0 + FP8_CHUNK]
        part = accumulate(part, prods).float().double()
        if promote and (k0 + FP8_CHUNK) % K_TILE == 0:
            acc = acc + part.float()
            part = torch.zeros_like(part)
    return acc if promote else part.float()


exact = A @ B.T
bound = SIZE * 2.0 ** -24 * (A.abs() @ B.abs().T) + 2.0 ** -24 * exact.abs()
report = {"rows": ROWS, "size": SIZE, "device": torch.cuda.get_device_name()}
for name, promote in (("mmaflow", True), ("mmaflow-pairs", True), ("mmaflow-nopromo", False)):
    f = d / f"{name}_sm_90a_{SIZE}.vmfb"
    if not f.exists():
        print(f"{name}: {f} not found, skipped")
        continue
    out = CompiledModule(f.read_bytes(), "cuda")("matmul", a, b)[:ROWS]
    got = torch.from_numpy(np.ascontiguousarray(out)).to(dev)
    pred = model(promote)
    other = model(not promote)
    err = (got.double() - exact)
    r = {
        "promoted_kernel": promote,
        "bit_identical_to_its_model": float((got == pred).double().mean()),
        "bit_identical_to_the_other_model": float((got == other).double().mean()),
        "bit_identical_to_exact_f32": float((got == exact.float()).double().mean()),
        "max_abs_diff_vs_its_model": float((got.double() - pred.double()).abs().max()),
        "mean_abs_diff_vs_its_model": float((got.double() - pred.double()).abs().mean()),
        "max_abs_err_vs_exact": float(err.abs().max()),
        "mean_abs_err_vs_exact": float(err.abs().mean()),
        "mean_err_vs_exact": float(err.mean()),
        "model_max_abs_err_vs_exact": float((pred.double() - exact).abs().max()),
        "outside_f32_bound": int((err.abs() > bound).sum()),
        "max_err_over_bound": float((err.abs() / bound).max()),
    }
    report[name] = r
    print(name, json.dumps(r, indent=1), flush=True)
report["seconds"] = round(time.time() - t0, 1)
(d / "model_check.json").write_text(json.dumps(report, indent=1))
print(f"written {d / 'model_check.json'} ({report['seconds']} s)")
