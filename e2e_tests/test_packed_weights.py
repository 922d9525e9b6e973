"""Quantized weights read packed (``compiler/driver/packed_weights.py``) and the weight-only kernel's fused
epilogue: int4 weights a model unpacks with shifts and masks reach IREE's dispatch formation as i4 bytes and
a matmul per group, IREE forms one dispatch per layer, and the weight-only kernel takes it with its epilogue.

The rewrite is exact and backend-independent: the layers are built for IREE's llvm-cpu backend with the
rewrite between its phases and run on the CPU against numpy (a nibble read in the wrong order, a group's
parameters at the wrong K, or the epilogue's other input at the wrong place are off by the data's size).
The GPU kernels run on the lane executor against IREE's own dispatch IR evaluated in numpy, every target,
sentinels around every tensor. Unpackings that are not nibbles low first are left as they are, logged.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from iree.compiler import api

from mmaflow.compiler.core.mlir import ops_named
from mmaflow.compiler.driver import packed_weights
from mmaflow.compiler.driver.bridge import codegen_module, lower_to_vmfb, run_phases
from mmaflow.runtime.model_check import check_executable

MODELS = Path(__file__).parent / "models"
CPU = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu"]
TARGETS = ["sm_80", "sm_90a", "gfx942", "gfx950", "gfx1100", "gfx1201"]
M, N, K, G = 3, 48, 256, 64


def _layer(
    *, shifts: str = "dense<[0, 4]>", mask: int = 15, fused: bool = False, epilogue: bool = True, m: int = M, n: int = N
) -> str:
    """A GPTQ-style int4 layer as torch's lowering writes it: bytes N x K/2 shifted by a [2] constant and
    masked (two generics, or one with ``fused``), collapsed to N x K, viewed per group, ``(q - z) * s`` in
    f16, collapsed back and ``F.linear``'d; with ``epilogue`` the f32 result truncated, SiLU'd and
    multiplied by another input (a gated MLP's gate), else truncated only."""
    shift_body = (
        ["%v = arith.shrui %in, %sh : i8", f"%m = arith.andi %v, %c{mask} : i8", "linalg.yield %m : i8"]
        if fused
        else ["%v = arith.shrui %in, %sh : i8", "linalg.yield %v : i8"]
    )
    lines = [
        f"func.func @layer(%x: tensor<{m}x{K}xf16>, %w: tensor<{n}x{K // 2}xi8>, %s: tensor<{n}x{K // G}xf16>, "
        f"%z: tensor<{n}x{K // G}xf16>, %u: tensor<{m}x{n}xf16>) -> tensor<{m}x{n}xf16> {{",
        f"  %shifts = arith.constant {shifts} : tensor<2xi8>",
        f"  %c{mask} = arith.constant {mask} : i8",
        "  %one = arith.constant 1.0 : f16",
        "  %zero = arith.constant 0.0 : f32",
        f"  %e0 = tensor.empty() : tensor<{n}x{K // 2}x2xi8>",
        "  %sh = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (c)>, "
        'affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} '
        f"ins(%w, %shifts : tensor<{n}x{K // 2}xi8>, tensor<2xi8>) outs(%e0 : tensor<{n}x{K // 2}x2xi8>) {{",
        "  ^bb0(%in: i8, %sh: i8, %o: i8):",
        *[f"    {x}" for x in shift_body],
        f"  }} -> tensor<{n}x{K // 2}x2xi8>",
    ]
    last = "%sh"
    if not fused:
        lines += [
            "  %q = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> "
            '(a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} '
            f"ins(%sh : tensor<{n}x{K // 2}x2xi8>) outs(%e0 : tensor<{n}x{K // 2}x2xi8>) {{",
            "  ^bb0(%in: i8, %o: i8):",
            f"    %m = arith.andi %in, %c{mask} : i8",
            "    linalg.yield %m : i8",
            f"  }} -> tensor<{n}x{K // 2}x2xi8>",
        ]
        last = "%q"
    lines += [
        f"  %qc = tensor.collapse_shape {last} [[0], [1, 2]] : tensor<{n}x{K // 2}x2xi8> into tensor<{n}x{K}xi8>",
        f"  %qe = tensor.expand_shape %qc [[0], [1, 2]] output_shape [{n}, {K // G}, {G}] : tensor<{n}x{K}xi8> "
        f"into tensor<{n}x{K // G}x{G}xi8>",
        f"  %e1 = tensor.empty() : tensor<{n}x{K // G}x{G}xf16>",
        "  %d = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b)>, "
        "affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = "
        f'["parallel", "parallel", "parallel"]}} ins(%qe, %z, %s : tensor<{n}x{K // G}x{G}xi8>, '
        f"tensor<{n}x{K // G}xf16>, tensor<{n}x{K // G}xf16>) outs(%e1 : tensor<{n}x{K // G}x{G}xf16>) {{",
        "  ^bb0(%qv: i8, %zv: f16, %sv: f16, %o: f16):",
        "    %f = arith.uitofp %qv : i8 to f16",
        "    %c = arith.subf %f, %zv : f16",
        "    %r = arith.mulf %c, %sv : f16",
        "    linalg.yield %r : f16",
        f"  }} -> tensor<{n}x{K // G}x{G}xf16>",
        f"  %dc = tensor.collapse_shape %d [[0], [1, 2]] : tensor<{n}x{K // G}x{G}xf16> into tensor<{n}x{K}xf16>",
        f"  %e2 = tensor.empty() : tensor<{m}x{n}xf32>",
        f"  %init = linalg.fill ins(%zero : f32) outs(%e2 : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>",
        "  %mm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, "
        f"affine_map<(m, n, k) -> (m, n)>] ins(%x, %dc : tensor<{m}x{K}xf16>, tensor<{n}x{K}xf16>) "
        f"outs(%init : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>",
        f"  %e3 = tensor.empty() : tensor<{m}x{n}xf16>",
    ]
    ident = "affine_map<(m, n) -> (m, n)>"
    if epilogue:
        lines += [
            f"  %y = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], iterator_types = "
            f'["parallel", "parallel"]}} ins(%mm, %u : tensor<{m}x{n}xf32>, tensor<{m}x{n}xf16>) '
            f"outs(%e3 : tensor<{m}x{n}xf16>) {{",
            "  ^bb0(%a: f32, %b: f16, %o: f16):",
            "    %t = arith.truncf %a : f32 to f16",
            "    %n = arith.negf %t : f16",
            "    %ex = math.exp %n : f16",
            "    %de = arith.addf %ex, %one : f16",
            "    %sg = arith.divf %one, %de : f16",
            "    %si = arith.mulf %sg, %t : f16",
            "    %g = arith.mulf %si, %b : f16",
            "    linalg.yield %g : f16",
        ]
    else:
        lines += [
            f"  %y = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = "
            f'["parallel", "parallel"]}} ins(%mm : tensor<{m}x{n}xf32>) outs(%e3 : tensor<{m}x{n}xf16>) {{',
            "  ^bb0(%a: f32, %o: f16):",
            "    %t = arith.truncf %a : f32 to f16",
            "    linalg.yield %t : f16",
        ]
    lines += [f"  }} -> tensor<{m}x{n}xf16>", f"  return %y : tensor<{m}x{n}xf16>", "}"]
    return "\n".join(lines)


def _global_opt(session: api.Session, source: str):
    return run_phases(session, source, to="global-optimization", name="layer.mlir")


def _cpu_build(source: str, rewrite=lambda m: packed_weights.fold(m, 128)) -> tuple[bytes, list[str], int]:
    """The module for llvm-cpu with ``rewrite`` applied at global-optimization; (.vmfb, log, executables)."""
    session = api.Session()
    session.set_flags(*CPU)
    module = _global_opt(session, source)
    log = rewrite(module)
    module = run_phases(session, module, start="global-optimization", to="executable-sources")
    executables = len(ops_named(module, "hal.executable"))
    return lower_to_vmfb(session, module, start="executable-sources"), log, executables


def _unpack(packed: np.ndarray) -> np.ndarray:
    """Two 4-bit weights a byte, element 2j in the low nibble of byte j (the model's packing)."""
    q = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
    q[:, 0::2], q[:, 1::2] = packed & 15, packed >> 4
    return q


def _dequantize(q: np.ndarray, z: np.ndarray, s: np.ndarray, group: int) -> np.ndarray:
    """``(q - z) * s`` per row and group, rounded to f16 after each op as the module computes it."""
    zz, ss = np.repeat(z, group, axis=1), np.repeat(s, group, axis=1)
    return ((q.astype(np.float16) - zz).astype(np.float16) * ss).astype(np.float16)


def _silu_gate(t: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The epilogue on f16 values in float64 (each of its f16 ops rounds within 2^-11)."""
    return t / (1 + np.exp(-t)) * u


def _run_cpu(vmfb: bytes, tmp_path: Path, name: str, args: list, params: dict | None = None):
    import iree.runtime as rt

    config = rt.Config("local-task")
    modules = []
    if params:
        index = rt.ParameterIndex()
        for key, arr in params.items():
            meta = {"type": "Tensor", "dtype": str(arr.dtype), "shape": list(arr.shape)}
            index.add_buffer(
                key, np.ascontiguousarray(arr).reshape(-1).view(np.uint8), metadata="PYTORCH:" + json.dumps(meta)
            )
        modules.append(rt.create_io_parameters_module(config.vm_instance, index.create_provider(scope="model")))
    (tmp_path / f"{name}.vmfb").write_bytes(vmfb)
    module = rt.VmModule.mmap(config.vm_instance, str(tmp_path / f"{name}.vmfb"))
    ctx = rt.SystemContext(vm_modules=[*modules, module], config=config)
    return np.asarray(ctx.modules[module.name][name](*args).to_host())


def _layer_data(seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 1, (M, K)).astype(np.float16)
    w = rng.integers(0, 256, (N, K // 2)).astype(np.uint8)
    s = (rng.random((N, K // G)) * 0.02 + 0.005).astype(np.float16)
    z = rng.integers(0, 16, (N, K // G)).astype(np.float16)
    u = rng.normal(0, 1, (M, N)).astype(np.float16)
    return x, w, s, z, u


@pytest.mark.parametrize("fused", [False, True], ids=["shift-then-mask", "one-generic"])
def test_a_layer_read_packed_on_the_cpu(fused, tmp_path):
    """The layer built with the rewrite: the unpacking's dispatch gone, right against numpy: the f32 sum of f16 products within K 2^-24 sum |products| of float64's,
    then the epilogue's f16 ops (5 roundings of 2^-11 and exp's error: 2^-8 relative, generously)."""
    vmfb, log, executables = _cpu_build(_layer(fused=fused))
    assert [line.split(": ", 2)[2].split(" (")[0] for line in log] == [
        "int4 weights unpacked by shifts and masks read packed",
        f"a {M}x{N}x{K} matmul of dequantized weights read per group",
    ], log
    assert executables == 2  # (the unpacking gone; IREE's CPU backend keeps the dequantization apart, GPUs fuse it)
    x, w, s, z, u = _layer_data(1)
    out = _run_cpu(vmfb, tmp_path, "layer", [x, w.view(np.int8), s, z, u]).astype(np.float64)
    deq = _dequantize(_unpack(w), z, s, G).astype(np.float64)
    t = (x.astype(np.float64) @ deq.T).astype(np.float16).astype(np.float64)
    ref = _silu_gate(t, u.astype(np.float64))
    assert np.abs(ref).max() > 0.5  # (the data reaches the output)
    err = np.abs(out - ref)
    bound = 2.0**-8 * (np.abs(t) + 1) * np.abs(u) + 2.0**-14
    assert (err <= bound).all(), float((err / bound).max())
    # a nibble order swapped would be far off: the reference from high nibbles first
    swapped = _unpack(((w << 4) | (w >> 4)).astype(np.uint8))
    t_bad = (x.astype(np.float64) @ _dequantize(swapped, z, s, G).astype(np.float64).T).astype(np.float16)
    assert not (np.abs(out - _silu_gate(t_bad.astype(np.float64), u.astype(np.float64))) <= bound).all()


@pytest.mark.parametrize(
    "kwargs,why",
    [
        (dict(shifts="dense<[4, 0]>"), "high nibble first"),
        (dict(mask=7), "three bits a weight"),
        (dict(shifts="dense<[0, 3]>"), "overlapping fields"),
    ],
    ids=["high-first", "mask-7", "shift-3"],
)
def test_unpackings_that_are_not_nibbles_low_first_are_left(kwargs, why, tmp_path):
    """The chain is evaluated on every byte: anything but (b >> 4s) & 15 keeps the unpacking a dispatch of
    its own, logged, and the module still computes the model's result."""
    vmfb, log, executables = _cpu_build(_layer(**kwargs))
    assert "not their nibbles (low first): left as is" in log[0], (why, log)
    assert not any("read packed" in line for line in log), log  # (the matmul is still read per group)
    assert executables == 3
    x, w, s, z, u = _layer_data(2)
    out = _run_cpu(vmfb, tmp_path, "layer", [x, w.view(np.int8), s, z, u]).astype(np.float64)
    lo, hi = (4, 0) if kwargs.get("shifts") == "dense<[4, 0]>" else (0, 3 if "shifts" in kwargs else 4)
    mask = kwargs.get("mask", 15)
    q = np.empty((N, K), np.uint8)
    q[:, 0::2], q[:, 1::2] = (w >> lo) & mask, (w >> hi) & mask
    t = (x.astype(np.float64) @ _dequantize(q, z, s, G).astype(np.float64).T).astype(np.float16).astype(np.float64)
    ref = _silu_gate(t, u.astype(np.float64))
    assert (np.abs(out - ref) <= 2.0**-8 * (np.abs(t) + 1) * np.abs(u) + 2.0**-14).all()


def test_the_quantized_mlp_on_the_cpu(tmp_path):
    """llama_mlp_wq (iree-turbine's export: the shifts a dense_resource) built with the rewrite, right against
    numpy from its parameters (on a GPU target its three layers are three dispatches: test_models.py)."""
    src = (MODELS / "llama_mlp_wq_f16.mlir").read_text()
    vmfb, log, _ = _cpu_build(src)
    assert sum("read packed" in line for line in log) == 2 and sum("read per group" in line for line in log) == 2
    rng = np.random.default_rng(5)
    params, ref_w = {}, {}
    for name, n, k in (("gate_proj", 2816, 1024), ("up_proj", 2816, 1024)):
        params[f"{name}.qweight"] = rng.integers(0, 256, (n, k // 2)).astype(np.uint8)
        params[f"{name}.scales"] = (rng.random((n, k // 128)) * 0.004 + 0.001).astype(np.float16)
        params[f"{name}.zeros"] = rng.integers(0, 16, (n, k // 128)).astype(np.float16)
        q = _unpack(params[f"{name}.qweight"])
        ref_w[name] = _dequantize(q, params[f"{name}.zeros"], params[f"{name}.scales"], 128).astype(np.float64)
    params["down_proj.qweight"] = rng.integers(-127, 128, (1024, 2816)).astype(np.int8)
    params["down_proj.scales"] = (rng.random((1024, 1)) * 0.0004 + 0.0001).astype(np.float16)
    ref_w["down_proj"] = (params["down_proj.qweight"].astype(np.float16) * params["down_proj.scales"]).astype(
        np.float64
    )
    x = rng.normal(0, 1, (2, 1, 1024)).astype(np.float16)
    out = _run_cpu(vmfb, tmp_path, "main", [x], params).astype(np.float64)
    f16 = np.float16
    gate = (x.reshape(2, 1024).astype(np.float64) @ ref_w["gate_proj"].T).astype(f16).astype(np.float64)
    up = (x.reshape(2, 1024).astype(np.float64) @ ref_w["up_proj"].T).astype(f16).astype(np.float64)
    h = (gate / (1 + np.exp(-gate)) * up).astype(f16).astype(np.float64)
    ref = (h @ ref_w["down_proj"].T).reshape(2, 1, 1024)
    # f16 storage of gate, up, h and the output: ~1e-3 relative; a wrong nibble order or group is ~1
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < 3e-3, err


@pytest.mark.parametrize("target", TARGETS)
def test_the_layer_s_dispatch_in_the_weight_only_kernel(target):
    """The one dispatch IREE forms for a GPU, taken by the weight-only kernel with SiLU(.) * u fused, right on the lane
    executor against the dispatch's own IR (every workgroup, sentinels around every tensor)."""
    res = codegen_module(_layer(), target)
    (exe,) = res.executables  # (the unpacking and the dequantization fused into the matmul's dispatch)
    rec = exe.facts.problem
    assert exe.facts.is_weight_only and rec.q_type == "i4" and not rec.signed and rec.group == G
    assert rec.describe().endswith("epilogue(f32, f16[m,n]: truncf negf exp addf divf mulf mulf) -> f16"), rec
    (check,) = check_executable(exe, seed=4)
    assert check.passed, check.line()


def test_an_epilogue_skipped_is_caught(monkeypatch):
    """The kernel storing the truncated sum without the epilogue fails the check: the reference applies it."""
    from mmaflow.compiler.kernels.decode import weight_only

    class Skipped(weight_only.Epilogue):
        def apply(self, em, acc, coords, key):
            return em.convert(acc, self.func.type.results[0])

    monkeypatch.setattr(weight_only, "Epilogue", Skipped)
    (exe,) = codegen_module(_layer(), "sm_90a").taken
    (check,) = check_executable(exe, seed=4)
    assert not check.passed and "outside the bound" in check.detail, check.line()


def test_a_lone_truncation_is_no_epilogue():
    """Without the gated activation the dispatch's f32 result is only truncated: stored f16, no epilogue."""
    (exe,) = codegen_module(_layer(epilogue=False), "gfx1100").taken
    assert exe.facts.problem.describe().endswith("-> f32, stored f16"), exe.facts.problem.describe()
    (check,) = check_executable(exe, seed=6)
    assert check.passed, check.line()


@pytest.mark.parametrize("target", TARGETS)
def test_columns_past_n_with_the_epilogue(target):
    """N = 44: the last workgroup's columns overhang N (8 a workgroup on NVIDIA, 16 on AMD); the epilogue's
    other input is read bounded there, and nothing past N is stored."""
    (exe,) = codegen_module(_layer(n=44), target).taken
    assert exe.facts.problem.n == 44 and exe.facts.is_weight_only
    (check,) = check_executable(exe, seed=8)
    assert check.passed, check.line()


def _canonical(n: int = 40, k: int = 512, g: int = 128) -> str:
    """IREE's dequant-matmul form with a run-time M (a serving step's batch) and the gated epilogue: i4
    weights, their f16 scales and zero points, x and the gate's other half M x ... of run-time M."""
    ident = "affine_map<(m, n) -> (m, n)>"
    w, p = f"tensor<{n}x{k // g}x{g}xi4>", f"tensor<{n}x{k // g}xf16>"
    return "\n".join(
        [
            f"func.func @layer(%x: tensor<?x{k}xf16>, %w: {w}, %s: {p}, %z: {p}, %u: tensor<?x{n}xf16>) "
            f"-> tensor<?x{n}xf16> {{",
            "  %c0 = arith.constant 0 : index",
            "  %one = arith.constant 1.0 : f16",
            "  %zero = arith.constant 0.0 : f32",
            f"  %m = tensor.dim %x, %c0 : tensor<?x{k}xf16>",
            f"  %e1 = tensor.empty() : tensor<{n}x{k // g}x{g}xf16>",
            "  %d = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> "
            "(a, b)>, affine_map<(a, b, c) -> (a, b)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = "
            f'["parallel", "parallel", "parallel"]}} ins(%w, %z, %s : {w}, {p}, {p}) '
            f"outs(%e1 : tensor<{n}x{k // g}x{g}xf16>) {{",
            "  ^bb0(%qv: i4, %zv: f16, %sv: f16, %o: f16):",
            "    %f = arith.uitofp %qv : i4 to f16",
            "    %c = arith.subf %f, %zv : f16",
            "    %r = arith.mulf %c, %sv : f16",
            "    linalg.yield %r : f16",
            f"  }} -> tensor<{n}x{k // g}x{g}xf16>",
            f"  %a = tensor.expand_shape %x [[0], [1, 2]] output_shape [%m, {k // g}, {g}] : tensor<?x{k}xf16> "
            f"into tensor<?x{k // g}x{g}xf16>",
            f"  %e2 = tensor.empty(%m) : tensor<?x{n}xf32>",
            f"  %init = linalg.fill ins(%zero : f32) outs(%e2 : tensor<?x{n}xf32>) -> tensor<?x{n}xf32>",
            "  %mm = linalg.generic {indexing_maps = [affine_map<(m, n, g, k) -> (m, g, k)>, affine_map<(m, n, g, k) "
            "-> (n, g, k)>, affine_map<(m, n, g, k) -> (m, n)>], iterator_types = "
            f'["parallel", "parallel", "reduction", "reduction"]}} ins(%a, %d : tensor<?x{k // g}x{g}xf16>, '
            f"tensor<{n}x{k // g}x{g}xf16>) outs(%init : tensor<?x{n}xf32>) {{",
            "  ^bb0(%av: f16, %bv: f16, %ov: f32):",
            "    %ae = arith.extf %av : f16 to f32",
            "    %be = arith.extf %bv : f16 to f32",
            "    %pr = arith.mulf %ae, %be : f32",
            "    %sm = arith.addf %ov, %pr : f32",
            "    linalg.yield %sm : f32",
            f"  }} -> tensor<?x{n}xf32>",
            f"  %e3 = tensor.empty(%m) : tensor<?x{n}xf16>",
            f'  %y = linalg.generic {{indexing_maps = [{ident}, {ident}, {ident}], iterator_types = ["parallel", '
            f'"parallel"]}} ins(%mm, %u : tensor<?x{n}xf32>, tensor<?x{n}xf16>) outs(%e3 : tensor<?x{n}xf16>) {{',
            "  ^bb0(%av: f32, %bv: f16, %o: f16):",
            "    %t = arith.truncf %av : f32 to f16",
            "    %ng = arith.negf %t : f16",
            "    %ex = math.exp %ng : f16",
            "    %de = arith.addf %ex, %one : f16",
            "    %sg = arith.divf %one, %de : f16",
            "    %si = arith.mulf %sg, %t : f16",
            "    %gt = arith.mulf %si, %bv : f16",
            "    linalg.yield %gt : f16",
            f"  }} -> tensor<?x{n}xf16>",
            f"  return %y : tensor<?x{n}xf16>",
            "}",
        ]
    )


@pytest.mark.parametrize("target", ["sm_90a", "gfx942", "gfx1201"])
def test_a_run_time_m_with_the_epilogue(target):
    """A run-time M: the epilogue's other input (M x N, M dynamic) bounded by the run-time M, past the planned
    bound in row blocks (M 45, 70), N 40 overhanging the last workgroup's columns."""
    (exe,) = codegen_module(_canonical(), target).taken
    rec = exe.facts.problem
    assert rec.m is None and rec.epilogue_ops and rec.epilogue[0].shape == (None, 40), rec
    for m in (1, 13, 45, 70):
        (check,) = check_executable(exe, seed=m, sizes={"m": m})
        assert check.passed, f"M = {m}: {check.line()}"


def test_prefill_rows_stay_apart():
    """Past the weight-only kernel's rows (M 200 > 128) the matmul is not read per group: the fused dispatch
    would go to IREE; the dequantization stays apart and the tiled kernels take the matmul. The bytes are
    still read as i4 (the unpacking's dispatch gone), and the module still right."""
    session = api.Session()
    session.set_flags(*CPU)
    module = _global_opt(session, _layer(m=200))
    log = packed_weights.fold(module, 128)
    assert "read packed" in log[0] and "left as it is: M = 200 is past the weight-only kernel's 128 rows" in log[1]
    (exe,) = [e for e in codegen_module(_layer(m=200), "sm_90a").taken]
    assert not exe.facts.is_weight_only and exe.facts.problem.m == 200, exe.facts.problem.describe()


def test_a_rank_0_collapse_is_not_an_unpacking():
    """A rank-0 i8 collapse (it verifies) is left alone, not a crash."""
    from mmaflow.compiler.core.mlir import new_context, parse_module

    src = (
        "func.func @f(%a: tensor<i8>) -> tensor<i8> {\n"
        "  %c = tensor.collapse_shape %a [] : tensor<i8> into tensor<i8>\n  return %c : tensor<i8>\n}"
    )
    module = parse_module(src, new_context())
    assert packed_weights.fold(module, 128) == []
