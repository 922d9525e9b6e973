"""The error hierarchy of mmaflow.

Every failure a user can cause or meet is one of these. Each carries enough context to act on:
which stage, which op or file location, and what to do about it. The CLI prints ``str(error)``
and exits non-zero; ``--debug`` adds the Python traceback.
"""

from __future__ import annotations


class MmaflowError(Exception):
    """Base class. ``stage``, ``location`` and ``hint`` are optional context."""

    exit_code = 1

    def __init__(self, message: str, *, stage: str | None = None, location: str | None = None,
                 hint: str | None = None):
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

    exit_code = 2


class UnsupportedError(MmaflowError):
    """Valid input that mmaflow does not handle: dtype, shape or target without an instruction."""

    exit_code = 3


class ConfigError(MmaflowError):
    """An invalid configuration value (CLI --config, JSON config, or a derived constraint)."""

    exit_code = 4


class CodegenError(MmaflowError):
    """A stage failed on IR it should have handled: a bug in mmaflow or an unexpected IR form."""

    exit_code = 5


class VerificationError(MmaflowError):
    """A guard caught a miss: IREE fell back to its own codegen, or the ISA lacks what we emitted."""

    exit_code = 6


class ToolchainError(MmaflowError):
    """IREE (compiler or runtime) failed; carries its diagnostics."""

    exit_code = 7


class DeviceError(MmaflowError):
    """A device driver is unavailable or failed at run time."""

    exit_code = 8


class DeviceFault(DeviceError):
    """A kernel faulted on the device (the driver's error, an abort): the device context is
    unusable after it, and tearing it down may hang."""


def to_wire(error: MmaflowError) -> dict:
    """An error as JSON (the codegen server hands errors to its clients in this form)."""
    return {"class": type(error).__name__, "message": error.message, "stage": error.stage,
            "location": error.location, "hint": error.hint}


def from_wire(d: dict) -> MmaflowError:
    cls = {c.__name__: c for c in _subclasses(MmaflowError)}.get(d["class"], MmaflowError)
    return cls(d["message"], stage=d["stage"], location=d["location"], hint=d["hint"])


def _subclasses(cls):
    yield cls
    for sub in cls.__subclasses__():
        yield from _subclasses(sub)
