"""`mmaflow bench --attention`: mmaflow's flash-attention kernel against IREE default's attention
dispatch and torch's scaled_dot_product_attention on a GPU. The halves and options of
`mmaflow bench` (``runtime/bench.py``, which hands a manifest of kind "attention" to this module):

    prepare  for every dtype, sequence length and head dim: ``modules.attention_module`` (Q, K, V
             (batch 2, 16 heads, seq, head dim) as torch's SDPA takes them, no mask, not causal,
             scale 1/sqrt(head dim), spelled as IREE lowers SDPA) compiled with mmaflow for each
             target (its attention dispatch must be taken and verified: the prepare fails
             otherwise) and once with IREE's default pipeline (sm_80 code for sm_90a,
             ``bench_common.iree_default``); the .vmfb files and manifest.json
    run      random normal Q, K, V (seeded per case, rounded to the dtype); every module through
             IREE's runtime and torch SDPA (its own choice, and forced onto cuDNN, FLASH and EFFICIENT:
             ``BACKENDS``, each where it exists) on the same inputs, each checked against the float64
             reference within ``runtime/attention_reference.py``'s bound, then timed: the median
             of synchronous calls (torch: of CUDA events); ``--kernel-time`` adds Nsight
             Compute's kernel-only time of each (``runtime/ncu.py``); results.csv, results.json

    mmaflow bench --attention --target sm_90a,sm_80 --sizes 2048 --head-dims 64,128 --prepare-only DIR
    mmaflow bench --attention --target sm_90a --fa3-shapes --sizes 512,1024,2048,4096,8192,16384 --prepare-only DIR
    mmaflow bench --attention --target sm_90a --fa3-shapes --causal --sizes 2048,4096 --prepare-only DIR
    mmaflow bench --attention --target sm_90a --decode 1,8,32 --sizes 4096,32768 --head-dims 128 --prepare-only DIR
    python -m mmaflow.runtime.bench --from-dir DIR --driver cuda --out OUT [--kernel-time]

``--decode``: a decoder step's attention instead (``modules.decode_attention_module``: one query per
sequence, 32 query heads sharing 8 KV heads, the KV cache's length a run-time size), torch's SDPA with
``enable_gqa=True``. IREE 3.13's default pipeline prints "error: Padding OnlineAttention without existing
mask is not yet supported" for it and then compiles it by another route (the build succeeds).

``--causal``: PyTorch's ``scaled_dot_product_attention(q, k, v, is_causal=True)`` in the torch dialect,
as iree-turbine exports it (``modules.torch_sdpa_module``): IREE writes the mask in a dispatch of its
own; mmaflow must prove it causal (``compiler/driver/causal_masks.py``; the prepare fails otherwise)
and removes that dispatch; torch runs ``is_causal=True``. ``--kv-heads N``: the torch form with
``enable_gqa=True``, K and V of N heads.

TFLOP/s count 4 * batch * heads * seq_q * seq_k * head_dim FLOPs per call (the two matmuls,
S = Q K^T and O = P V; the softmax is not counted; half of it causal), as FlashAttention reports; decode rows also give
GB/s, the bytes of K and V over the time. "x IREE" is IREE default's time over the row's (kernel-only
when measured).

The run half imports no IREE compiler code (only iree.runtime, numpy, optionally torch).
"""

from __future__ import annotations

import contextlib
import functools
import json
import statistics
import time
import zlib
from pathlib import Path

import numpy as np

from mmaflow.runtime import bench_common
from mmaflow.runtime.attention_reference import attention_bound, attention_reference
from mmaflow.runtime.modules import attention_module, decode_attention_module, torch_sdpa_module

BATCH, HEADS = 2, 16
# --decode: Llama-3-8B's attention heads (32 query heads, 8 KV heads), one query per sequence.
DECODE_HEADS, DECODE_KV_HEADS = 32, 8
DEFAULT_KV = "4096,32768"
# The FlashAttention-3 paper's shapes (--fa3-shapes): batch x seq = 16k tokens, hidden 2048 (heads = 2048 / d).
FA3_TOKENS, FA3_HIDDEN = 16384, 2048
DEFAULT_SEQS, DEFAULT_HEAD_DIMS = "2048", "64,128"
DTYPES = ("f16", "bf16")
FUNCTION = "attention"
FLOPS = "4 * batch * heads * seq_q * seq_k * head_dim"
IREE_DEFAULT = "iree-default"
TORCH_VARIANT = "torch SDPA"
# torch's SDPA timed with its own choice of kernel and forced onto each backend (torch.nn.attention.
# sdpa_kernel), each where this torch and GPU have it: (variant, SDPBackend name, the row's "file")
BACKENDS = (
    (TORCH_VARIANT, None, bench_common.TORCH),
    ("torch cuDNN", "CUDNN_ATTENTION", "torch-cudnn"),
    ("torch FLASH", "FLASH_ATTENTION", "torch-flash"),
    ("torch EFFICIENT", "EFFICIENT_ATTENTION", "torch-efficient"),
)


def cases(
    seqs: list[int],
    head_dims: list[int],
    dtypes: list[str],
    *,
    batch: int = BATCH,
    heads: int = HEADS,
    fa3: bool = False,
    causal: bool = False,
    kv_heads: int | None = None,
) -> list[dict]:
    """One case per dtype, sequence length and head dim (queries and keys of the same length);
    ``fa3``: each at the FlashAttention-3 paper's batch (16k tokens / seq) and heads (2048 / d)."""
    out = []
    for dt in dtypes:
        for s in seqs:
            for d in head_dims:
                b, h = (FA3_TOKENS // s, FA3_HIDDEN // d) if fa3 else (batch, heads)
                key = f"{dt}_b{b}h{h}" + (f"kv{kv_heads}" if kv_heads else "") + f"_s{s}_d{d}"
                out.append(
                    {"key": key + ("_causal" if causal else ""), "dtype": dt, "batch": b, "heads": h, "seq": s}
                    | {"head_dim": d}
                    | ({"causal": True} if causal else {})
                    | ({"kv_heads": kv_heads} if kv_heads else {})
                )
    return out


def decode_cases(
    batches: list[int], kv_seqs: list[int], head_dims: list[int], dtypes: list[str], v_transposed: bool = False
) -> list[dict]:
    """One case per dtype, batch, KV length and head dim of a decoder step (``--decode``;
    ``v_transposed``: the modules' V stored head dim outer, ``--v-head-dim-outer``)."""
    return [
        {
            "key": f"{dt}_decode_b{b}_kv{s}_d{d}" + ("_vt" if v_transposed else ""),
            "dtype": dt,
            "batch": b,
            "heads": DECODE_HEADS,
            "kv_heads": DECODE_KV_HEADS,
            "q_len": 1,
            "seq": s,
            "head_dim": d,
            "function": "decode_attention",
        }
        | ({"v_transposed": True} if v_transposed else {})
        for dt in dtypes
        for b in batches
        for s in kv_seqs
        for d in head_dims
    ]


def _q_len(case: dict) -> int:
    return case.get("q_len", case["seq"])


def flops(case: dict) -> float:
    full = 4.0 * case["batch"] * case["heads"] * _q_len(case) * case["seq"] * case["head_dim"]
    return full / 2 if case.get("causal") else full


def kv_bytes(case: dict) -> float:
    """The bytes of K and V a call reads (16-bit elements)."""
    return 2 * 2.0 * case["batch"] * case.get("kv_heads", case["heads"]) * case["seq"] * case["head_dim"]


# ---- prepare (needs the compiler) -------------------------------------------------------------


def prepare(
    targets: list[str],
    seqs: list[int],
    head_dims: list[int],
    dtypes: list[str],
    out_dir: Path,
    *,
    batch: int = BATCH,
    heads: int = HEADS,
    fa3: bool = False,
    decode: list[int] | None = None,
    causal: bool = False,
    kv_heads: int | None = None,
    v_transposed: bool = False,
) -> dict:
    """Compile every case with mmaflow for each target and once per IREE target with IREE's
    default pipeline; write the .vmfb files and manifest.json. ``decode``: decode cases at these
    batch sizes (``seqs``: the KV lengths) instead, ``v_transposed``: their V stored head dim outer."""
    from iree.compiler import compile_str

    from mmaflow.compiler.core.errors import InputError, VerificationError
    from mmaflow.compiler.driver.bridge import compile_module
    from mmaflow.compiler.kernels.attention.nvidia import HEAD_DIMS
    from mmaflow.compiler.target.targets import get_target

    ts = [get_target(t) for t in targets]
    if len({t.iree_device for t in ts}) != 1:
        raise InputError(
            f"bench --attention runs its targets on one device: {', '.join(t.name for t in ts)} "
            f"use {', '.join(sorted({t.iree_device for t in ts}))}"
        )
    bad = [d for d in head_dims if d not in HEAD_DIMS]
    if bad:
        raise InputError(
            f"--head-dims {','.join(map(str, bad))}: mmaflow's flash-attention kernel takes head dims "
            f"{' and '.join(map(str, HEAD_DIMS))}"
        )
    if fa3:
        bad = [s for s in seqs if FA3_TOKENS % s] + [d for d in head_dims if FA3_HIDDEN % d]
        if bad:
            raise InputError(
                f"--fa3-shapes: batch x seq = {FA3_TOKENS} tokens and heads x head dim = {FA3_HIDDEN}; "
                f"{', '.join(map(str, bad))} does not divide them"
            )
    if kv_heads is not None and not decode:
        hs = {FA3_HIDDEN // d for d in head_dims} if fa3 else {heads}
        if kv_heads < 1 or any(h % kv_heads for h in hs):
            raise InputError(
                f"--kv-heads {kv_heads}: the query heads ({', '.join(map(str, sorted(hs)))}) share K and "
                "V heads in equal groups: it must divide them"
            )
    bad = [dt for dt in dtypes if dt not in DTYPES]
    if bad:
        raise InputError(f"bench --attention times {' and '.join(DTYPES)} attention, not {', '.join(bad)}")
    defaults: dict[str, list[str]] = {}  # IREE's target -> its flags: one IREE default build each
    for t in ts:
        flags, base_target = bench_common.iree_default(t)
        defaults.setdefault(base_target, flags)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = []
    todo = (
        decode_cases(decode, seqs, head_dims, dtypes, v_transposed)
        if decode
        else cases(seqs, head_dims, dtypes, batch=batch, heads=heads, fa3=fa3, causal=causal, kv_heads=kv_heads)
    )
    for case in todo:
        if decode:
            src = decode_attention_module(
                case["batch"],
                case["kv_heads"],
                case["heads"] // case["kv_heads"],
                case["head_dim"],
                case["dtype"],
                v_transposed=v_transposed,
            )
        elif causal or kv_heads:
            src = torch_sdpa_module(
                case["batch"],
                case["heads"],
                case["seq"],
                case["head_dim"],
                case["dtype"],
                kv_heads=kv_heads,
                causal=causal,
            )
        else:
            src = attention_module(case["batch"], case["heads"], case["seq"], case["head_dim"], case["dtype"])
        entries = []
        for t in ts:
            name = f"mmaflow_{t.name}_{case['key']}"
            res = compile_module(src, t.name, source_name=f"{name}.mlir", require_matmul=False)
            if not [e for e in res.taken if e.facts.is_attention]:
                raise VerificationError(
                    f"{name}: mmaflow did not take the attention dispatch, IREE would compile "
                    "it; the benchmark would time IREE's kernel as mmaflow's:\n  " + "\n  ".join(res.log)
                )
            if causal and not any("its mask is the causal pattern" in line for line in res.log):
                raise VerificationError(
                    f"{name}: mmaflow did not prove the mask causal; the benchmark would time a kernel reading it "
                    "against torch's is_causal:\n  " + "\n  ".join(res.log)
                )
            (out_dir / f"{name}.vmfb").write_bytes(res.vmfb)
            entries.append(
                {
                    "variant": f"mmaflow {t.name}",
                    "file": f"{name}.vmfb",
                    "target": t.name,
                    "config": bench_common.config_line(res.log),
                }
            )
        for base_target, flags in defaults.items():
            name = f"iree_{base_target}_{case['key']}"
            (out_dir / f"{name}.vmfb").write_bytes(compile_str(src, extra_args=flags))
            entries.append(
                {
                    "variant": IREE_DEFAULT,
                    "file": f"{name}.vmfb",
                    "target": base_target,
                    "config": "IREE default pipeline",
                }
            )
        prepared.append({**case, "entries": entries})
        print(f"bench: attention {case['key']}: {', '.join(e['file'] for e in entries)}", flush=True)
    manifest = {
        "kind": "attention",
        "targets": [t.name for t in ts],
        "driver": ts[0].iree_device,
        "function": FUNCTION,
        "flops": FLOPS,
        "cases": prepared,
        "prepared": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out_dir / bench_common.MANIFEST).write_text(json.dumps(manifest, indent=1))
    return manifest


# ---- run (iree.runtime, numpy, optional torch) ------------------------------------------------


def inputs(case: dict) -> list[np.ndarray]:
    """Q, K, V of a case: standard normal (Q K^T * scale is then ~N(0, 1), a softmax neither flat
    nor one-hot), rounded to the dtype, seeded by the case's key."""
    from mmaflow.runtime.numerics import DTYPES as NP_DTYPES

    rng = np.random.default_rng(zlib.crc32(case["key"].encode()))
    q_shape = (case["batch"], case["heads"], _q_len(case), case["head_dim"])
    kv_shape = (case["batch"], case.get("kv_heads", case["heads"]), case["seq"], case["head_dim"])
    return [
        rng.standard_normal(shape, dtype=np.float32).astype(NP_DTYPES[case["dtype"]])
        for shape in (q_shape, kv_shape, kv_shape)
    ]


def module_inputs(case: dict, q: np.ndarray, k: np.ndarray, v: np.ndarray) -> list[np.ndarray]:
    """``inputs`` as the case's modules take them: V stored head dim outer (``v_transposed``: the
    same values, (batch, KV heads, head dim, keys) and contiguous), else as torch takes them."""
    return [q, k, np.ascontiguousarray(np.swapaxes(v, -1, -2)) if case.get("v_transposed") else v]


def reference(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, dtype: str, *, chunk: int = 4, causal: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The float64 softmax(Q K^T / sqrt(head dim)) V of (batch, heads, seq, head dim) inputs and
    its error bound (``attention_reference``), ``chunk`` (batch, head) pairs at a time. Fewer K / V
    heads than Q's (GQA): query head h reads KV head h // (its share), as torch's ``enable_gqa``."""
    heads, kv_heads = q.shape[1], k.shape[1]
    group = heads // kv_heads
    q3, k3, v3 = (x.reshape(-1, *x.shape[-2:]) for x in (q, k, v))
    pairs = np.arange(len(q3))
    kv_of = (pairs // heads) * kv_heads + (pairs % heads) // group  # each (batch, query head)'s K / V
    scale = 1.0 / np.sqrt(q.shape[-1])
    refs, bounds = [], []
    for i in range(0, len(q3), chunk):
        kv = kv_of[i : i + chunk]
        ref = attention_reference(q3[i : i + chunk], k3[kv], v3[kv], scale, causal)
        refs.append(ref)
        bounds.append(attention_bound(ref, v3[kv], dtype))
    return np.concatenate(refs).reshape(q.shape), np.concatenate(bounds).reshape(q.shape)


def check(out: np.ndarray, ref: np.ndarray, bound: np.ndarray, dtype: str) -> dict:
    """``out`` against the reference, every element within its bound."""
    from mmaflow.runtime import numerics

    chk = numerics.compare(np.asarray(out), ref, bound, out_type=dtype)
    return {
        "check": "PASS" if chk.passed else "FAIL",
        "err_over_bound": chk.worst_ratio,
        "max_abs_err": chk.max_abs_err,
        "detail": chk.detail,
    }


def _sdpa(torch, q, k, v, causal: bool = False):
    gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, **gqa, **({"is_causal": True} if causal else {}))


def _backend(torch, name: str | None):
    """A context running SDPA on backend ``name`` (``SDPBackend``'s; None: torch's own choice)."""
    if name is None:
        return contextlib.nullcontext()
    attention = getattr(getattr(torch, "nn", None), "attention", None)
    if attention is None or not hasattr(attention, "sdpa_kernel"):
        raise RuntimeError("this torch has no torch.nn.attention.sdpa_kernel")
    return attention.sdpa_kernel(getattr(attention.SDPBackend, name))


def torch_rows(torch, case: dict, q, k, v, ref, bound, *, warmup: int, repeat: int) -> tuple[list[dict], dict]:
    """torch's SDPA on the case under each of ``BACKENDS``, checked against the reference and timed
    (CUDA events); a backend this torch or GPU lacks, or that refuses the shape, is said and
    skipped. Returns the rows and each one's output (by its "file")."""
    tq, tk, tv = (bench_common.to_torch(torch, x) for x in (q, k, v))
    c = bool(case.get("causal"))
    rows, outs = [], {}
    for variant, backend, file in BACKENDS:
        try:
            with _backend(torch, backend):
                out = _sdpa(torch, tq, tk, tv, c).float().cpu().numpy()
                t = statistics.median(
                    bench_common.cuda_event_times(torch, lambda: _sdpa(torch, tq, tk, tv, c), warmup, repeat)
                )
        except Exception as e:  # (not in this torch, not for this GPU, dtype or shape)
            print(f"bench: attention {case['key']} {variant}: not run: {type(e).__name__}: {e}", flush=True)
            continue
        outs[file] = out
        rows.append(
            _row(
                case,
                variant,
                torch.cuda.get_device_name(),
                t,
                check(out, ref, bound, case["dtype"]),
                f"torch {torch.__version__}",
                file,
            )
        )
    return rows, outs


def _row(case: dict, variant: str, target: str, seconds: float, result: dict, config: str, file: str) -> dict:
    return {
        "key": case["key"],
        "dtype": case["dtype"],
        "batch": case["batch"],
        "heads": case["heads"],
        "kv_heads": case.get("kv_heads", case["heads"]),
        "q_len": _q_len(case),
        "seq": case["seq"],
        "head_dim": case["head_dim"],
        "causal": bool(case.get("causal")),
        "variant": variant,
        "target": target,
        "ms": seconds * 1e3,
        "tflops": flops(case) / seconds / 1e12,
        "gbps": kv_bytes(case) / seconds / 1e9,
        **result,
        "config": config,
        "file": file,
    }


def run(
    manifest_dir: Path, driver: str, out_dir: Path, *, repeat: int = 20, warmup: int = 5, kernel: bool = False
) -> list[dict]:
    """Check and time every prepared module and torch SDPA (when torch sees the GPU) on every
    case; ``kernel``: also each one's kernel-only time (Nsight Compute)."""
    from mmaflow.runtime.iree_runner import CompiledModule

    manifest = json.loads((manifest_dir / bench_common.MANIFEST).read_text())
    torch = bench_common.torch_cuda() if driver == "cuda" else None
    rows = []
    for case in manifest["cases"]:
        q, k, v = inputs(case)
        ref, bound = reference(q, k, v, case["dtype"], causal=bool(case.get("causal")))
        outs, case_rows = {}, []
        function = case.get("function", FUNCTION)
        for e in case["entries"]:
            mod = CompiledModule((manifest_dir / e["file"]).read_bytes(), driver)
            args = module_inputs(case, q, k, v)
            outs[e["file"]] = mod(function, *args)
            t = statistics.median(mod.time(function, *args, warmup=warmup, repeat=repeat))
            case_rows.append(
                _row(
                    case,
                    e["variant"],
                    e["target"],
                    t,
                    check(outs[e["file"]], ref, bound, case["dtype"]),
                    e["config"],
                    e["file"],
                )
            )
            del mod
        if torch is not None:
            t_rows, t_outs = torch_rows(torch, case, q, k, v, ref, bound, warmup=warmup, repeat=repeat)
            case_rows += t_rows
            outs.update(t_outs)
            if bench_common.TORCH in outs:
                for r in case_rows:  # numerics against torch's own default result
                    r["max_abs_vs_torch"] = float(
                        np.abs(outs[r["file"]].astype(np.float64) - outs[bench_common.TORCH]).max()
                    )
        rows += case_rows
        for r in case_rows:
            print(
                f"bench: attention {case['key']} {r['variant']}: {r['check']} (err/bound {r['err_over_bound']:.3g}), "
                f"{r['ms']:.4f} ms, {r['tflops']:.1f} TFLOP/s",
                flush=True,
            )
    if kernel:  # after all synchronous timing: each ncu run is a process of its own
        for r in rows:
            k = bench_common.kernel_time_of(manifest_dir, r["file"], r["key"], driver)
            r.update(k, kernel_tflops=flops(r) / (k["kernel_ms"] * 1e-3) / 1e12)
            r["kernel_gbps"] = kv_bytes(r) / (k["kernel_ms"] * 1e-3) / 1e9
            print(
                f"bench: attention {r['key']} {r['variant']}: {k['kernel_ms']:.4f} ms kernel-only "
                f"({r['kernel_tflops']:.1f} TFLOP/s, {r['kernel_gbps']:.0f} GB/s of K and V; "
                f"{', '.join(k['kernels'])})",
                flush=True,
            )
    speedups(rows)
    bench_common.write_rows(rows, out_dir, manifest)
    return rows


def speedups(rows: list[dict]) -> None:
    """``x_iree``: IREE default's time over each row's, in the same case (kernel-only time when
    measured, else the synchronous call's)."""
    field = "kernel_ms" if all("kernel_ms" in r for r in rows) else "ms"
    base = {r["key"]: r[field] for r in rows if r["variant"] == IREE_DEFAULT}
    for r in rows:
        r["x_iree"] = base[r["key"]] / r[field] if r["key"] in base else float("nan")


def profile_one(manifest_dir: Path, file: str, key: str, driver: str) -> None:
    """``bench_common.profile_calls`` of one prepared module (or torch SDPA: ``file``
    bench_common.TORCH) on case ``key``."""
    manifest = json.loads((manifest_dir / bench_common.MANIFEST).read_text())
    (case,) = [c for c in manifest["cases"] if c["key"] == key]
    backend = {f: b for _, b, f in BACKENDS}
    if file in backend and file != bench_common.TORCH:  # a forced backend: torch's calls under its context
        import torch

        args = [bench_common.to_torch(torch, x) for x in inputs(case)]
        with _backend(torch, backend[file]):
            for _ in range(1 + bench_common.PROFILED_CALLS):
                _sdpa(torch, *args, bool(case.get("causal")))
                torch.cuda.synchronize()
        return
    bench_common.profile_calls(
        manifest_dir,
        file,
        driver,
        case.get("function", FUNCTION),
        inputs(case) if file == bench_common.TORCH else module_inputs(case, *inputs(case)),
        functools.partial(_sdpa, causal=bool(case.get("causal"))),
    )


def print_table(rows: list[dict]) -> None:
    """Synchronous call time and, when measured, kernel-only time; "x IREE" compares the latter."""
    kernel = any("kernel_ms" in r for r in rows)
    extra = f" {'kernel ms':>9} {'TFLOP/s':>8} {'GB/s':>6}" if kernel else ""
    print(
        f"{'dtype':<5} {'BxH':>5} {'q':>5} {'seq':>6} {'d':>4} {'mask':>6} {'variant':<16} {'target':<10} "
        f"{'call ms':>9} {'TFLOP/s':>8}{extra} {'x IREE':>6} {'err/bound':>9} check"
    )
    for r in rows:
        k = f" {r['kernel_ms']:>9.4f} {r['kernel_tflops']:>8.2f} {r['kernel_gbps']:>6.0f}" if kernel else ""
        print(
            f"{r['dtype']:<5} {r['batch'] * r['heads']:>5} {r['q_len']:>5} {r['seq']:>6} {r['head_dim']:>4} "
            f"{'causal' if r.get('causal') else '':>6} "
            f"{r['variant'][:16]:<16} "
            f"{r['target'][:10]:<10} {r['ms']:>9.4f} {r['tflops']:>8.2f}{k} {r['x_iree']:>6.2f} "
            f"{r['err_over_bound']:>9.3g} {r['check']}"
        )
