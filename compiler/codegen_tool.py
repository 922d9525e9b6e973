"""`mmaflow-codegen`: the per-executable codegen as a tool for iree-compile's preprocess hook.

    iree-compile in.mlir --iree-hal-target-device=hip --iree-rocm-target=gfx1100 \\
        --iree-hal-preprocess-executables-with=mmaflow-codegen -o out.vmfb

IREE runs the tool once per hal.executable at the end of the executable-sources phase (stdin:
the executable as text; stdout: its replacement). The tool runs exactly the pipeline
``mmaflow compile`` runs (``pipeline.codegen_executable``). It is its own guard: when it takes a
dispatch it checks that the function it returns is handed back (no_pipeline) and holds the
intended matrix instructions; any failure exits non-zero, which makes iree-compile fail rather
than fall back to its own codegen.
"""

from __future__ import annotations

import argparse
import sys

from .config import parse_overrides
from .errors import MmaflowError
from .pipeline import CodegenOptions, codegen_executable_text
from .verify import check_handed_back


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="mmaflow-codegen", description=__doc__.split("\n")[0])
    p.add_argument("--target", help="mmaflow target (default: the executable variant's arch)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--quiet", action="store_true", help="do not log decisions on stderr")
    args = p.parse_args(argv)
    try:
        options = CodegenOptions(target=args.target, overrides=parse_overrides(args.config))
        result = codegen_executable_text(sys.stdin.read(), options)
        if result.taken:
            check_handed_back(result.text, result.name)
    except MmaflowError as e:
        print(f"mmaflow-codegen: error: {e}", file=sys.stderr)
        return e.exit_code
    if not args.quiet:
        for line in result.log:
            print(line, file=sys.stderr)
    sys.stdout.write(result.text)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
