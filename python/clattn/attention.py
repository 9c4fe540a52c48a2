"""sdpa and MultiheadAttention on NumPy arrays, over clattn/attention.h.

Arrays go to the device as float32 (np.ascontiguousarray: a copy only when the array is not
already C-contiguous float32) and the results come back as new float32 arrays.
"""

import contextlib
import ctypes
import math
import threading
from typing import Dict, Optional, Tuple

import numpy as np

from . import _api
from ._api import lib
from ._context import Context

_default_context: Optional[Context] = None
_default_context_lock = threading.Lock()


def default_context() -> Context:
    """The context of sdpa() (made on first use, on the default device: CLATTN_DEVICE, else
    the first GPU, else the first CPU). Its lock serialises the calls of every thread."""
    global _default_context
    with _default_context_lock:
        if _default_context is None:
            _default_context = Context(None)
        return _default_context


def float_array(value, name: str) -> np.ndarray:
    """value as a C-contiguous float32 array (a copy only when needed); TypeError naming the
    argument when it is not an array of numbers."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be an array of numbers, not {type(value).__name__}")
    array = np.asarray(value)
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number)
                                     or array.dtype == np.bool_):
        raise TypeError(f"{name} must be an array of numbers, not dtype {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.float32)


class _Tensors:
    """Device tensors of one call, destroyed together (the context's lock held by the caller)."""

    def __init__(self, context: Context):
        self.context = context
        self.handles = []

    def new(self, shape) -> ctypes.c_void_p:
        shape = tuple(int(s) for s in shape)
        dims = (ctypes.c_size_t * len(shape))(*shape)
        handle = ctypes.c_void_p()
        self.context.check(lib.clattn_tensor_create(self.context.handle, ctypes.byref(handle),
                                                     len(shape), dims))
        self.handles.append(handle)
        return handle

    def upload(self, array: np.ndarray) -> ctypes.c_void_p:
        handle = self.new(array.shape)
        self.context.check(lib.clattn_tensor_write(
            handle, array.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), array.size))
        return handle

    def download(self, handle: ctypes.c_void_p, shape) -> np.ndarray:
        out = np.empty(shape, dtype=np.float32)
        self.context.check(lib.clattn_tensor_read(
            handle, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size))
        return out

    def close(self) -> None:
        for handle in self.handles:
            lib.clattn_tensor_destroy(ctypes.byref(handle))
        self.handles = []


@contextlib.contextmanager
def _device_call(context: Context):
    with context.lock:
        tensors = _Tensors(context)
        try:
            yield tensors
        finally:
            tensors.close()


def _as_4d(shape: Tuple[int, ...]) -> Tuple[int, int, int, int]:
    """[..., N, d] as [B, H, N, d]: leading 1s added, or the leading dimensions merged into B."""
    if len(shape) <= 4:
        return (1,) * (4 - len(shape)) + tuple(shape)
    return (int(np.prod(shape[:-3])),) + tuple(shape[-3:])


def sdpa(query, key, value, attn_mask=None, is_causal: bool = False,
         scale: Optional[float] = None, enable_gqa: bool = False) -> np.ndarray:
    """PyTorch's torch.nn.functional.scaled_dot_product_attention on NumPy arrays.

    out = softmax(scale · query · keyᵀ + mask) · value, computed by clattn_sdpa on the default
    context's device (default_context()).

    Args:
        query: [..., L, E] (up to 4 dimensions map straight to the C API's [B, H, L, E];
            more are merged into the batch).
        key: [..., S, E]; value: [..., S, Ev] (with enable_gqa: [..., H_kv, S, E]).
        attn_mask: broadcastable to [..., L, S]. A boolean mask means True = attend (PyTorch's
            polarity: the binding inverts it for the C API, where nonzero = ignore); any other
            dtype is added to the scores (-inf masks a key).
        is_causal: query i attends to the keys j <= i (a lower-triangular mask aligned at the
            top left, as PyTorch's). Not together with attn_mask (ValueError, as PyTorch).
        scale: multiplies the scores; None: 1/sqrt(E).
        enable_gqa: grouped-query attention: key and value have H_kv heads, H_kv dividing the
            query's H.

    Returns:
        float32 [..., L, Ev].

    Raises:
        TypeError, ValueError: arguments of the wrong type, rank or shape (named).
        clattn.Error: the library's failure, with its message.
    """
    q = float_array(query, "query")
    k = float_array(key, "key")
    v = float_array(value, "value")
    for array, name in ((q, "query"), (k, "key"), (v, "value")):
        if array.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions [..., N, d], not shape "
                             f"{array.shape}")
    if not (q.ndim == k.ndim == v.ndim):
        raise ValueError(f"query, key and value must have as many dimensions: shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if attn_mask is not None and is_causal:
        raise ValueError("attn_mask and is_causal cannot both be set (as in PyTorch)")
    if scale is not None:
        if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating,
                                                             np.integer)):
            raise TypeError(f"scale must be a float or None, not {type(scale).__name__}")
        if not math.isfinite(scale) or scale == 0:
            raise ValueError(f"scale must be a finite nonzero number, not {scale}")

    q4, k4, v4 = _as_4d(q.shape), _as_4d(k.shape), _as_4d(v.shape)
    out_shape = q.shape[:-1] + (v.shape[-1],)
    mask = None
    mask_kind = _api.MASK_ADDITIVE
    if attn_mask is not None:
        raw = np.asarray(attn_mask)
        target = q.shape[:-1] + (k.shape[-2],)
        try:
            np.broadcast_shapes(raw.shape, target)
        except ValueError:
            raise ValueError(f"attn_mask of shape {raw.shape} does not broadcast to "
                             f"[..., L, S] = {target}") from None
        if raw.dtype == np.bool_:
            raw = ~raw  # PyTorch: True = attend; the C API's bool masks: nonzero = ignore
            mask_kind = _api.MASK_BOOL
        if raw.ndim <= 4 and q.ndim <= 4:
            # Right-aligned against [B, H, L, S] with leading 1s: the C API broadcasts them.
            mask = float_array(raw, "attn_mask").reshape(_as_4d(raw.shape))
        else:
            # Batch dimensions merged: the mask is spelled out to the merged shape.
            mask = float_array(np.broadcast_to(raw, target), "attn_mask").reshape(
                (q4[0], q4[1], q4[2], k4[2]))

    params = _api.SdpaParams()
    lib.clattn_sdpa_params_default(ctypes.byref(params))
    params.scale = float(scale) if scale is not None else 0.0
    params.causal = 1 if is_causal else 0
    params.enable_gqa = 1 if enable_gqa else 0
    context = default_context()
    with _device_call(context) as tensors:
        tq = tensors.upload(q.reshape(q4))
        tk = tensors.upload(k.reshape(k4))
        tv = tensors.upload(v.reshape(v4))
        if mask is not None:
            params.attn_mask = tensors.upload(mask).value
            params.attn_mask_kind = mask_kind
        out4 = (q4[0], q4[1], q4[2], v4[3])
        tout = tensors.new(out4)
        context.check(lib.clattn_sdpa(context.handle, tq, tk, tv, tout, ctypes.byref(params)),
                      "sdpa")
        return tensors.download(tout, out4).reshape(out_shape)


_MHA_WEIGHT_NAMES = ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight",
                     "in_proj_bias", "out_proj_weight", "out_proj_bias")


class MultiheadAttention:
    """torch.nn.MultiheadAttention(embed_dim, num_heads, bias, kdim, vdim, batch_first=True)
    for inference, on NumPy arrays (clattn_mha_* of clattn/attention.h).

    Load the weights with load_state_dict (PyTorch's names: "in_proj_weight",
    "out_proj.weight"...), then call the object. Its own context (device as SentenceModel's)
    and lock.
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True,
                 kdim: Optional[int] = None, vdim: Optional[int] = None,
                 device: Optional[str] = None):
        for value, name in ((embed_dim, "embed_dim"), (num_heads, "num_heads")):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        self._handle = ctypes.c_void_p()
        self._context = Context(device)
        config = _api.MhaConfig()
        lib.clattn_mha_config_default(ctypes.byref(config), int(embed_dim), int(num_heads))
        config.in_proj_bias = 1 if bias else 0
        config.out_proj_bias = 1 if bias else 0
        config.kdim = int(kdim) if kdim is not None else 0
        config.vdim = int(vdim) if vdim is not None else 0
        self._context.check(lib.clattn_mha_create(self._context.handle,
                                                  ctypes.byref(self._handle),
                                                  ctypes.byref(config)))
        self._context.check(lib.clattn_mha_get_config(self._handle, ctypes.byref(config)))
        self.embed_dim = int(config.embed_dim)
        self.num_heads = int(config.num_heads)
        self.kdim = int(config.kdim)
        self.vdim = int(config.vdim)

    def load_state_dict(self, state_dict: Dict[str, np.ndarray]) -> None:
        """Copies the weights to the device: nn.MultiheadAttention's state_dict names
        ("in_proj_weight" or "q_proj_weight"/"k_proj_weight"/"v_proj_weight", "in_proj_bias",
        "out_proj.weight", "out_proj.bias"; "_" in place of "." accepted), as arrays. Raises
        clattn.Error naming a weight of the wrong shape, ValueError for an unknown name."""
        weights = _api.MhaWeights()
        keep = []
        for name, array in state_dict.items():
            field = name.replace(".", "_")
            if field not in _MHA_WEIGHT_NAMES:
                raise ValueError(f"state_dict: unknown weight {name!r} (expected "
                                 f"{', '.join(_MHA_WEIGHT_NAMES)})")
            array = float_array(array, f"state_dict[{name!r}]")
            if not 1 <= array.ndim <= _api.MAX_DIMS:
                raise ValueError(f"state_dict[{name!r}] has {array.ndim} dimensions")
            keep.append(array)
            host = getattr(weights, field)
            host.data = array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            host.ndim = array.ndim
            for i, size in enumerate(array.shape):
                host.shape[i] = size
        with self._context.lock:
            self._context.check(lib.clattn_mha_load_weights(self._handle,
                                                            ctypes.byref(weights)),
                                "load_state_dict")

    def __call__(self, query, key=None, value=None, key_padding_mask=None,
                 need_weights: bool = True, attn_mask=None, average_attn_weights: bool = True,
                 is_causal: bool = False) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """(attn_output [B, L, E], attn_weights or None), as nn.MultiheadAttention.forward
        with batch_first=True.

        query [B, L, E]; key [B, S, kdim] and value [B, S, vdim] (None: self-attention on
        query). key_padding_mask [B, S] and attn_mask ([L, S] or [B·num_heads, L, S]) with
        nn.MultiheadAttention's polarity: a boolean True is a position NOT attended; a float
        mask is added. need_weights: also return the attention probabilities, averaged over
        the heads [B, L, S] (average_attn_weights) or per head [B, num_heads, L, S].
        is_causal: a causal mask (given alone, without attn_mask).
        """
        q = float_array(query, "query")
        if (key is None) != (value is None):
            raise ValueError("key and value must be given together (or neither)")
        self_attention = key is None or key is query
        k = None if self_attention else float_array(key, "key")
        v = None if self_attention else float_array(value, "value")
        if q.ndim != 3:
            raise ValueError(f"query must be [B, L, E], not shape {q.shape}")
        batch, seq_q = q.shape[0], q.shape[1]
        seq_k = seq_q if self_attention else k.shape[1]

        params = _api.MhaForwardParams()
        lib.clattn_mha_forward_params_default(ctypes.byref(params))
        params.causal = 1 if is_causal else 0
        params.average_attn_weights = 1 if average_attn_weights else 0
        masks = []
        for raw, name in ((key_padding_mask, "key_padding_mask"), (attn_mask, "attn_mask")):
            if raw is None:
                masks.append(None)
                continue
            raw = np.asarray(raw)
            kind = _api.MASK_BOOL if raw.dtype == np.bool_ else _api.MASK_ADDITIVE
            masks.append((float_array(raw, name), kind))
        with _device_call(self._context) as tensors:
            tq = tensors.upload(q)
            tk = tv = None
            if not self_attention:
                tk = tensors.upload(k)
                tv = tensors.upload(v)
            if masks[0] is not None:
                params.key_padding_mask = tensors.upload(masks[0][0]).value
                params.key_padding_mask_kind = masks[0][1]
            if masks[1] is not None:
                params.attn_mask = tensors.upload(masks[1][0]).value
                params.attn_mask_kind = masks[1][1]
            weights_shape = None
            if need_weights:
                weights_shape = ((batch, seq_q, seq_k) if average_attn_weights
                                 else (batch, self.num_heads, seq_q, seq_k))
                tw = tensors.new(weights_shape)
                params.attn_weights = tw.value
            out_shape = (batch, seq_q, self.embed_dim)
            tout = tensors.new(out_shape)
            self._context.check(lib.clattn_mha_forward(self._handle, tq, tk, tv, tout,
                                                       ctypes.byref(params)),
                                "MultiheadAttention")
            out = tensors.download(tout, out_shape)
            weights = tensors.download(tw, weights_shape) if need_weights else None
        return out, weights

    forward = __call__

    def close(self) -> None:
        """Releases the layer and its context now (also done when the object is collected)."""
        if getattr(self, "_handle", None) is not None and self._handle.value:
            lib.clattn_mha_destroy(ctypes.byref(self._handle))
        if getattr(self, "_context", None) is not None:
            self._context.close()

    def __del__(self):
        self.close()
