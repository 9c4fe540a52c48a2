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
    """The folder tools/fetch-model.sh fills, where a model name is looked for:
    $CLATTN_MODEL_CACHE when set and not empty, else $HOME/.cache/clattn ($HOME unset or empty:
    /root), the script's ${CLATTN_MODEL_CACHE:-${HOME:-/root}/.cache/clattn}."""
    cache = os.environ.get("CLATTN_MODEL_CACHE")
    if cache:
        return cache
    return os.path.join(os.environ.get("HOME") or "/root", ".cache", "clattn")


def _cache_names(text: str):
    """Where the model cache may hold a model name (a list of paths; empty for a path that is
    not a name). As sentence-transformers reads a name: a bare NAME ("all-MiniLM-L6-v2") is
    sentence-transformers' model, which tools/fetch-model.sh stores as CACHE/NAME; a hub name
    ORG/NAME is looked for as CACHE/ORG/NAME, and for ORG "sentence-transformers" also as
    CACHE/NAME. Any other path ("./x", "a/b/c", "/abs") is a folder only."""
    separators = [os.sep] + ([os.altsep] if os.altsep else [])
    parts = text
    for separator in separators[1:]:
        parts = parts.replace(separator, os.sep)
    parts = parts.split(os.sep)
    if len(parts) > 2 or any(part in ("", ".", "..") for part in parts):
        return []
    cache = model_cache()
    found = [os.path.join(cache, *parts)]
    if len(parts) == 2 and parts[0] == "sentence-transformers":
        found.append(os.path.join(cache, parts[1]))
    return found


def model_folder(path: Any, name: str = "path") -> bytes:
    """The folder of a model, as sentence-transformers resolves a model name: path itself when
    it is a folder; else, for a model name (NAME or ORG/NAME), the model cache's folder of that
    name (_cache_names: model_cache()/NAME, model_cache()/ORG/NAME, and model_cache()/NAME for
    "sentence-transformers/NAME"); else path when it exists (a file: the library says why it is
    no model folder). Raises ModelNotFoundError (a clattn.Error and a FileNotFoundError) naming
    every place it looked when none exists; ValueError for an empty path, TypeError when path
    is not a str or PathLike."""
    raw = path_argument(path, name)
    if not raw:
        raise ValueError(f"{name} is empty: give a model folder or a model name")
    if os.path.isdir(raw):
        return raw
    text = os.fsdecode(raw)
    cached = _cache_names(text)
    for folder in cached:
        if os.path.isdir(folder):
            return os.fsencode(folder)
    if os.path.exists(raw):
        return raw
    if not cached:
        raise ModelNotFoundError(
            f"the model folder {text} does not exist (only a model name, NAME or ORG/NAME, is "
            f"also looked for in the model cache {model_cache()})", text)
    places = ", ".join(cached)
    raise ModelNotFoundError(
        f"no model {text!r}: it is neither a folder here ({os.path.abspath(text)}) nor in the "
        f"model cache ({places}). tools/fetch-model.sh --model NAME fetches all-MiniLM-L6-v2 "
        "or all-mpnet-base-v2 into the cache ($CLATTN_MODEL_CACHE, else ~/.cache/clattn)", text)


def model_file(path: Any, name: str = "path") -> bytes:
    """A model file's name as bytes; ModelNotFoundError (a clattn.Error and a FileNotFoundError)
    when it does not exist, ValueError when it is empty, TypeError when path is not a str or
    PathLike."""
    raw = path_argument(path, name)
    if not raw:
        raise ValueError(f"{name} is empty: give a model file")
    if not os.path.exists(raw):
        text = os.fsdecode(raw)
        raise ModelNotFoundError(f"the model file {text} does not exist", text)
    return raw
