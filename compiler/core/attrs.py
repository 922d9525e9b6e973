"""Every attribute mmaflow writes into the IR, with one typed reader and writer each.

Stages pass data to each other only through the IR, and only through these attributes: a stage
never knows which other stage wrote one (IREE keeps its codegen attributes the same way, in
``IREECodegenAttrs.cpp``, with ``getTranslationInfo`` / ``setTranslationInfo``). The table in
``docs/ARCHITECTURE.md`` lists each attribute's writer and readers.

    name                  on                        value
    mmaflow.dispatch      the dispatch func.func    unit: the function mmaflow compiles (scripts match it)
    mmaflow.contraction   the linalg contraction    unit
    mmaflow.epilogue      epilogue generics / func  unit: the fused consumers, later their scalar function
    mmaflow.target        the dispatch func.func    string: target name (``targets.TARGETS``)
    mmaflow.problem       the dispatch func.func    dictionary: ``problem.Contraction``
    mmaflow.config        the dispatch func.func    dictionary: ``config.KernelConfig``
    mmaflow.prologue      a private func.func       unit: values computed before the tensor program
    mmaflow.expect        the dispatch func.func    dictionary: ``Expectations`` (what verify checks)
    mmaflow.attention     the dispatch func.func    dictionary: ``attention.AttentionDispatch`` (what it computes,
                                                    where Q, K, V, O live), written by select
    mmaflow.attention_expect  the dispatch func.func  dictionary: ``AttentionExpectations`` (what verify
                                                    checks of the flash-attention kernel)
    mmaflow.version       a version's dispatch func  dictionary: ``Version`` (its run-time condition), on the
                                                    fast copy `version` forks, until hand-back joins it
    mmaflow.versions      the dispatch func.func    array of ``Version``: the executable's other kernels (a
                                                    function and export each: condition, problem, config,
                                                    expect, export)
    mmaflow.ring          LDS ring ops              unit: async copies or LDS stores, fragment loads and
                                                    the one barrier per K tile of an LDS ring, ordered by
                                                    `distribute` (the `barriers` stage leaves them alone)

Written for NVVM, not read by mmaflow's stages (IREE's lowering keeps it on the kernel):

    nvvm.cluster_dim      the dispatch func.func    array<i32: x, y, z>: the thread block cluster shape
                                                    (PTX ``.reqnctapercluster``), the warpgroup kernel's
                                                    ``cluster`` config; the lane executor reads it
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, is_dataclass

from iree.compiler import ir

from mmaflow.compiler.core.attention import AttentionDispatch
from mmaflow.compiler.core.config import KernelConfig
from mmaflow.compiler.core.copy import CopyDispatch
from mmaflow.compiler.core.errors import CodegenError
from mmaflow.compiler.core.mlir import walk
from mmaflow.compiler.core.problem import Contraction
from mmaflow.compiler.core.quantized import WeightOnlyMatmul

DISPATCH = "mmaflow.dispatch"
CONTRACTION = "mmaflow.contraction"
EPILOGUE = "mmaflow.epilogue"
SCALED = "mmaflow.scaled"  # the plain contraction normalize made of a block-scaled one (scales in the problem)
TARGET = "mmaflow.target"
PROBLEM = "mmaflow.problem"
CONFIG = "mmaflow.config"
PROLOGUE = "mmaflow.prologue"
EXPECT = "mmaflow.expect"
RING = "mmaflow.ring"
ATTENTION = "mmaflow.attention"
ATTENTION_EXPECT = "mmaflow.attention_expect"
WEIGHT_ONLY = "mmaflow.weight_only"  # a weight-only quantized matmul select took (``quantized.WeightOnlyMatmul``)
COPY = "mmaflow.copy"  # a copy dispatch select took (``copy.CopyDispatch``)
VERSION = "mmaflow.version"
VERSIONS = "mmaflow.versions"
# A versioned dispatch's own kernel (the one built anyway, stage `version`): its function and export
# are the dispatch's name plus this; the name itself is the host's export, its first version's kernel.
FALLBACK_SUFFIX = "_else"
CLUSTER_DIM = "nvvm.cluster_dim"
# In the transform scripts (not on payload IR): the config field a transform.param.constant takes.
SCRIPT_PARAM = "mmaflow.param"

ALL = (
    DISPATCH,
    CONTRACTION,
    EPILOGUE,
    TARGET,
    PROBLEM,
    CONFIG,
    PROLOGUE,
    EXPECT,
    RING,
    ATTENTION,
    ATTENTION_EXPECT,
    WEIGHT_ONLY,
    COPY,
    VERSION,
    VERSIONS,
)


# ---- plain values <-> attributes ---------------------------------------------------------------
def to_attr(value) -> ir.Attribute:
    """A Python value as an attribute: dataclass/dict -> dictionary (None fields left out),
    bool -> BoolAttr, int -> i64, float -> f64, str -> string, tuple/list -> array (a None element, e.g. a
    dynamic size in a shape, -> unit). Needs a context."""
    if is_dataclass(value):
        value = asdict(value)
    if isinstance(value, dict):
        return ir.DictAttr.get({k: to_attr(v) for k, v in sorted(value.items()) if v is not None})
    if isinstance(value, bool):
        return ir.BoolAttr.get(value)
    if isinstance(value, int):
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    if isinstance(value, float):
        return ir.FloatAttr.get_f64(value)
    if isinstance(value, str):
        return ir.StringAttr.get(value)
    if isinstance(value, (tuple, list)):
        return ir.ArrayAttr.get([ir.UnitAttr.get() if v is None else to_attr(v) for v in value])
    raise TypeError(f"no attribute form for {type(value).__name__}")


def from_attr(attr: ir.Attribute):
    """The inverse of ``to_attr``: dictionaries become dicts, arrays tuples."""
    if isinstance(attr, ir.DictAttr):
        return {attr[i].name: from_attr(attr[i].attr) for i in range(len(attr))}
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return attr.value
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    if isinstance(attr, ir.StringAttr):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return tuple(None if isinstance(a, ir.UnitAttr) else from_attr(a) for a in attr)
    raise CodegenError(f"unexpected attribute {attr} in an mmaflow attribute")


def _fill_optional(cls, d: dict) -> dict:
    """Fields of dataclass ``cls`` that may be None (``to_attr`` leaves those out) and were."""
    out = dict(d)
    for f in fields(cls):
        if f.name not in out and "None" in str(f.type):
            out[f.name] = None
    return out


def _get(op: ir.Operation, name: str) -> ir.Attribute:
    if name not in op.attributes:
        raise CodegenError(f"{op.name} has no {name}; the stage that writes it has not run")
    return op.attributes[name]


# ---- unit markers -----------------------------------------------------------------------------
def mark(op: ir.Operation, name: str) -> None:
    with op.context:
        op.attributes[name] = ir.UnitAttr.get()


def marked(op: ir.Operation, name: str) -> bool:
    return name in op.attributes


# ---- typed accessors --------------------------------------------------------------------------
def read_target_name(func: ir.Operation) -> str:
    """The target's name (``targets.read_target`` gives the ``Target``)."""
    return ir.StringAttr(_get(func, TARGET)).value


def write_target(func: ir.Operation, target) -> None:
    with func.context:
        func.attributes[TARGET] = ir.StringAttr.get(target.name)


def read_problem(func: ir.Operation):
    return _problem(from_attr(_get(func, PROBLEM)))


def _problem(d: dict):
    """A ``problem.Contraction`` from its attribute's dictionary (None fields were left out)."""
    d = dict(d)
    for role in ("a", "b", "c"):
        d[role] = {"offset": None, **d[role]}
    d["epilogue"] = tuple({**e, "at": {"offset": None, **e["at"]}} for e in d.get("epilogue", ()))
    if d.get("scales"):
        d["scales"] = {**d["scales"], **{r: {"offset": None, **d["scales"][r]} for r in ("a", "b")}}
    return Contraction.from_dict(_fill_optional(Contraction, d))


def write_problem(func: ir.Operation, problem) -> None:
    with func.context:
        func.attributes[PROBLEM] = to_attr(problem)


def read_config(func: ir.Operation):
    return KernelConfig.from_dict(from_attr(_get(func, CONFIG)))


def write_config(func: ir.Operation, cfg) -> None:
    with func.context:
        func.attributes[CONFIG] = to_attr(cfg.to_dict())


@dataclass(frozen=True)
class Expectations:
    """What the lowered kernel must show (``verify.check_isa``), recorded by `distribute`."""

    global_load_bits: int  # width of the global A/B loads the copies were planned with
    k_tiles: int  # K tiles the loop runs (0: dynamic K)
    mma_per_k_tile: int  # matrix instructions per K tile and wave
    async_copies: bool = False  # the loads are async copies into an LDS ring (cp.async), not register loads
    k_loop_barriers: int = 0  # workgroup barriers per iteration of the K loop (0: not checked)
    tma: bool | None = None  # the ring is filled by cp.async.bulk.tensor (TMA), not cp.async (None: no)
    cluster: int | None = None  # workgroups per thread block cluster, B multicast between them (None: no clusters)
    split_k: int | None = None  # workgroups per cluster splitting K, partials added over DSMEM (None: no split-K)
    # matrix instructions per K tile without the blocks whose results no workgroup stores (a static M or N under the
    # wave tile: LLVM may drop them); None: every block stores
    live_mma_per_k_tile: int | None = None
    tail_mma: int = 0  # matrix instructions a wave runs after the K loop (a tail shorter than a K tile)


def write_cluster_dim(func: ir.Operation, dims: tuple[int, int, int]) -> None:
    with func.context:
        func.attributes[CLUSTER_DIM] = ir.DenseI32ArrayAttr.get(list(dims))


def read_expect(func: ir.Operation) -> Expectations:
    return Expectations(**from_attr(_get(func, EXPECT)))


def write_expect(func: ir.Operation, expect: Expectations) -> None:
    with func.context:
        func.attributes[EXPECT] = to_attr(expect)


@dataclass(frozen=True)
class AttentionExpectations:
    """What the lowered flash-attention kernel must show (``verify.check_attention_isa``),
    recorded by the `flash-attention` stage from its plan."""

    mma_per_key_tile: int  # matrix instructions per warp and key tile: S = Q K^T plus O += P V
    key_tiles: int | None  # key tiles the loop runs (None: a run-time key length's)
    async_copies: bool  # K and V reach LDS by cp.async (a ring), not through registers
    barriers_per_key_tile: int
    instruction: str = "mma.sync"  # NVIDIA's: "mma.sync", or "wgmma.mma_async" (sm_90a's wgmma kernel)
    tma_copies: bool = False  # K and V reach shared memory by cp.async.bulk.tensor (a producer warpgroup)


def read_attention(func: ir.Operation):
    return AttentionDispatch.from_dict(from_attr(_get(func, ATTENTION)))


def write_attention(func: ir.Operation, dispatch) -> None:
    with func.context:
        func.attributes[ATTENTION] = to_attr(dispatch.to_dict())


def read_weight_only(func: ir.Operation) -> WeightOnlyMatmul:
    return WeightOnlyMatmul.from_dict(from_attr(_get(func, WEIGHT_ONLY)))


def write_weight_only(func: ir.Operation, record) -> None:
    with func.context:
        func.attributes[WEIGHT_ONLY] = to_attr(record.to_dict())


# The direct families' dispatches: kind -> (the attribute select writes, its record's class).
DIRECT_RECORDS = {
    "attention": (ATTENTION, AttentionDispatch),
    "weight_only": (WEIGHT_ONLY, WeightOnlyMatmul),
    "copy": (COPY, CopyDispatch),
}


def read_direct(func: ir.Operation, kind: str):
    name, cls = DIRECT_RECORDS[kind]
    return cls.from_dict(from_attr(_get(func, name)))


def write_direct(func: ir.Operation, kind: str, record) -> None:
    with func.context:
        func.attributes[DIRECT_RECORDS[kind][0]] = to_attr(record.to_dict())


def direct_kind(func: ir.Operation) -> str | None:
    """Which direct family builds the tagged dispatch (``"attention"``, ``"weight_only"``, ``"copy"``), None
    where the transform script's families do."""
    for kind, (name, _) in DIRECT_RECORDS.items():
        if name in func.attributes:
            return kind
    return None


def read_attention_expect(func: ir.Operation) -> AttentionExpectations:
    return AttentionExpectations(**_fill_optional(AttentionExpectations, from_attr(_get(func, ATTENTION_EXPECT))))


def write_attention_expect(func: ir.Operation, expect: AttentionExpectations) -> None:
    with func.context:
        func.attributes[ATTENTION_EXPECT] = to_attr(expect)


@dataclass(frozen=True)
class Version:
    """A kernel of a versioned dispatch (stage `version`): it runs where every size of ``dims`` is a
    multiple of ``divisor`` and, where ``at_most`` is set, at most that (``condition`` says so in
    words); ``problem``, ``config`` and ``expect`` are its own (filled in when hand-back joins it)."""

    condition: str
    dims: tuple
    divisor: int
    problem: object = None  # problem.Contraction
    config: object = None  # config.KernelConfig
    expect: Expectations | None = None
    at_most: int | None = None
    export: str | None = None  # its own hal.executable.export and function (= its kernel's name in the ISA)

    def to_dict(self) -> dict:
        return (
            {
                "condition": self.condition,
                "dims": list(self.dims),
                "divisor": self.divisor,
                "problem": self.problem.to_dict() if self.problem else None,
                "config": self.config.to_dict() if self.config else None,
                "expect": vars(self.expect) if self.expect else None,
            }
            | ({"at_most": self.at_most} if self.at_most else {})
            | ({"export": self.export} if self.export else {})
        )

    @staticmethod
    def from_dict(d: dict) -> "Version":
        return Version(
            d["condition"],
            tuple(d["dims"]),
            d["divisor"],
            _problem(d["problem"]) if d.get("problem") else None,
            KernelConfig.from_dict(d["config"]) if d.get("config") else None,
            Expectations(**d["expect"]) if d.get("expect") else None,
            d.get("at_most"),
            d.get("export"),
        )


def read_version(func: ir.Operation) -> Version:
    return Version.from_dict(from_attr(_get(func, VERSION)))


def write_version(func: ir.Operation, version: Version) -> None:
    with func.context:
        func.attributes[VERSION] = to_attr(version.to_dict())


def read_versions(func: ir.Operation) -> list[Version]:
    """The other kernels of a versioned dispatch ([] if it is one kernel)."""
    if VERSIONS not in func.attributes:
        return []
    return [Version.from_dict(d) for d in from_attr(func.attributes[VERSIONS])]


def write_versions(func: ir.Operation, versions: list[Version]) -> None:
    with func.context:
        func.attributes[VERSIONS] = ir.ArrayAttr.get([to_attr(v.to_dict()) for v in versions])
        if VERSION in func.attributes:
            del func.attributes[VERSION]


def dispatch_func(root) -> ir.Operation | None:
    """The function `select` tagged as mmaflow's dispatch, if any."""
    for op in walk(root):
        if op.name == "func.func" and DISPATCH in op.attributes:
            return op
    return None


def marked_func(root, name: str) -> ir.Operation | None:
    """The one func.func under ``root`` carrying the unit attribute ``name`` (None if none)."""
    found = [op for op in walk(root) if op.name == "func.func" and name in op.attributes]
    if len(found) > 1:
        raise CodegenError(f"{len(found)} functions carry {name}; expected at most one")
    return found[0] if found else None
