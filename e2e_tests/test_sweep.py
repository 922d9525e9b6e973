"""A seeded randomized sweep: random target, dtype, kernel config and shape, checked exactly on the
lane executor. 30 cases in the default set (240 with `-m exhaustive`); the seed changes daily (printed in each case's id), so CI walks
new corners of the config space while every failure stays reproducible:

    MMAFLOW_SWEEP_SEED=20261122 pytest e2e_tests/test_sweep.py
"""

from __future__ import annotations

import datetime
import os
import random

import pytest
from conftest import matmul_module, simulate

from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.errors import MmaflowError
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.kernels.common.tiles import matching_intrinsics, validate
from mmaflow.compiler.target.intrinsics import TYPE_BITS
from mmaflow.compiler.target.targets import TARGETS

SEED = int(os.environ.get("MMAFLOW_SWEEP_SEED", datetime.date.today().strftime("%Y%m%d")))
CASES = 30  # in the default set; `-m exhaustive` draws EXHAUSTIVE_CASES more from the same seed
EXHAUSTIVE_CASES = 210
DTYPES = [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("i8", "i32"), ("f8E4M3FNUZ", "f32"), ("f8E4M3FN", "f32")]


def _draw(rng: random.Random):
    while True:
        target = TARGETS[rng.choice(["gfx1100", "gfx1201", "gfx942", "gfx950", "sm_80", "sm_90a"])]
        a_t, c_t = rng.choice(DTYPES)
        wave = rng.choice(target.wave_sizes)
        probe = Contraction(256, 256, 256, 1, a_t, a_t, c_t)
        intrs = matching_intrinsics(target, probe, wave)
        if not intrs:
            continue
        intr = rng.choice(intrs)
        bits = TYPE_BITS[a_t]
        waves_m, waves_n = rng.choice([1, 2]), rng.choice([1, 2, 4])
        wt_m = intr.m * rng.choice([1, 2, 4])
        wt_n = intr.n * rng.choice([1, 2, 4])
        tile_k = intr.k * rng.choice([1, 2, 4])
        if tile_k * bits // 8 > 128:  # keep the LDS tile modest
            continue
        pad = rng.choice([0, 128 // bits, 256 // bits])
        stages = rng.choice([1, 1, 2, 3, 4])  # an LDS ring on either vendor (NVIDIA's may not fit: redrawn)
        cfg = KernelConfig(intr.name, wave, waves_m * wt_m, waves_n * wt_n, tile_k, waves_m, waves_n, pad, stages)
        m = cfg.tile_m * rng.choice([1, 2])
        n = cfg.tile_n * rng.choice([1, 2])
        k = tile_k * rng.choice([1, 2, 3])
        if m > 256 or n > 256 or k > 256:
            continue
        try:
            validate(cfg, target, Contraction(m, n, k, 1, a_t, a_t, c_t))
        except MmaflowError:
            continue
        return target.name, a_t, c_t, cfg, (m, n, k)


def _cases():
    rng = random.Random(SEED)
    out = []
    for i in range(CASES + EXHAUSTIVE_CASES):
        target, a_t, c_t, cfg, (m, n, k) = _draw(rng)
        cid = (
            f"seed{SEED}-{i}-{target}-{a_t}-{c_t}-{m}x{n}x{k}-{cfg.intrinsic}-w{cfg.wave_size}-"
            f"t{cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k}-v{cfg.waves_m}x{cfg.waves_n}-p{cfg.lds_pad}-s{cfg.stages}"
        )
        out.append(
            pytest.param(target, a_t, c_t, cfg, m, n, k, id=cid, marks=() if i < CASES else pytest.mark.exhaustive)
        )
    return out


@pytest.mark.parametrize("target,a_type,c_type,cfg,m,n,k", _cases())
def test_random_config(target, a_type, c_type, cfg, m, n, k):
    overrides = {key: v for key, v in cfg.to_dict().items()}
    r = simulate(matmul_module(m, n, k, a_type, c_type), target, overrides, seed=k, exact=True)
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:2]
