"""`mmaflow bench --weight-only`: mmaflow's weight-only decode kernel (4-bit weights, per-group
scale and zero point, ``compiler/kernels/decode/weight_only.py``) against IREE default's build of
the same module, mmaflow's and torch's f16-weight matmuls of the same shape, and torch's own int4
weight-only kernel, on a GPU. The halves of `mmaflow bench` (``runtime/bench.py`` hands a manifest of
kind "weight_only" to this module):

    prepare  for every M and shape (``SHAPES``): ``modules.weight_only_module`` (activations M x K f16, weights N x K as
             bytes of two u4 each, bitcast to i4, groups of 128 along K with an f16 scale and zero
             point: ``(w - zero) * scale``, f32 out) compiled with mmaflow (its dispatch must be
             taken: the prepare fails otherwise) and with IREE's default pipeline, and the f16
             matmul of the same shape (weights N x K f16, ``nn.Linear``'s) with mmaflow
    run      seeded random inputs; every module and torch (``F.linear`` on the dequantized f16
             weights; ``torch._weight_int4pack_mm``, bf16 as it requires, where the GPU's torch has
             it) checked against the float64 product of the dequantized weights, then timed;
             ``--kernel-time`` adds Nsight Compute's kernel-only time. ``GB/s``: the bytes of the
             weights and their parameters over the time.

    mmaflow bench --weight-only --target sm_90a --sizes 1,16,32 --prepare-only DIR
    python -m mmaflow.runtime.bench --from-dir DIR --driver cuda --out OUT --kernel-time

The run half imports no IREE compiler code (only iree.runtime, numpy, optionally torch).
"""

from __future__ import annotations

import json
import statistics
import time
import zlib
from pathlib import Path

import numpy as np

from mmaflow.runtime import bench_common
from mmaflow.runtime.modules import matmul_module, weight_only_module

GROUP = 128
DEFAULT_MS = "1,16,32"
# (N, K): a 4096 x 4096 projection (its 8.9 MB of int4 stay in the GPU's L2 between calls, as every
# decode figure's weights up to ~32 MB do), Llama-3-8B's gate (29 MB int4; 117 MB as f16), and its
# LM head (262 MB int4: HBM-bound, the bandwidth figure)
SHAPES = ((4096, 4096), (14336, 4096), (128256, 4096))
FUNCTION = "weight_only"
IREE_DEFAULT = "iree-default"
TORCH_F16 = "torch"  # bench_common.TORCH: F.linear on f16 weights
TORCH_INT4 = "torch-int4"


def cases(ms: list[int], shapes=SHAPES, *, group: int = GROUP) -> list[dict]:
    return [{"key": f"m{m}_n{n}_k{k}_g{group}", "m": m, "n": n, "k": k, "group": group} for n, k in shapes for m in ms]


def weight_bytes(case: dict) -> int:
    """What the int4 kernel must read: the packed weights and the f16 scale and zero per group."""
    n, k = case["n"], case["k"]
    return n * k // 2 + 2 * 2 * n * (k // case["group"])


# ---- prepare (needs the compiler) -------------------------------------------------------------


def prepare(target: str, ms: list[int], out_dir: Path, shapes=SHAPES) -> dict:
    from iree.compiler import compile_str

    from mmaflow.compiler.core.errors import VerificationError
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.target.targets import get_target

    t = get_target(target)
    flags, base_target = bench_common.iree_default(t)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = []
    for case in cases(ms, shapes):
        m, n, k, g = case["m"], case["n"], case["k"], case["group"]
        src = weight_only_module(m, n, k, g)
        name = f"mmaflow_{t.name}_{case['key']}"
        res = compile_module(src, t.name, source_name=f"{name}.mlir", require_matmul=False)
        if not [e for e in res.taken if e.facts.is_weight_only]:
            raise VerificationError(
                f"{name}: mmaflow did not take the weight-only dispatch; the benchmark would time IREE's "
                "kernel as mmaflow's:\n  " + "\n  ".join(res.log)
            )
        (out_dir / f"{name}.vmfb").write_bytes(res.vmfb)
        entries = [
            {
                "variant": f"mmaflow {t.name}",
                "file": f"{name}.vmfb",
                "target": t.name,
                "inputs": "int4",
                "config": bench_common.config_line(res.log),
            }
        ]
        iree = f"iree_{base_target}_{case['key']}"
        (out_dir / f"{iree}.vmfb").write_bytes(compile_str(src, extra_args=flags))
        entries.append(
            {
                "variant": IREE_DEFAULT,
                "file": f"{iree}.vmfb",
                "target": base_target,
                "inputs": "int4",
                "config": "IREE default pipeline",
            }
        )
        f16 = f"mmaflow_{t.name}_f16_{case['key']}"
        res = compile_module(matmul_module(m, n, k, "f16", "f32", transpose_b=True), t.name, source_name=f"{f16}.mlir")
        (out_dir / f"{f16}.vmfb").write_bytes(res.vmfb)
        entries.append(
            {
                "variant": "mmaflow f16 weights",
                "file": f"{f16}.vmfb",
                "target": t.name,
                "inputs": "f16",
                "config": bench_common.config_line(res.log),
            }
        )
        prepared.append({**case, "entries": entries})
        print(f"bench: weight-only {case['key']}: {', '.join(e['file'] for e in entries)}", flush=True)
    manifest = {
        "kind": "weight_only",
        "targets": [t.name],
        "driver": t.iree_device,
        "cases": prepared,
        "prepared": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out_dir / bench_common.MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


# ---- run (iree.runtime, numpy, optional torch) ------------------------------------------------


def inputs(case: dict) -> dict:
    """Seeded inputs: activations N(0, 1) in f16, u4 weights, scales in [0.01, 0.03), zero points
    0..15 (f16), and the float64 dequantized weights (each op rounded to f16, as the dispatch does)."""
    m, n, k, g = case["m"], case["n"], case["k"], case["group"]
    rng = np.random.default_rng(zlib.crc32(case["key"].encode()))
    q = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8).reshape(n, k // g, g // 2)
    x = rng.standard_normal((m, k), dtype=np.float32).astype(np.float16)
    s = (0.01 + 0.02 * rng.random((n, k // g))).astype(np.float16)
    z = rng.integers(0, 16, size=(n, k // g)).astype(np.float16)
    deq = ((q.astype(np.float16) - np.repeat(z, g, axis=1)) * np.repeat(s, g, axis=1)).astype(np.float16)
    return {"x": x, "packed": packed.view(np.int8), "s": s, "z": z, "q": q, "deq": deq}


def reference(inp: dict) -> tuple[np.ndarray, np.ndarray]:
    """The float64 product and an error bound for f32 accumulation of K products (K * 2^-24 of the
    sum of |products|, doubled) plus f16 output rounding where the output is f16."""
    x, w = inp["x"].astype(np.float64), inp["deq"].astype(np.float64)
    ref = x @ w.T
    absum = np.abs(x) @ np.abs(w).T
    return ref, 2 * x.shape[1] * 2.0**-24 * absum + 1e-30


def check(out: np.ndarray, ref: np.ndarray, bound: np.ndarray, rel_extra: float = 0.0) -> dict:
    out = np.asarray(out, np.float64).reshape(ref.shape)
    allowed = bound + rel_extra * np.abs(ref) + rel_extra * np.abs(ref).max()
    ratio = float((np.abs(out - ref) / allowed).max())
    ok = bool(np.isfinite(out).all() and ratio <= 1.0)
    return {"check": "PASS" if ok else "FAIL", "err_over_bound": ratio, "max_abs_err": float(np.abs(out - ref).max())}


def _torch_f16(torch, x, w):
    return torch.nn.functional.linear(x, w)


def _int4_args(torch, inp: dict):
    """``torch._weight_int4pack_mm``'s operands (bf16, as it takes them): the u4 weights packed by
    ``_convert_weight_to_int4pack``, and per group (scale, zero) with its dequantization
    ``(w - 8) * scale + zero``, i.e. zero = (8 - z) * s for ours."""
    q = torch.from_numpy(inp["q"]).cuda()
    packed = torch.from_numpy((inp["q"][:, 0::2] << 4 | inp["q"][:, 1::2]).astype(np.uint8)).cuda()
    try:
        wp = torch._convert_weight_to_int4pack(packed, 8)
    except Exception:  # older torch: int32 [n, k] of 0..15
        wp = torch._convert_weight_to_int4pack(q.to(torch.int32), 8)
    s = inp["s"].astype(np.float32)
    zero = (8.0 - inp["z"].astype(np.float32)) * s
    sz = torch.from_numpy(np.stack([s.T, zero.T], axis=-1)).to(torch.bfloat16).contiguous().cuda()
    x = torch.from_numpy(inp["x"].astype(np.float32)).to(torch.bfloat16).cuda()
    return x, wp, sz


def _torch_int4(torch, x, wp, sz, group):
    return torch._weight_int4pack_mm(x, wp, group, sz)


def _module_inputs(entry: dict, inp: dict) -> list[np.ndarray]:
    if entry["inputs"] == "f16":
        return [inp["x"], inp["deq"]]
    return [inp["x"], inp["packed"], inp["s"], inp["z"]]


def _row(case, variant, target, seconds, result, config, file) -> dict:
    return {
        "key": case["key"],
        "m": case["m"],
        "n": case["n"],
        "k": case["k"],
        "group": case["group"],
        "variant": variant,
        "target": target,
        "ms": seconds * 1e3,
        "gbs": weight_bytes(case) / seconds / 1e9,
        **result,
        "config": config,
        "file": file,
    }


def run(manifest_dir: Path, driver: str, out_dir: Path, *, repeat: int = 20, warmup: int = 5, kernel: bool = False):
    from mmaflow.runtime.iree_runner import CompiledModule

    manifest = json.loads((manifest_dir / bench_common.MANIFEST).read_text())
    torch = bench_common.torch_cuda() if driver == "cuda" else None
    rows = []
    for case in manifest["cases"]:
        inp = inputs(case)
        ref, bound = reference(inp)
        for e in case["entries"]:
            mod = CompiledModule((manifest_dir / e["file"]).read_bytes(), driver)
            args = _module_inputs(e, inp)
            fn = None if e["inputs"] == "f16" else FUNCTION
            out = mod(fn, *args)
            t = statistics.median(mod.time(fn, *args, warmup=warmup, repeat=repeat))
            rows.append(_row(case, e["variant"], e["target"], t, check(out, ref, bound), e["config"], e["file"]))
            del mod
        if torch is not None:
            x, w = (bench_common.to_torch(torch, a) for a in (inp["x"], inp["deq"]))
            out = _torch_f16(torch, x, w).float().cpu().numpy()
            t = statistics.median(bench_common.cuda_event_times(torch, lambda: _torch_f16(torch, x, w), warmup, repeat))
            rows.append(
                _row(
                    case,
                    "torch F.linear f16",
                    torch.cuda.get_device_name(),
                    t,
                    check(out, ref, bound, 2.0**-11),
                    f"torch {torch.__version__}",
                    TORCH_F16,
                )
            )
            try:
                xb, wp, sz = _int4_args(torch, inp)
                g = case["group"]
                out = _torch_int4(torch, xb, wp, sz, g).float().cpu().numpy()
                t = statistics.median(
                    bench_common.cuda_event_times(torch, lambda: _torch_int4(torch, xb, wp, sz, g), warmup, repeat)
                )
                # bf16 activations, scales and zeros, bf16 out: 2^-8 relative each
                rows.append(
                    _row(
                        case,
                        "torch int4pack bf16",
                        torch.cuda.get_device_name(),
                        t,
                        check(out, ref, bound, 4 * 2.0**-8),
                        f"torch {torch.__version__}",
                        TORCH_INT4,
                    )
                )
            except Exception as ex:  # not in this torch, or not on this GPU: said, not timed
                print(f"bench: weight-only {case['key']}: torch int4 not run: {type(ex).__name__}: {ex}", flush=True)
        for r in [r for r in rows if r["key"] == case["key"]]:
            print(
                f"bench: weight-only {case['key']} {r['variant']}: {r['check']} (err/bound {r['err_over_bound']:.3g}), "
                f"{r['ms']:.4f} ms, {r['gbs']:.0f} GB/s",
                flush=True,
            )
    if kernel:
        for r in rows:
            k = bench_common.kernel_time_of(manifest_dir, r["file"], r["key"], driver)
            r.update(k, kernel_gbs=weight_bytes(r) / (k["kernel_ms"] * 1e-3) / 1e9)
            print(
                f"bench: weight-only {r['key']} {r['variant']}: {k['kernel_ms'] * 1e3:.1f} us kernel-only "
                f"({r['kernel_gbs']:.0f} GB/s; {', '.join(k['kernels'])})",
                flush=True,
            )
    field = "kernel_ms" if all("kernel_ms" in r for r in rows) else "ms"
    base = {r["key"]: r[field] for r in rows if r["variant"] == IREE_DEFAULT}
    for r in rows:
        r["x_iree"] = base[r["key"]] / r[field] if r["key"] in base else float("nan")
    bench_common.write_rows(rows, out_dir, manifest)
    return rows


def profile_one(manifest_dir: Path, file: str, key: str, driver: str) -> None:
    """``bench_common.profile_calls`` of one prepared module or torch variant on case ``key``."""
    manifest = json.loads((manifest_dir / bench_common.MANIFEST).read_text())
    (case,) = [c for c in manifest["cases"] if c["key"] == key]
    inp = inputs(case)
    if file == TORCH_INT4:
        import torch

        xb, wp, sz = _int4_args(torch, inp)
        for _ in range(1 + bench_common.PROFILED_CALLS):
            _torch_int4(torch, xb, wp, sz, case["group"])
            torch.cuda.synchronize()
        return
    if file == TORCH_F16:
        bench_common.profile_calls(manifest_dir, file, driver, FUNCTION, [inp["x"], inp["deq"]], _torch_f16)
        return
    (entry,) = [e for e in case["entries"] if e["file"] == file]
    fn = None if entry["inputs"] == "f16" else FUNCTION
    bench_common.profile_calls(manifest_dir, file, driver, fn, _module_inputs(entry, inp))


def print_table(rows: list[dict]) -> None:
    kernel = any("kernel_ms" in r for r in rows)
    extra = f" {'kernel us':>9} {'GB/s':>6}" if kernel else ""
    print(f"{'M':>3} {'NxK':>10} {'variant':<22} {'call ms':>8}{extra} {'x IREE':>6} {'err/bound':>9} check")
    for r in rows:
        k = f" {r['kernel_ms'] * 1e3:>9.1f} {r['kernel_gbs']:>6.0f}" if kernel else ""
        print(
            f"{r['m']:>3} {r['n']}x{r['k']:<5} {r['variant'][:22]:<22} {r['ms']:>8.4f}{k} {r['x_iree']:>6.2f} "
            f"{r['err_over_bound']:>9.3g} {r['check']}"
        )
