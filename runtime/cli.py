"""`mmaflow run`: compile a single-matmul module, run it, check it against numpy.

Devices: auto (the target's GPU if IREE sees one, else the lane executor, saying so), hip, cuda,
sim (the lane executor: also reports LDS bank conflicts, access widths, barriers, races),
local-task (IREE's CPU pipeline: a reference run, not mmaflow's kernel).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from mmaflow.compiler.errors import InputError
from mmaflow.runtime import numerics
from mmaflow.runtime.api import compile_module, resolve_device, run_module


def _parse_dims(text: str | None, prob: dict) -> dict:
    """--dims m=300,n=200: a size for every dynamic dimension of the problem, and only those."""
    dynamic = [d["dim"] for d in prob.get("dynamic") or []]
    sizes = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, _, value = item.partition("=")
        key = key.strip().lower()
        if key not in ("batch", "m", "n", "k") or not value.strip().isdigit():
            raise InputError(f"--dims takes DIM=SIZE pairs with DIM one of batch, m, n, k; got {item!r}")
        sizes[key] = int(value)
    extra = [d for d in sizes if d not in dynamic]
    if extra:
        raise InputError(f"--dims gives {', '.join(extra)}, which the module has static")
    missing = [d for d in dynamic if d not in sizes]
    if missing:
        raise InputError(f"the module has dynamic {', '.join(missing)}: give the run-time sizes with "
                         f"--dims {','.join(f'{d}=SIZE' for d in missing)}")
    return sizes


def run_command(args, source: str, options) -> int:
    device = resolve_device(args.target, args.device)
    art = compile_module(source, args.target, config=options.overrides, lower=device not in ("sim", "local-task"))
    for line in art.log:
        print(line, file=sys.stderr)
    prob = art.problem
    if prob["batch"] > 1 or prob["a_transposed"] or prob["b_transposed"] or prob.get("bindings") != [0, 1, 2]:
        if prob.get("bindings") != [0, 1, 2]:
            raise InputError("mmaflow run checks modules whose function takes (A, B) and returns C = A @ B",
                             hint="for a fused epilogue, call mmaflow.runtime.run_module with all its inputs "
                                  "and compare with your reference")
    sizes = _parse_dims(getattr(args, "dims", None), prob)
    rng = np.random.default_rng(args.seed)
    batch, m, n, k = (sizes.get(d, prob[d]) for d in ("batch", "m", "n", "k"))
    lead = (batch,) if batch > 1 else ()
    a_shape = lead + ((k, m) if prob["a_transposed"] else (m, k))
    b_shape = lead + ((n, k) if prob["b_transposed"] else (k, n))
    a = numerics.random_matrix(rng, a_shape, prob["a_type"], unsigned=prob["unsigned_a"])
    b = numerics.random_matrix(rng, b_shape, prob["b_type"], unsigned=prob["unsigned_b"])
    out, stats = run_module(art, [a, b], device=device)
    a_log = np.swapaxes(a, -1, -2) if prob["a_transposed"] else a
    b_log = np.swapaxes(b, -1, -2) if prob["b_transposed"] else b
    ref, tol = numerics.matmul_reference(a_log, b_log, prob["c_type"], unsigned_a=prob["unsigned_a"],
                                         unsigned_b=prob["unsigned_b"])
    check = numerics.compare(np.asarray(out).reshape(ref.shape), ref, tol, out_type=prob["c_type"])
    report = {"target": args.target, "device": device, "problem": prob, "check": check.__dict__,
              "counters": stats.to_dict() if stats is not None else None}
    if args.json:
        print(json.dumps(report, default=str, indent=1))
    else:
        dyn = f" (dynamic: {', '.join(f'{d}={v}' for d, v in sizes.items())})" if sizes else ""
        print(f"mmaflow run: {args.target} on {device}: {m}x{n}x{k} {prob['a_type']} -> {prob['c_type']}{dyn}")
        print(f"  {check.line()}")
        if stats is not None:
            d = stats.to_dict()
            print(f"  lane executor: {d['seconds']:.2f} s, {d['matrix_ops']} matrix instructions (per wave), "
                  f"{d['barriers']} barriers, {len(d['races'])} races")
            print(f"  LDS: {d['lds_access_pieces']} accesses, {d['lds_conflict_cycles']} bank-conflict cycles "
                  f"({d['lds_cycles']} cycles vs {d['lds_ideal_cycles']} conflict-free)")
            print(f"  global loads by bytes per lane: {d['global_loads_by_bytes']}, "
                  f"stores: {d['global_stores_by_bytes']}")
            for race in d["races"]:
                print(f"  race: {race}")
    failed = not check.passed or (stats is not None and stats.races)
    return 1 if failed else 0
