"""Stage `script`: run ``transform_scripts/matmul.mlir`` with the config's numbers.

The script is a plain transform-dialect file whose tunable numbers are ``transform.param.constant``
ops tagged ``mmaflow.param = "<config field>"``; the thread mapping's ``workgroup_dims`` and
``subgroup_size`` come from the config too. This stage parses the script with the MLIR bindings,
sets those values, and applies it with the transform interpreter (IREE's own transform ops
included). Result: tiled, LDS-promoted, vectorized, bufferized IR (see the script's header).
"""

from __future__ import annotations

from importlib import resources

from iree.compiler import ir
from iree.compiler.dialects.transform import interpreter

from mmaflow.compiler.core.attrs import SCRIPT_PARAM, read_config, read_problem
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import ops_named, parse_module, str_attr

NAME = "script"
SCRIPT = "matmul.mlir"


def script_text(name: str = SCRIPT) -> str:
    return resources.files("mmaflow.transform_scripts").joinpath(name).read_text()


def instantiate(ctx: ir.Context, cfg, name: str = SCRIPT) -> ir.Module:
    """Parse the script and set its parameters from ``cfg``; return the script module."""
    script = parse_module(script_text(name), ctx, source=f"transform_scripts/{name}")
    i64 = ir.IntegerType.get_signless(64, ctx)
    seen = set()
    for op in ops_named(script.operation, "transform.param.constant"):
        key = str_attr(op, SCRIPT_PARAM)
        if key is None:
            continue
        op.attributes["value"] = ir.IntegerAttr.get(i64, getattr(cfg, key))
        seen.add(key)
    expected = {"tile_m", "tile_n", "tile_k", "waves_m", "waves_n"}
    if seen != expected:
        raise CodegenError(
            f"transform_scripts/{name} must define mmaflow.param constants {sorted(expected)}, found {sorted(seen)}",
            stage=NAME,
        )
    (mapping,) = ops_named(script.operation, "transform.iree.map_nested_forall_to_gpu_threads")
    with ctx:
        mapping.attributes["workgroup_dims"] = ir.DenseI64ArrayAttr.get(
            [cfg.script_threads, 1, 1]
        )  # (no producer, K split)
        mapping.attributes["subgroup_size"] = ir.IntegerAttr.get(i64, cfg.wave_size)
    return script


def script_for(func: ir.Operation) -> str:
    """matmul.mlir, or batch_matmul.mlir when the contraction has a batch loop."""
    return "batch_matmul.mlir" if read_problem(func).batched else SCRIPT


def run_script(module: ir.Module, func: ir.Operation) -> None:
    cfg = read_config(func)
    ctx = module.context
    script = instantiate(ctx, cfg, script_for(func))
    (entry,) = [
        o
        for o in ops_named(script.operation, "transform.named_sequence")
        if str_attr(o, "sym_name") == "__transform_main"
    ]
    try:
        interpreter.apply_named_sequence(module.operation, entry, script)
    except (ValueError, ir.MLIRError) as e:
        raise CodegenError(f"the transform script failed: {e}", stage=NAME) from None
