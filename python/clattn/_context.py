"""The library's errors, a context with its lock, devices(), and argument helpers.

The C API allows one thread at a time per context and the objects made from it
(clattn/context.h), so every Python object that owns a context owns a threading.Lock and holds
it for each call into the library; different objects run in parallel (ctypes releases the GIL).
"""

import ctypes
import os
import threading
from typing import Any, Dict, List, Optional

from . import _api
from ._api import lib


class Error(RuntimeError):
    """A failure reported by libclattn, with the library's message.

    Attributes:
        status: the library's status code (a negative int, clattn/common.h).
        status_name: its symbolic name, e.g. "CLATTN_ERROR_IO".
    """

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status
        self.status_name = (lib.clattn_status_name(status).decode() if status else "")


def _decode(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", "replace") if raw else ""


def check(status: int, ctx: Optional[int] = None, what: str = "") -> None:
    """Raises Error with the library's message when status is not CLATTN_OK.

    The message is the context's last error, else this thread's (calls without a context and
    the thread-safe tokenizer calls record theirs there), else the status's description.
    """
    if status == _api.OK:
        return
    message = _decode(lib.clattn_last_error(ctx)) if ctx else ""
    if not message:
        message = _decode(lib.clattn_last_error(None))
    if not message:
        message = _decode(lib.clattn_strerror(status))
    if what:
        message = f"{what}: {message}"
    raise Error(message, status)


def path_argument(path: Any, name: str = "path") -> bytes:
    """A str or os.PathLike as the bytes of a file name; TypeError naming the argument else."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, not {type(path).__name__}")
    return os.fsencode(path)


class Context:
    """One clattn_context (one OpenCL device and queue) and the lock that serialises its use."""

    def __init__(self, device: Optional[str] = None, precision: str = "fp32"):
        if device is not None and not isinstance(device, str):
            raise TypeError(f"device must be a str or None, not {type(device).__name__}")
        if not isinstance(precision, str):
            raise TypeError(f"precision must be a str, not {type(precision).__name__}")
        if precision not in _api.PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(_api.PRECISIONS)}, "
                             f"not {precision!r}")
        params = _api.ContextParams()
        lib.clattn_context_params_default(ctypes.byref(params))
        params.device = device.encode() if device else None
        params.precision = _api.PRECISIONS[precision]
        handle = ctypes.c_void_p()
        check(lib.clattn_context_create(ctypes.byref(handle), ctypes.byref(params)))
        self.handle = handle
        self.lock = threading.Lock()

    def check(self, status: int, what: str = "") -> None:
        check(status, self.handle.value, what)

    def device(self) -> Dict[str, Any]:
        info = _api.DeviceInfo()
        self.check(lib.clattn_context_device_info(self.handle, ctypes.byref(info)))
        return _device_dict(info)

    def close(self) -> None:
        if getattr(self, "handle", None) is not None and self.handle.value:
            lib.clattn_context_destroy(ctypes.byref(self.handle))

    def __del__(self):
        self.close()


def _device_dict(info: _api.DeviceInfo) -> Dict[str, Any]:
    return {
        "spec": f"{info.platform_index}:{info.device_index}",
        "platform_index": info.platform_index,
        "device_index": info.device_index,
        "platform_name": _decode(info.platform_name),
        "name": _decode(info.name),
        "vendor": _decode(info.vendor),
        "driver_version": _decode(info.driver_version),
        "opencl_version": _decode(info.opencl_version),
        "type": _decode(lib.clattn_device_type_name(info.type)),
        "compute_units": info.compute_units,
        "max_clock_mhz": info.max_clock_mhz,
        "global_mem_bytes": info.global_mem_bytes,
        "local_mem_bytes": info.local_mem_bytes,
        "max_alloc_bytes": info.max_alloc_bytes,
        "max_work_group_size": info.max_work_group_size,
        "fp16": bool(info.fp16),
        "fp64": bool(info.fp64),
    }


def devices() -> List[Dict[str, Any]]:
    """Every OpenCL device of every platform, as dicts (name, type, spec "P:D", memory...).

    The "spec" of an entry is a valid `device=` argument. Raises Error when there is no OpenCL
    platform at all.
    """
    count = ctypes.c_size_t()
    check(lib.clattn_list_devices(None, 0, ctypes.byref(count)))
    infos = (_api.DeviceInfo * max(count.value, 1))()
    check(lib.clattn_list_devices(infos, count.value, ctypes.byref(count)))
    return [_device_dict(infos[i]) for i in range(min(count.value, len(infos)))]


def version() -> str:
    """The library's version, "MAJOR.MINOR.PATCH"."""
    return _decode(lib.clattn_version_string())


class Progress:
    """A progress callback for the C API that prints "label: done/total" to stderr."""

    def __init__(self, label: str, enabled: bool):
        self.label = label
        self.callback = _api.progress_callback(self._report) if enabled else \
            ctypes.cast(None, _api.progress_callback)

    def _report(self, user_data, done, total):
        import sys
        sys.stderr.write(f"\r{self.label}: {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
