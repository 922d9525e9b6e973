"""The error hierarchy of mmaflow.

Every failure a user can cause or meet is one of these. Each carries enough context to act on:
which stage, which op or file location, and what to do about it. The CLI prints ``str(error)``
and exits non-zero; ``--debug`` adds the Python traceback.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """The exit codes of ``mmaflow`` (and ``mmaflow-codegen``), in one place: each error class
    below exits with its own; ``mmaflow --help`` lists them (``EXIT_HELP``)."""

    OK = 0
    FAILED = 1  # a check failed (mmaflow run: wrong numbers, a race), or another mmaflow error
    INPUT = 2  # unusable input or arguments (InputError; argparse's usage errors too)
    UNSUPPORTED = 3  # valid input mmaflow does not handle (UnsupportedError)
    CONFIG = 4  # an invalid --config value (ConfigError)
    CODEGEN = 5  # a stage failed on IR it should handle: a bug (CodegenError)
    VERIFICATION = 6  # a guard caught a miss: IREE fell back, the ISA lacks what was emitted (VerificationError)
    TOOLCHAIN = 7  # IREE's compiler or runtime failed (ToolchainError)
    DEVICE = 8  # a device is unavailable, failed or faulted (DeviceError, DeviceFault)
    CHECKER = 9  # the lane executor or the numpy reference cannot run what it was given (ExecutorError, InterpretError)
    INTERNAL = 70  # an internal error: a bug in mmaflow (--debug shows the traceback)
    INTERRUPTED = 130  # Ctrl-C
    BROKEN_PIPE = 141  # the reader of stdout went away (mmaflow ... | head)


EXIT_HELP = "exit codes:\n" + "\n".join(
    f"  {code.value:>3}  {code.name.lower().replace('_', ' ')}: {_why}"
    for code, _why in [
        (Exit.OK, "success"),
        (Exit.FAILED, "a check failed (mmaflow run: wrong numbers, a race)"),
        (Exit.INPUT, "unusable input or arguments (missing file, malformed MLIR, no matmul, bad option)"),
        (Exit.UNSUPPORTED, "valid input mmaflow does not handle (dtype, shape, target, intrinsic)"),
        (Exit.CONFIG, "an invalid --config value"),
        (Exit.CODEGEN, "a codegen stage failed on IR it should handle (a bug: please report it)"),
        (
            Exit.VERIFICATION,
            "a guard caught a miss (IREE fell back to its own codegen, the ISA lacks what was "
            "emitted, a .vmfb that is not mmaflow's)",
        ),
        (Exit.TOOLCHAIN, "IREE's compiler or runtime failed"),
        (Exit.DEVICE, "a device is unavailable, failed or faulted"),
        (Exit.CHECKER, "the lane executor or the numpy reference cannot run the kernel or the dispatch"),
        (Exit.INTERNAL, "internal error (a bug in mmaflow; --debug shows the traceback)"),
        (Exit.INTERRUPTED, "interrupted (Ctrl-C)"),
        (Exit.BROKEN_PIPE, "the reader of the output went away (mmaflow ... | head)"),
    ]
)


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 dispatch``, ``2 dispatches``: a count and its noun, for messages."""
    return f"{n} {noun if n == 1 else nouns or noun + ('es' if noun.endswith(('s', 'sh', 'ch', 'x')) else 's')}"


class MmaflowError(Exception):
    """Base class. ``stage``, ``location`` and ``hint`` are optional context."""

    exit_code = Exit.FAILED

    def __init__(self, message: str, *, stage: str | None = None, location: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.location = location
        self.hint = hint

    def __str__(self) -> str:
        parts = []
        if self.stage:
            parts.append(f"[{self.stage}] ")
        if self.location:
            parts.append(f"{self.location}: ")
        parts.append(self.message)
        if self.hint:
            parts.append(f"\n  hint: {self.hint}")
        return "".join(parts)


class InputError(MmaflowError):
    """The input cannot be used: missing file, malformed MLIR, no matmul in it."""

    exit_code = Exit.INPUT


class UnsupportedError(MmaflowError):
    """Valid input that mmaflow does not handle: dtype, shape or target without an instruction."""

    exit_code = Exit.UNSUPPORTED


class ConfigError(MmaflowError):
    """An invalid configuration value (CLI --config, JSON config, or a derived constraint)."""

    exit_code = Exit.CONFIG


class CodegenError(MmaflowError):
    """A stage failed on IR it should have handled: a bug in mmaflow or an unexpected IR form."""

    exit_code = Exit.CODEGEN


class VerificationError(MmaflowError):
    """A guard caught a miss: IREE fell back to its own codegen, or the ISA lacks what we emitted."""

    exit_code = Exit.VERIFICATION


class ToolchainError(MmaflowError):
    """IREE (compiler or runtime) failed; carries its diagnostics."""

    exit_code = Exit.TOOLCHAIN


class DeviceError(MmaflowError):
    """A device driver is unavailable or failed at run time."""

    exit_code = Exit.DEVICE


class DeviceFault(DeviceError):
    """A kernel faulted on the device (the driver's error, an abort): the device context is
    unusable after it, and tearing it down may hang."""


def to_wire(error: MmaflowError) -> dict:
    """An error as JSON (the codegen server hands errors to its clients in this form)."""
    return {
        "class": type(error).__name__,
        "message": error.message,
        "stage": error.stage,
        "location": error.location,
        "hint": error.hint,
    }


def from_wire(d: dict) -> MmaflowError:
    cls = {c.__name__: c for c in _subclasses(MmaflowError)}.get(d["class"], MmaflowError)
    return cls(d["message"], stage=d["stage"], location=d["location"], hint=d["hint"])


def _subclasses(cls):
    yield cls
    for sub in cls.__subclasses__():
        yield from _subclasses(sub)
