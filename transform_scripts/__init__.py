"""Transform-dialect scripts (package data). Each ``*.mlir`` file is also runnable with stock iree-opt."""
