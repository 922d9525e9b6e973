"""Run 18 call 3: where the fused epilogue's time goes. `mmaflow bench --variants` with its cases
replaced by the 4096^3 f16-out epilogues from cheapest to gelu (each still checked against numpy):
cast to f16 only; + bias over columns; + relu; + erf gelu. Run as this file's `bench ...` on this
machine (prepare) and `dev ...` on the GPU machine (runtime.bench with the same references)."""
import sys
import numpy as np
from mmaflow.runtime import modules, numerics
modules.EPILOGUES["cast_f16"] = dict(out_type="f16", body="%res = arith.truncf %acc : f32 to f16")
modules.EPILOGUES["bias_n_f16"] = dict(out_type="f16", inputs=[("f32", ("n",))],
                                       body="%t = arith.addf %acc, %x0 : f32\n%res = arith.truncf %t : f32 to f16")
numerics.EPILOGUE_REFERENCES["cast_f16"] = numerics.EpilogueReference(lambda acc: acc, 1.0, 0)
numerics.EPILOGUE_REFERENCES["bias_n_f16"] = numerics.EpilogueReference(lambda acc, b: acc + b[..., None, :], 1.0, 1)
if sys.argv[1] == "bench":
    from mmaflow.runtime import bench
    from mmaflow.runtime.modules import EPILOGUES, epilogue_module

    def perf_cases(target):
        s, f16 = 4096, "f16"
        ab = [((s, s), f16), ((s, s), f16)]
        out = []
        for name, label in (("cast_f16", "cast -> f16"), ("bias_n_f16", "bias -> f16"),
                            ("bias_n_relu_f16", "bias+relu -> f16"), ("bias_n_gelu_f16", "bias+gelu -> f16")):
            spec = EPILOGUES[name]
            out.append(bench._case(f"{label} 4096^3", epilogue_module(s, s, s, **spec),
                                   ab + [((s,), "f32")] * len(spec.get("inputs", [])), out="f16", epilogue=name,
                                   torch_eager="addmm_gelu" if name == "bias_n_gelu_f16" else None))
        return out
    bench.perf_cases = perf_cases
    sys.path.insert(0, "docs/bench/run18/scripts")
    sys.argv = ["exp.py"] + sys.argv[1:]
    import runpy
    runpy.run_path("docs/bench/run18/scripts/exp.py", run_name="__main__")
else:
    from mmaflow.runtime.bench import main
    sys.exit(main(sys.argv[2:]))
