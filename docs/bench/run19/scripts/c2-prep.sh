#!/bin/bash
# Run 19 call 2 preparation: the model corpus built three ways at 29fdbfa, from a worktree of
# it so that later or uncommitted work cannot leak in; the sizes come from c1-prep.sh (.devrun/r19a/sizes).
set -e
git worktree add /tmp/wt 29fdbfa -f
mkdir -p /tmp/wtpkg/mmaflow && ln -sfn /tmp/wt/compiler /tmp/wtpkg/mmaflow/compiler && ln -sfn /tmp/wt/runtime /tmp/wtpkg/mmaflow/runtime
cd /tmp/wt && MMAFLOW_CODEGEN_SERVER=0 PYTHONPATH=/tmp/wtpkg "$OLDPWD/.venv/bin/python" -m mmaflow.compiler.cli bench --models --prepare-only "$OLDPWD/.devrun/r19m"
