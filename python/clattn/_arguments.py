"""The public API's arguments checked and converted: integers in the range of their C type, file
names, model names found in the model cache, text as UTF-8.

Every check raises TypeError (wrong type) or ValueError (wrong value) naming the argument, before
anything reaches the library: a Python int too large for a C size_t would otherwise wrap
silently in ctypes (2**64 becomes 0).
"""

import ctypes
import operator
import os
from typing import Any, Optional

import numpy as np

from ._context import ModelNotFoundError

SIZE_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1
"""The largest C size_t."""


def int_argument(value: Any, name: str, minimum: int = 0,
                 maximum: Optional[int] = SIZE_MAX) -> int:
    """value as a Python int in [minimum, maximum] (maximum None: no bound; the default is the
    largest size_t). An int or a NumPy integer; a bool, a float or anything else is a TypeError,
    a value out of range a ValueError naming the argument and the range."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if number < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {number}")
    if maximum is not None and number > maximum:
        limit = " (the largest size_t)" if maximum == SIZE_MAX else ""
        raise ValueError(f"{name} must be at most {maximum}{limit}, not {number}")
    return number


def utf8(text: str, name: str) -> bytes:
    """text as UTF-8; ValueError naming the argument for a lone surrogate ("\\udc80")."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"{name} is not valid Unicode: {err}") from None


def path_argument(path: Any, name: str = "path") -> bytes:
    """A str or os.PathLike as the bytes of a file name; TypeError naming the argument else."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, not {type(path).__name__}")
    return os.fsencode(path)


def model_cache() -> str:
    """The folder tools/fetch-model.sh fills, where a bare model name is looked for:
    $CLATTN_MODEL_CACHE when set and not empty, else $HOME/.cache/clattn ($HOME unset or empty:
    /root), the script's ${CLATTN_MODEL_CACHE:-${HOME:-/root}/.cache/clattn}."""
    cache = os.environ.get("CLATTN_MODEL_CACHE")
    if cache:
        return cache
    return os.path.join(os.environ.get("HOME") or "/root", ".cache", "clattn")


def _is_bare_name(name: str) -> bool:
    """A model name without a folder: no separator, not empty, not "." or ".."."""
    separators = [os.sep] + ([os.altsep] if os.altsep else [])
    return (name not in ("", ".", "..") and not any(s in name for s in separators))


def model_folder(path: Any, name: str = "path") -> bytes:
    """The folder of a model, as sentence-transformers resolves a model name: path itself when it
    exists; else, for a bare name (no "/": "all-MiniLM-L6-v2"), that name in the model cache
    (model_cache()). Raises ModelNotFoundError (a clattn.Error and a FileNotFoundError) naming
    every place it looked when neither exists; TypeError when path is not a str or PathLike."""
    raw = path_argument(path, name)
    if os.path.exists(raw):
        return raw
    text = os.fsdecode(raw)
    here = os.path.abspath(text)
    if not _is_bare_name(text):
        raise ModelNotFoundError(f"the model folder {text} does not exist", text)
    cached = os.path.join(model_cache(), text)
    if os.path.exists(cached):
        return os.fsencode(cached)
    raise ModelNotFoundError(
        f"no model {text!r}: it is neither a folder here ({here}) nor in the model cache "
        f"({cached}). tools/fetch-model.sh --model NAME fetches all-MiniLM-L6-v2 or "
        "all-mpnet-base-v2 into the cache ($CLATTN_MODEL_CACHE, else ~/.cache/clattn)", text)


def model_file(path: Any, name: str = "path") -> bytes:
    """A model file's name as bytes; ModelNotFoundError (a clattn.Error and a FileNotFoundError)
    when it does not exist, TypeError when path is not a str or PathLike."""
    raw = path_argument(path, name)
    if not os.path.exists(raw):
        text = os.fsdecode(raw)
        raise ModelNotFoundError(f"the model file {text} does not exist", text)
    return raw
