# lit configuration for mmaflow: one folder per pipeline stage, FileCheck on printed IR / ISA.
#
# Tools: `mmaflow` (this checkout, run through the current Python), stock `iree-compile` and
# `iree-opt` from the pinned iree-base-compiler wheel, and the pip `filecheck` port (the wheel
# ships no LLVM FileCheck).

import os
import shutil
import sys

import lit.formats

config.name = "mmaflow"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")
config.excludes = ["Inputs", "lit.cfg.py"]

# The long tail (README: `lit -v lit_tests -Dset=exhaustive`, the second test command, which CI runs
# too): the slowest tests, 19-83 s each on a 2-core workstation (`lit --time-tests` at fabbc47; at
# 04bb09e distribute/wgmma.test, 24 s, and isa/final_isa.test, 20 s, joined them: names match in any
# directory, so layout/wgmma.test, 5 s, goes along; on 2026-11-30 the six slowest of the rest, 16-24 s:
# normalize/unaligned, normalize/dynamic, cli/dump_after, configure/config, distribute/per_target,
# isa/fp8_mixed), kept out of the default set's 10-minute budget.
# `-Dset=exhaustive` runs only these; the default, the rest.
LONG = (
    "stock_route.test",
    "flash_attention_amd.test",
    "report.test",
    "flash_attention.test",
    "wgmma.test",
    "final_isa.test",
    "unaligned.test",
    "dynamic.test",
    "dump_after.test",
    "config.test",
    "per_target.test",
    "fp8_mixed.test",
    "packed_formats.test",
)
SET = lit_config.params.get("set", "default")
if SET == "exhaustive":
    config.excludes += [
        name
        for _, _, files in os.walk(os.path.dirname(__file__))
        for name in files
        if name.endswith((".test", ".mlir")) and name not in LONG
    ]
elif SET == "default":
    config.excludes += list(LONG)
else:
    lit_config.fatal(f"-Dset={SET}: the sets are default and exhaustive")

bindir = os.path.dirname(sys.executable)
path = os.pathsep.join([bindir, os.environ.get("PATH", "")])
config.environment["PATH"] = path
config.environment["FILECHECK_OPTS"] = "--dump-input=fail"
for var in ("HOME", "TMPDIR", "XDG_CACHE_HOME"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

filecheck = shutil.which("FileCheck", path=path) or shutil.which("filecheck", path=path)
if filecheck is None:
    lit_config.fatal("no FileCheck: pip install filecheck")
for tool in ("iree-compile", "iree-opt", "mmaflow", "mmaflow-codegen"):
    if shutil.which(tool, path=path) is None:
        lit_config.fatal(f"{tool} is not on PATH ({bindir}); pip install -e '.[test]' first")

repo = os.path.dirname(config.test_source_root)
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%scripts", os.path.join(repo, "transform_scripts")))
config.substitutions.append(("%examples", os.path.join(repo, "examples")))
config.substitutions.append(("%models", os.path.join(repo, "e2e_tests", "models")))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("FileCheck", filecheck))
