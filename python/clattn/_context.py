"""The library's errors, a context with its lock and its lifetime, devices() and version().

The C API allows one thread at a time per context and the objects made from it
(clattn/context.h), so every Python object that owns a context owns a threading.Lock and holds
it for each call into the library (Context.exclusive); different objects run in parallel
(ctypes releases the GIL). A few calls are thread-safe against everything but destroying the
object (tokenizing: clattn_sentence_model_encode); they run under Context.shared, any number at
once. Context.close waits for both kinds of call, then destroys; a call after it raises Error.
"""

import contextlib
import ctypes
import errno
import threading
from typing import Any, Callable, Dict, List, Optional

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


class ModelNotFoundError(Error, FileNotFoundError):
    """A model folder or file that does not exist (both a clattn.Error and a FileNotFoundError,
    errno ENOENT, .filename the path): the message says where it was looked for."""

    def __init__(self, message: str, filename: str):
        Error.__init__(self, message, _api.ERROR_IO)
        self.errno = errno.ENOENT
        self.strerror = "No such file or directory"
        self.filename = filename

    def __str__(self) -> str:
        return self.args[0]


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


class Context:
    """One clattn_context (one OpenCL device and queue), the lock that serialises its use, and
    the lifetime of the Python object that owns it (owner: its name in messages)."""

    def __init__(self, device: Optional[str] = None, precision: str = "fp32",
                 owner: str = "object"):
        self.owner = owner
        self.lock = threading.Lock()
        self._state = threading.Condition()
        self._shared_calls = 0
        self.closed = False
        self.handle = ctypes.c_void_p()
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
        check(lib.clattn_context_create(ctypes.byref(self.handle), ctypes.byref(params)))

    def check(self, status: int, what: str = "") -> None:
        check(status, self.handle.value, what)

    def _refuse_if_closed(self) -> None:
        if self.closed:
            raise Error(f"this {self.owner} is closed (close() was called)",
                        _api.ERROR_INVALID_ARGUMENT)

    @contextlib.contextmanager
    def exclusive(self):
        """Holds the lock for calls into the library on this context and its objects; raises
        Error once close() has run (or while it waits, for a call that had not started)."""
        with self.lock:
            self._refuse_if_closed()
            yield

    @contextlib.contextmanager
    def shared(self):
        """For the calls the C API allows in any number of threads at once, also during an
        exclusive call (tokenizing): they do not take the lock, but close() waits for them.
        Raises Error once close() has begun."""
        with self._state:
            self._refuse_if_closed()
            self._shared_calls += 1
        try:
            yield
        finally:
            with self._state:
                self._shared_calls -= 1
                if self._shared_calls == 0:
                    self._state.notify_all()

    def device(self) -> Dict[str, Any]:
        info = _api.DeviceInfo()
        with self.exclusive():
            self.check(lib.clattn_context_device_info(self.handle, ctypes.byref(info)))
        return _device_dict(info)

    def close(self, release: Optional[Callable[[], None]] = None) -> None:
        """Waits for the calls in flight (exclusive and shared), then runs release (which
        destroys the owner's objects made from this context) and destroys the context. Calls
        made later raise Error. A second close() does nothing."""
        if not hasattr(self, "handle"):
            return  # __init__ did not get this far
        with self.lock:
            with self._state:
                if self.closed:
                    return
                self.closed = True
                while self._shared_calls:
                    self._state.wait()
            try:
                if release is not None:
                    release()
            finally:
                if self.handle.value:
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
