"""Load and call compiled modules through IREE's runtime (HIP, CUDA, local-task drivers).

No IREE compiler import here: this module also runs on machines that only have
iree-base-runtime. Calls use IREE's synchronous ABI: a call returns once its results are ready
on the device, so a timed call includes the wait for the result (and the launch), never just
the enqueue.
"""

from __future__ import annotations

import contextlib
import re
import time

import numpy as np

from mmaflow.compiler.core.errors import DeviceError, DeviceFault


def device_present(driver: str) -> tuple[bool, str]:
    """Whether ``driver`` has a usable device here, and why not."""
    import iree.runtime as rt

    if driver not in rt.query_available_drivers():
        return False, f"IREE's runtime has no {driver} driver"
    try:
        drv = rt.get_driver(driver)
        devices = drv.query_available_devices()
    except Exception as e:  # the driver library (libamdhip64 / libcuda) is missing or broken
        text = str(e).splitlines()[0]
        lib = re.search(r"'(lib\w+\.so[.\d]*)'", text)
        why = f"{lib.group(1)} is not available" if lib else text
        return False, f"the {driver} driver cannot start ({why})"
    if not devices:
        return False, f"the {driver} driver sees no device"
    return True, ""


class CompiledModule:
    """A .vmfb loaded on one device."""

    def __init__(self, vmfb: bytes, driver: str):
        import iree.runtime as rt

        ok, why = device_present(driver)
        if not ok:
            raise DeviceError(why)
        self.config = rt.Config(driver)
        self.ctx = rt.SystemContext(config=self.config)
        try:
            self.ctx.add_vm_module(rt.VmModule.copy_buffer(self.config.vm_instance, vmfb))
        except Exception as e:
            raise DeviceError(f"IREE could not load the module on {driver}: {e}") from None
        self.driver = driver
        self.device = self.config.device

    def function(self, name: str | None = None):
        mod = self.ctx.modules.module
        names = [n for n in mod.vm_module.function_names if not n.startswith("__")]
        if name is None:
            if len(names) != 1:
                raise DeviceError(f"the module exports {names}; name the function to call")
            name = names[0]
        if name not in names:
            raise DeviceError(f"the module has no function {name!r}; it has {names}")
        return mod[name]

    def upload(self, array: np.ndarray):
        import iree.runtime as rt

        return rt.asdevicearray(self.device, array)

    def __call__(self, name: str | None, *arrays: np.ndarray) -> np.ndarray:
        fn = self.function(name)
        with self._device_call(name):
            return np.asarray(fn(*[self.upload(a) for a in arrays]).to_host())

    @contextlib.contextmanager
    def _device_call(self, name: str | None):
        """A call that fails in IREE's runtime as a ``DeviceError`` naming the driver, the function
        and the runtime's first line, instead of its traceback; a kernel fault (the driver's
        error, an abort: CUDA_ERROR_LAUNCH_FAILED, an illegal address, a trap) as a
        ``DeviceFault``: the device context is unusable after it."""
        try:
            yield
        except RuntimeError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            why = lines[0] if lines else type(e).__name__
            message = f"calling {name or 'the module'} on the {self.driver} device failed: {why}"
            if re.search(r"CUDA_ERROR|hipError|ABORTED|DEVICE_LOST", why):
                raise DeviceFault(
                    message,
                    hint="a kernel fault leaves the device context unusable: every "
                    "later call in this process would fail too",
                ) from None
            raise DeviceError(message) from None

    def time(
        self, name: str | None, *arrays: np.ndarray, warmup: int = 3, repeat: int = 20, warmup_seconds: float = 0.3
    ) -> list[float]:
        """Seconds per call (inputs already on the device, each call waited for). Warm-up runs
        ``warmup`` calls and at least ``warmup_seconds``, so the GPU leaves its idle clocks."""
        fn = self.function(name)
        dev = [self.upload(a) for a in arrays]
        start = time.perf_counter()
        done = 0
        times = []
        with self._device_call(name):
            while done < warmup or time.perf_counter() - start < warmup_seconds:
                fn(*dev)
                done += 1
            for _ in range(repeat):
                t0 = time.perf_counter()
                fn(*dev)
                times.append(time.perf_counter() - t0)
        return times
