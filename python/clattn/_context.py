"""The library's errors, a context with its lock and its lifetime, devices() and version().

The C API allows one thread at a time per context and the objects made from it
(clattn/context.h), so every Python object that owns a context owns a threading.Lock and holds
it for each call into the library (Context.exclusive); different objects run in parallel
(ctypes releases the GIL). A few calls are thread-safe against everything but destroying the
object (tokenizing: clattn_sentence_model_encode); they run under Context.shared, any number at
once. Context.close waits for both kinds of call, then destroys; a call after it raises Error.
A close() on a thread that is inside a call itself (a signal handler, a progress callback) does
not wait: the call in flight frees when it returns.
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
    the lifetime of the Python object that owns it (owner: its name in messages).

    The calls in flight are known by thread (the lock's holder, the threads in shared calls),
    so that close() called on a thread that is itself inside a call (a signal handler, a
    progress callback, code that the call runs) does not wait for that call, which would never
    end: it marks the object closed, and the last call in flight frees it when it returns.
    """

    def __init__(self, device: Optional[str] = None, precision: str = "fp32",
                 owner: str = "object"):
        self.owner = owner
        self.lock = threading.Lock()
        # Guards the fields below; reentrant, as a signal handler may run close() on a thread
        # that holds it.
        self._state = threading.Condition(threading.RLock())
        self._holder: Optional[int] = None  # the thread in an exclusive call
        self._shared: Dict[int, int] = {}   # thread -> its shared calls in flight
        self._release: Optional[Callable[[], None]] = None
        self._freed = False
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
        Error once close() has run (or while it waits, for a call that had not started), and
        for a call made on the thread that is already inside one (from a progress callback or
        a signal handler: the C API is not reentrant, and the lock would never be free)."""
        me = threading.get_ident()
        if self._holder == me:  # only this thread sets _holder to its own id
            raise Error(f"this {self.owner} is already in a call on this thread (a call from "
                        "a progress callback or a signal handler cannot wait for it)",
                        _api.ERROR_INVALID_ARGUMENT)
        with self.lock:
            try:
                with self._state:
                    self._holder = me  # before the check: a close() from here on defers
                self._refuse_if_closed()
                yield
            finally:
                with self._state:
                    self._holder = None
                    self._free_if_last()

    @contextlib.contextmanager
    def shared(self):
        """For the calls the C API allows in any number of threads at once, also during an
        exclusive call (tokenizing): they do not take the lock, but close() waits for them.
        Raises Error once close() has begun."""
        me = threading.get_ident()
        counted = False
        try:
            with self._state:
                self._shared[me] = self._shared.get(me, 0) + 1
                counted = True  # before the check, as exclusive's holder
            self._refuse_if_closed()
            yield
        finally:
            with self._state:
                if counted:
                    self._shared[me] -= 1
                    if not self._shared[me]:
                        del self._shared[me]
                self._free_if_last()

    def _free_if_last(self) -> None:
        """Frees the owner's objects and the context once close() has run and no call is in
        flight (self._state held); wakes the close() waiting for it."""
        if not self.closed or self._freed or self._holder is not None or self._shared:
            return
        self._freed = True  # first: a close() that runs during the release returns at once
        release, self._release = self._release, None
        try:
            if release is not None:
                release()
        finally:
            if self.handle.value:
                lib.clattn_context_destroy(ctypes.byref(self.handle))
            self._state.notify_all()

    def device(self) -> Dict[str, Any]:
        info = _api.DeviceInfo()
        with self.exclusive():
            self.check(lib.clattn_context_device_info(self.handle, ctypes.byref(info)))
        return _device_dict(info)

    def close(self, release: Optional[Callable[[], None]] = None, wait: bool = True) -> None:
        """Closes: release (which destroys the owner's objects made from this context) and the
        context's destruction run once no call is in flight. Calls made later raise Error; a
        second close() does nothing.

        Called with calls in flight on other threads, it waits for them (wait=False: it returns
        at once and the last of them frees). Called on a thread that is itself inside a call
        (a signal handler or a progress callback that the call runs), it returns at once: that
        call goes on with the objects it has, and frees them when it returns."""
        if not hasattr(self, "handle"):
            return  # __init__ did not get this far
        me = threading.get_ident()
        with self._state:
            if self.closed:
                return
            self.closed = True
            self._release = release
            self._free_if_last()
            if not wait or self._holder == me or me in self._shared:
                return
            while not self._freed:
                self._state.wait()

    def close_when_collected(self, release: Optional[Callable[[], None]] = None) -> None:
        """close() for __del__, which the garbage collector may run on any thread at any
        moment: it never blocks. Nothing is in flight once the owner is unreachable; were the
        state's lock busy all the same, it leaves the object as it is rather than wait."""
        state = getattr(self, "_state", None)
        if state is not None and state.acquire(blocking=False):
            try:
                self.close(release, wait=False)
            finally:
                state.release()

    def __del__(self):
        self.close_when_collected()


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
