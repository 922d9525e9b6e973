#!/bin/bash
# Run 14 call 9 preparation.
MMAFLOW_CODEGEN_SERVER=0 .venv/bin/mmaflow bench --target sm_90a --sizes 4096 --dtype bf16 --prepare-only .devrun/w6/bf
