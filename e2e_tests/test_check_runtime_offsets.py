"""The lane-executor check's call sites when tensors sit at byte offsets known only at run time.

IREE's dispatch of a Llama decoder step's attention (``data/llama_decode_attention_dispatch.mlir``,
executable sources as IREE formed them) reads Q at offset 0 of binding 0 and K and V in the same
binding at offsets two push constants give, with only a divisor promised (``udiv = 1024``); K's
and V's key length is a run-time size. ``call_sites`` chooses those offsets: each tensor after the
binding's other tensors, at the first multiple of 64 and of the promised divisor (at least a
promised ``umin``, at most a promised ``umax``). No GPU, no compiler: the dispatch is only parsed.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mmaflow.compiler.core import dynamic
from mmaflow.compiler.core.mlir import new_context, ops_named, parse_module
from mmaflow.runtime.model_check import FrontDispatch, _attention_subspans, call_sites
from mmaflow.runtime.reference import InterpretError

DISPATCH = Path(__file__).parent / "data" / "llama_decode_attention_dispatch.mlir"
K_OFFSET, V_OFFSET = "%12<udiv = 1024>", "%17<udiv = 1024>"  # the promises on K's and V's offsets


def front(text: str | None = None) -> FrontDispatch:
    """The dispatch parsed as ``check_executable`` parses it (``text``: an edited copy)."""
    return FrontDispatch(parse_module(text or DISPATCH.read_text(), new_context(), source=DISPATCH.name))


def edited(*pairs: tuple[str, str]) -> str:
    """The dispatch's text with each (old, new) replaced (old must be there)."""
    text = DISPATCH.read_text()
    for old, new in pairs:
        assert old in text
        text = text.replace(old, new)
    return text


def problem(f: FrontDispatch):
    """What ``call_sites`` reads of the attention problem: the key length, as select traces it
    (two workload ordinals: K's and V's)."""
    ordinals = ops_named(f.func, "iree_tensor_ext.dispatch.workload.ordinal")
    return SimpleNamespace(dynamic=[dynamic.merge([dynamic.trace("k2", op.results[0]) for op in ordinals])])


def regions(f: FrontDispatch, constants: list[int]) -> dict:
    """Q, K, V and O's regions for one call site, found through the attention op."""
    lay = f.layout(constants)
    by_subspan = dict(lay.inputs + lay.outputs)
    return {role: by_subspan[value] for role, value in _attention_subspans(f.func).items()}


def overlap(a, b) -> bool:
    return a.binding == b.binding and a.start < b.end and b.start < a.end


@pytest.mark.parametrize("k2", [1, 300])
def test_offsets_placed_after_the_binding_s_other_tensors(k2):
    f = front()
    (constants,) = call_sites(f.func, {"k2": k2}, problem(f))
    r = regions(f, constants)
    q, k, v, o = r["q"], r["k"], r["v"], r["o"]
    assert (q.binding, q.start, k.binding, v.binding, o.binding, o.start) == (0, 0, 0, 0, 1, 4096)
    assert k.shape == (32, k2, 64) and v.shape == (32, 64, k2)
    assert k.start % 1024 == 0 and v.start % 1024 == 0
    assert not overlap(k, q) and not overlap(v, k) and not overlap(v, q)
    assert k.start == 4096 and v.start == -(-k.end // 1024) * 1024  # the first place each may go


def test_call_sites_placed_independently():
    """Two call sites: the first pins K's offset (V goes after it), the second leaves it open
    and promises a larger divisor for V."""
    sizes = "<umin = 1, umax = 9007199254740992>"
    text = edited(
        (K_OFFSET, "%12[<umin = 1048576, umax = 1048576>, <udiv = 1024>]"),
        (V_OFFSET, "%17[<udiv = 1024>, <udiv = 4096>]"),
        (f"%22{sizes}", f"%22[{sizes}, {sizes}]"),
        (f"%27{sizes}", f"%27[{sizes}, {sizes}]"),
    )
    f = front(text)
    first, second = (regions(f, c) for c in call_sites(f.func, {"k2": 300}, problem(f)))
    assert first["k"].start == 1 << 20 and first["v"].start == first["k"].end  # (a multiple of 1024 already)
    assert second["k"].start == 4096 and second["v"].start % 4096 == 0 and second["v"].start >= second["k"].end
    assert not overlap(second["v"], second["k"])


def test_promised_umin_and_umax():
    """K at least its promised umin (rounded up to its divisor); V past its promised umax raises,
    naming its push constant, when the key length pushes it there."""
    f = front(edited((K_OFFSET, "%12<umin = 100000, udiv = 1024>")))
    (constants,) = call_sites(f.func, {"k2": 1}, problem(f))
    assert regions(f, constants)["k"].start == 100352  # 98 * 1024
    f = front(edited((V_OFFSET, "%17<umax = 65536, udiv = 1024>")))
    (constants,) = call_sites(f.func, {"k2": 1}, problem(f))
    assert regions(f, constants)["v"].start == 8192
    with pytest.raises(InterpretError, match="push constant 2 of call site 0.*at most 65536"):
        call_sites(f.func, {"k2": 300}, problem(f))


def test_push_constant_nobody_gives_raises():
    """A size not given, and an offset push constant that feeds more than the offset (here an
    addition), are not chosen: the check refuses them as before."""
    f = front()
    with pytest.raises(InterpretError, match="push constant 4 of call site 0 is not pinned"):
        call_sites(f.func, None, problem(f))
    text = edited(
        (
            "%12 = arith.index_castui %11 : i64 to index",
            "%12 = arith.index_castui %11 : i64 to index\n%k = arith.addi %12, %c4096 : index",
        ),
        (K_OFFSET, "%k<udiv = 1024>"),
    )
    f = front(text)
    with pytest.raises(InterpretError, match="push constant 0 of call site 0 is not pinned"):
        call_sites(f.func, {"k2": 300}, problem(f))
