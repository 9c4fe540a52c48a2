"""Finds and loads libclattn.so, naming a missing system library in the ImportError.

The wheel holds its own libclattn.so next to this file (python/meson.build). For development,
CLATTN_LIBRARY may name another one (a build tree's build/src/libclattn.so); it wins when set.
"""

import ctypes
import os
import re

# The system libraries libclattn.so links (`ldd build/src/libclattn.so`), with the Debian 12
# packages that provide them: the ImportError names the one that is missing.
SYSTEM_LIBRARIES = {
    "libOpenCL.so.1": "ocl-icd-libopencl1 (and an OpenCL driver: pocl-opencl-icd for CPUs)",
    "libclblast.so.1": "libclblast1",
    "libjansson.so.4": "libjansson4",
    "libutf8proc.so.2": "libutf8proc2",
    "libpcre2-8.so.0": "libpcre2-8-0",
}


def library_path() -> str:
    """The path of the libclattn.so this package loads."""
    override = os.environ.get("CLATTN_LIBRARY")
    if override:
        return override
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libclattn.so")


def load() -> ctypes.CDLL:
    """Loads the library (ctypes.CDLL: every call releases the GIL while it runs)."""
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(
            f"clattn: the shared library {path} does not exist "
            "(install the package with `pip install .`, or set CLATTN_LIBRARY to a built "
            "libclattn.so)")
    try:
        return ctypes.CDLL(path)
    except OSError as err:
        message = str(err)
        # dlopen's message names the dependency it could not find first.
        missing = re.search(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file", message)
        if missing and missing.group(1) in SYSTEM_LIBRARIES:
            name = missing.group(1)
            raise ImportError(
                f"clattn: {path} needs the system library {name}, which is not installed "
                f"(Debian: apt-get install {SYSTEM_LIBRARIES[name]}): {message}") from err
        if missing:
            raise ImportError(
                f"clattn: {path} needs the system library {missing.group(1)}, which is not "
                f"installed: {message}") from err
        raise ImportError(f"clattn: cannot load {path}: {message}") from err
