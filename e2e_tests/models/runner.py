"""Run a compiled corpus model (.vmfb) with its parameter archive (.irpa) through iree.runtime.

Needs only numpy, ml_dtypes (for bf16) and iree-base-runtime: no torch, no iree-turbine, so it
works in mmaflow's dev venv and on GPU machines. Corpus artifacts (see generate.py
`write_parameters`) live in one folder as

    <name>_<dtype>.irpa         parameters, keys = the names in `#flow.parameter.named<"model"::KEY>`
    <name>_<dtype>.input0.npy   input 0 in float32 (values exactly representable in <dtype>)
    <name>_<dtype>.ref.npy      float32 reference output (definitions.reference)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

PARAMETER_SCOPE = "model"


def np_dtype(dtype: str):
    if dtype == "f16":
        return np.dtype(np.float16)
    if dtype == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if dtype == "f32":
        return np.dtype(np.float32)
    raise ValueError(f"unknown dtype {dtype!r}")


def load_artifacts(folder, name: str, dtype: str):
    """(irpa path, inputs cast to `dtype`, float32 reference) for one corpus entry."""
    folder = Path(folder)
    stem = f"{name}_{dtype}"
    inputs = []
    i = 0
    while (folder / f"{stem}.input{i}.npy").exists():
        inputs.append(np.load(folder / f"{stem}.input{i}.npy").astype(np_dtype(dtype)))
        i += 1
    ref = np.load(folder / f"{stem}.ref.npy")
    return folder / f"{stem}.irpa", inputs, ref


def run_vmfb(
    vmfb_path, irpa_path, inputs, *, driver: str = "local-task", function: str = "main", scope: str = PARAMETER_SCOPE
) -> list[np.ndarray]:
    """Load `vmfb_path` with the parameters of `irpa_path` under `scope`, call `function` and
    return its results as float32 numpy arrays. driver: "local-task" (llvm-cpu), "cuda", "hip"."""
    import iree.runtime as rt

    config = rt.Config(driver)
    index = rt.ParameterIndex()
    index.load(str(irpa_path))  # mmaps the archive
    params = rt.create_io_parameters_module(config.vm_instance, index.create_provider(scope=scope))
    vmfb = rt.VmModule.mmap(config.vm_instance, str(vmfb_path))
    ctx = rt.SystemContext(vm_modules=[params, vmfb], config=config)  # hal module goes first
    results = ctx.modules[vmfb.name][function](*inputs)
    if not isinstance(results, (list, tuple)):
        results = [results]
    return [np.asarray(r.to_host()).astype(np.float32) for r in results]


def errors(out: np.ndarray, ref: np.ndarray) -> dict:
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    return {
        "max_abs": float(np.max(np.abs(out - ref))),
        "rel_l2": float(np.linalg.norm(out - ref) / np.linalg.norm(ref)),
        "finite": bool(np.isfinite(out).all()),
    }
