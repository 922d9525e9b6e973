"""Run the TMA probe (.vmfb files from gen_tma_probe.py) on a Hopper GPU and say what happened.

    python3 run_tma_probe.py [--driver cuda] [--timeout 120] zero.vmfb [template.vmfb] [zero-cpfp.vmfb]

A file whose name contains "template" is the template variant (it takes the host-encoded map
as a second input); any other is a zero-start variant (gen_tma_probe.py's docstring). Needs ``iree.runtime`` (cuda driver) and
numpy; ``cuda.bindings.driver`` (cuda-bindings) for the host encoding (``cuTensorMapEncodeTiled``),
without which the template variant is skipped and the maps are only printed. ``mmaflow`` is
optional (the expected image is also derived from ``SmemLayout`` when it imports).

What it does:

1. ``encode`` (a child process): the driver's own encoding of the same map (f16, rank 2, dims
   256 x 256, row pitch 512 B, box 64 x 64, element strides 1, interleave none, swizzle 128B, L2
   promotion none, OOB fill none) for a 128 KiB buffer it allocates with cuMemAlloc (so its
   global-address field holds that buffer's address, not IREE's).
2. Each .vmfb in its own child process (a fault or a hang ends the child, not the run; the parent
   kills it after ``--timeout`` s): x = random f16 256 x 256, ``probe(x)`` (zero) or
   ``probe(x, template)``; image = the 8192 bytes of shared memory the kernel wrote out, maps =
   56 i64 (the 128-byte map it built, its scratch copy the TMA used, a status word: how many
   mbarrier.try_wait.parity tries the wait took, -1 if it gave up after 2^20; and the global
   address the kernel wrote into the map).
3. Checks the image byte for byte against numpy: the 64 x 64 box of x at rows 128..191, columns
   64..127, box row r at bytes r*128.., its 16-byte chunk c (elements 8c..8c+7) at chunk
   c ^ (r % 8) (TMA's 128B swizzle on a 1024-aligned box). On a mismatch it says which plausible
   alternative the image is (no swizzle, swapped coordinates, box at (0,0), all zeros).
4. Prints the device-built map and the driver's side by side (16 x 8-byte words) with the byte
   ranges that differ.

Output lines to grep: ``RESULT <variant>: PASS|FAIL|ERROR|HANG|SKIP ...`` per variant and a final
``SUMMARY``. Exit status 0 only when every variant run passed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback

import numpy as np

ROWS = COLS = 256
BOX = 64
COORD = (64, 128)            # innermost (column) first, as the kernel's cp.async.bulk.tensor
SEED = 90


def expected_image(x: np.ndarray, row0: int, col0: int, swizzle: bool = True) -> np.ndarray:
    """The 8192 bytes a 64x64 f16 box of x at (row0, col0) occupies in shared memory under TMA's
    128B swizzle (written here from the PTX ISA's description, independent of mmaflow)."""
    box = np.ascontiguousarray(x[row0:row0 + BOX, col0:col0 + BOX]).view(np.uint8).reshape(BOX, 8, 16)
    out = np.zeros((BOX, 8, 16), np.uint8)
    for r in range(BOX):
        for c in range(8):
            out[r, (c ^ (r % 8)) if swizzle else c] = box[r, c]
    return out.reshape(-1)


def smem_layout_image(x: np.ndarray, row0: int, col0: int):
    """The same image from mmaflow's SmemLayout (the wgmma kernel's K-major 128B-swizzled tile:
    mn = 64 box rows, k = 64 elements along a 128-byte line), or None if mmaflow does not import."""
    try:
        from mmaflow.compiler.target.smem_layout import Major, SmemLayout, Swizzle
    except Exception as e:  # noqa: BLE001
        print(f"  (mmaflow not importable, SmemLayout cross-check skipped: {e})")
        return None
    lay = SmemLayout(Major.K, Swizzle.B128, 16, BOX, BOX)
    out = np.zeros(BOX * BOX * 2, np.uint8)
    box = np.ascontiguousarray(x[row0:row0 + BOX, col0:col0 + BOX]).view(np.uint8).reshape(BOX, BOX, 2)
    for r in range(BOX):
        for k in range(BOX):
            o = lay.offset(r, k)
            out[o:o + 2] = box[r, k]
    return out


def ranges(mask: np.ndarray) -> str:
    """'[a, b) ...' for the runs of True in a byte mask."""
    out, start = [], None
    for i, m in enumerate(list(mask) + [False]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append(f"[{start}, {i})")
            start = None
    return " ".join(out) or "none"


def show_maps(device: np.ndarray, host: np.ndarray | None, label: str) -> None:
    dev = device.view(np.uint64)
    print(f"  tensor map, 16 x 8-byte words ({label}):")
    if host is None:
        for i in range(16):
            print(f"    [{i:2d}] bytes {8 * i:3d}-{8 * i + 7:3d}  device {int(dev[i]):016x}")
        return
    hw = host.view(np.uint64)
    for i in range(16):
        mark = "" if dev[i] == hw[i] else "   <-- differs"
        print(f"    [{i:2d}] bytes {8 * i:3d}-{8 * i + 7:3d}  device {int(dev[i]):016x}  driver {int(hw[i]):016x}{mark}")
    diff = device.view(np.uint8) != host.view(np.uint8)
    print(f"  differing byte ranges: {ranges(diff)} ({int(diff.sum())} of 128 bytes)")


def find_address(words: np.ndarray, address: int) -> str:
    """Where a 64-bit address appears in a map's 16 words (as is, or >> 4)."""
    w = words.view(np.uint64)
    for label, v in (("as is", address), (">> 4", address >> 4)):
        hits = [i for i in range(16) if int(w[i]) == v]
        if hits:
            return f"found {label} in word {hits[0]}"
    return "not found as a whole word (as is or >> 4)"


# ---- child: the driver's encoding ----------------------------------------------------------------
def encode() -> dict:
    from cuda.bindings import driver as cu

    def ok(ret):
        err, *rest = ret if isinstance(ret, tuple) else (ret,)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{err!r}")
        return rest[0] if len(rest) == 1 else rest

    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    ptr = ok(cu.cuMemAlloc(ROWS * COLS * 2))
    tmap = ok(cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, int(ptr),
        [cu.cuuint64_t(COLS), cu.cuuint64_t(ROWS)], [cu.cuuint64_t(COLS * 2)],
        [cu.cuuint32_t(BOX), cu.cuuint32_t(BOX)], [cu.cuuint32_t(1), cu.cuuint32_t(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE))
    words = [int(w) for w in tmap.opaque]
    assert len(words) == 16, words
    return {"map": np.array(words, np.uint64).tobytes().hex(), "address": int(ptr)}


# ---- child: one probe ----------------------------------------------------------------------------
def run_probe(path: str, driver: str, template_hex: str | None) -> dict:
    import iree.runtime as rt

    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    config = rt.Config(driver)
    ctx = rt.SystemContext(config=config)
    with open(path, "rb") as f:
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, f.read()))
    fn = ctx.modules.module["probe"]
    if template_hex is None:
        image, maps = fn(x)
    else:
        tmpl = np.frombuffer(bytes.fromhex(template_hex), np.int64).copy()
        image, maps = fn(x, tmpl)
    image = np.asarray(image.to_host()).view(np.uint8).reshape(-1)
    maps = np.asarray(maps.to_host()).astype(np.int64)
    return {"image": image.tobytes().hex(), "maps": maps.tobytes().hex(), "x": x.tobytes().hex()}


def child(argv) -> int:
    try:
        if argv[0] == "encode":
            out = encode()
        else:
            out = run_probe(argv[1], argv[2], argv[3] if len(argv) > 3 else None)
        print("CHILD-JSON " + json.dumps(out), flush=True)
        return 0
    except BaseException as e:  # noqa: BLE001  a fault is a result too
        print("CHILD-ERROR " + json.dumps({"type": type(e).__name__, "message": str(e),
                                          "trace": traceback.format_exc()}), flush=True)
        return 3


def spawn(args, timeout: float) -> tuple[str, dict]:
    """('ok', json) | ('error', {type, message}) | ('hang', {}) | ('crash', {rc, tail})."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        tail = ((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))[-2000:]
        return "hang", {"tail": tail}
    for line in p.stdout.splitlines():
        if line.startswith("CHILD-JSON "):
            return "ok", json.loads(line[len("CHILD-JSON "):])
        if line.startswith("CHILD-ERROR "):
            return "error", json.loads(line[len("CHILD-ERROR "):])
    return "crash", {"rc": p.returncode, "tail": (p.stdout + p.stderr)[-3000:]}


def check(name: str, out: dict, host_map: np.ndarray | None) -> bool:
    x = np.frombuffer(bytes.fromhex(out["x"]), np.float16).reshape(ROWS, COLS)
    image = np.frombuffer(bytes.fromhex(out["image"]), np.uint8)
    maps = np.frombuffer(bytes.fromhex(out["maps"]), np.int64)
    built = maps[:16].copy()
    status, x_address = int(maps[47]), int(maps[48])
    col0, row0 = COORD
    want = expected_image(x, row0, col0)
    lay = smem_layout_image(x, row0, col0)
    if lay is not None:
        print(f"  SmemLayout(K, 128B, 16-bit, 64, 64) image == TMA-swizzle expectation: {bool(np.array_equal(lay, want))}")
    print(f"  mbarrier wait: {'gave up after 2^20 tries (the copy never completed)' if status < 0 else f'{status} try_wait tries'}")
    scratch = [j for j in range(16, 32) if np.array_equal(maps[j:j + 16], built)]
    print(f"  scratch map the TMA used (maps[16:47], 128-aligned) equals the built map: "
          f"{'yes, at word ' + str(scratch[0]) if scratch else 'NO'}")
    print(f"  global address given to tensormap.replace: 0x{x_address:x}; {find_address(built, x_address)}")
    show_maps(built.view(np.uint8), host_map, "device-built vs the driver's encoding")
    wrong = image != want
    chunks = (image.reshape(-1, 16) != want.reshape(-1, 16)).any(axis=1)
    good = not wrong.any() and status >= 0
    print(f"RESULT {name}: {'PASS' if good else 'FAIL'}: image {int(wrong.sum())} of 8192 bytes wrong, "
          f"{int(chunks.sum())} of 512 16-byte chunks wrong; wait {'ok' if status >= 0 else 'timed out'}")
    if wrong.any():
        alts = {"no swizzle (plain row-major box)": expected_image(x, row0, col0, swizzle=False),
                "coordinates swapped (rows 64.., cols 128..)": expected_image(x, col0, row0),
                "box at (0, 0)": expected_image(x, 0, 0),
                "all zeros": np.zeros(8192, np.uint8)}
        for label, alt in alts.items():
            n = int((image != alt).sum())
            print(f"  vs {label}: {n} bytes differ{'  <-- matches' if n == 0 else ''}")
        bad = np.flatnonzero(chunks)[:4]
        for c in bad:
            print(f"  chunk {c} (line {c // 8}, slot {c % 8}): got {image[16 * c:16 * c + 16].tobytes().hex()} "
                  f"want {want[16 * c:16 * c + 16].tobytes().hex()}")
    return good


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        return child(sys.argv[2:])
    parser = argparse.ArgumentParser()
    parser.add_argument("vmfb", nargs="+")
    parser.add_argument("--driver", default="cuda")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per child process")
    args = parser.parse_args()

    print("== driver encoding (cuTensorMapEncodeTiled via cuda.bindings)")
    kind, enc = spawn(["encode"], args.timeout)
    host_map = None
    if kind == "ok":
        host_map = np.frombuffer(bytes.fromhex(enc["map"]), np.uint8)
        print(f"  encoded for a cuMemAlloc buffer at 0x{enc['address']:x}; "
              f"{find_address(host_map.view(np.uint64), enc['address'])}")
        show_maps(host_map, None, "driver")
    else:
        print(f"  host encoding unavailable ({kind}): {enc.get('type', '')} {enc.get('message', enc.get('tail', ''))}")

    results = {}
    for path in args.vmfb:
        name = os.path.basename(path)
        template = "template" in name
        how = ("host template, global address replaced" if template else "map built from zero bytes"
               + (", copied by tensormap.cp_fenceproxy" if "cpfp" in name else ", copied by st.global + fence.proxy"))
        print(f"== {name} ({how})")
        if template and host_map is None:
            print(f"RESULT {name}: SKIP: the template variant needs the driver's encoding")
            results[name] = "SKIP"
            continue
        kind, out = spawn(["probe", path, args.driver] + ([host_map.tobytes().hex()] if template else []),
                          args.timeout)
        if kind == "ok":
            results[name] = "PASS" if check(name, out, host_map) else "FAIL"
        elif kind == "error":
            print(f"RESULT {name}: ERROR: {out['type']}: {out['message']}")
            print("  " + out["trace"].strip().replace("\n", "\n  "))
            results[name] = "ERROR"
        elif kind == "hang":
            print(f"RESULT {name}: HANG: no result within {args.timeout:.0f} s (child killed)")
            results[name] = "HANG"
        else:
            print(f"RESULT {name}: ERROR: child exited {out['rc']} without a result:\n{out['tail']}")
            results[name] = "ERROR"
    print("SUMMARY " + " ".join(f"{k}={v}" for k, v in results.items()))
    return 0 if results and all(v == "PASS" for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
