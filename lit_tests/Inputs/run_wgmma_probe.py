"""Run the compiled wgmma probe(s) on a CUDA device and check them against numpy (issue 16).

    python run_wgmma_probe.py [--driver cuda] probe_a.vmfb [probe_b.vmfb ...]

Each .vmfb is ``wgmma_probe_nvvm.mlir`` after ``mmaflow opt --from hand-back --target sm_90a``
and ``iree-compile --compile-from=executable-sources`` (see lit_tests/isa/wgmma_probe.test):
C = A @ B for A, B 64x64 f16, C f32. Two inputs per module: small integers (every product
and sum exact in f32, so C must equal numpy's exactly) and normal-distributed values
(checked to a relative tolerance). Prints one line per module and input; exits 1 on a mismatch.
"""

import sys

import numpy as np
import iree.runtime as rt


def main() -> int:
    args = sys.argv[1:]
    driver = "cuda"
    if args[:1] == ["--driver"]:
        driver, args = args[1], args[2:]
    ok = True
    rng = np.random.default_rng(16)
    inputs = {
        "ints": (rng.integers(-2, 3, (64, 64)).astype(np.float16), rng.integers(-2, 3, (64, 64)).astype(np.float16)),
        "randn": (rng.standard_normal((64, 64)).astype(np.float16), rng.standard_normal((64, 64)).astype(np.float16)),
    }
    for path in args:
        config = rt.Config(driver)
        ctx = rt.SystemContext(config=config)
        with open(path, "rb") as f:
            ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, f.read()))
        fn = ctx.modules.module["probe"]
        for name, (a, b) in inputs.items():
            got = np.asarray(fn(a, b).to_host())
            want = a.astype(np.float32) @ b.astype(np.float32)
            err = np.abs(got - want)
            if name == "ints":
                good = bool(np.array_equal(got, want))
            else:
                good = bool(np.allclose(got, want, rtol=1e-3, atol=1e-3))
            ok &= good
            bad = np.argwhere(err > 1e-3)
            print(f"{path} {name}: {'OK' if good else 'MISMATCH'} max|err| {err.max():.3g}, "
                  f"{len(bad)} of 4096 wrong" + (f", first wrong (row, col) {bad[:4].tolist()}" if len(bad) else ""))
            if not good and name == "ints":
                # where the wrong values came from: is got a permutation of want's rows/cols?
                for r, c in bad[:2].tolist():
                    hits = np.argwhere(want == got[r, c])
                    print(f"  got[{r},{c}] = {got[r, c]}, want {want[r, c]}; want holds that value at {hits[:4].tolist()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
