"""sdpa and MultiheadAttention on NumPy arrays, over clattn/attention.h.

Arrays go to the device as float32 (np.ascontiguousarray: a copy only when the array is not
already C-contiguous float32). sdpa's result has its inputs' floating dtype; MultiheadAttention's
and Encoder's are float32.
"""

import contextlib
import ctypes
import math
import threading
from typing import Dict, Optional, Tuple

import numpy as np

from . import _api, _sdpa_shapes
from ._api import lib
from ._arguments import int_argument
from ._context import Context

_default_context: Optional[Context] = None
_default_context_lock = threading.Lock()


def default_context() -> Context:
    """The context of sdpa() (made on first use, on the default device: CLATTN_DEVICE, else
    the first GPU, else the first CPU). Its lock serialises the calls of every thread."""
    global _default_context
    with _default_context_lock:
        if _default_context is None:
            _default_context = Context(None, owner="context")
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
    with context.exclusive():
        tensors = _Tensors(context)
        try:
            yield tensors
        finally:
            tensors.close()


def _floating_array(value, name: str) -> np.ndarray:
    """value as an array of a floating dtype (float16, float32, float64...); TypeError naming
    the argument for anything else (integers, bools, objects), as PyTorch refuses them."""
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name} must be an array of floating-point numbers, not "
                        f"{type(value).__name__}")
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.floating):
        raise TypeError(f"{name} must be an array of floating-point numbers (float16, float32, "
                        f"float64), not dtype {array.dtype}")
    return array


def _c_array(array: np.ndarray, batch, tail) -> np.ndarray:
    """array broadcast to batch + tail as the C API's contiguous float32 [B, H] + tail."""
    full = np.broadcast_to(array, tuple(batch) + tuple(tail))
    return np.ascontiguousarray(full, dtype=np.float32).reshape(
        _sdpa_shapes.merged(batch) + tuple(tail))


def _scale_argument(scale) -> Optional[float]:
    """sdpa's scale as the float32 the device multiplies by (None: the default 1/sqrt(E)); a
    value that rounds to a float32 zero (0.0, 1e-50) is 0.0. TypeError for what is not a real
    number, ValueError naming scale for one that is not finite in float32 (inf, NaN, 1e39)."""
    if scale is None:
        return None
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise TypeError(f"scale must be a float or None, not {type(scale).__name__}")
    try:
        with np.errstate(over="ignore"):
            single = float(np.float32(float(scale)))
    except OverflowError:  # an int beyond any float (10**400)
        single = math.inf
    if not math.isfinite(single):
        raise ValueError(f"scale must be finite in float32 (the device computes in float32: "
                         f"|scale| < {float(np.finfo(np.float32).max):.4g}), not {scale}")
    return single


def sdpa(query, key, value, attn_mask=None, is_causal: bool = False,
         scale: Optional[float] = None, enable_gqa: bool = False) -> np.ndarray:
    """PyTorch's torch.nn.functional.scaled_dot_product_attention on NumPy arrays.

    out = softmax(scale · query · keyᵀ + mask) · value, computed by clattn_sdpa on the default
    context's device (default_context()), in float32.

    Args:
        query: [..., L, E]; key: [..., S, E]; value: [..., S, Ev]: arrays of one floating
            dtype (float16, float32 or float64: the same for the three, as PyTorch requires)
            and at least 2 dimensions. The leading dimensions
            broadcast as in PyTorch (q·kᵀ's, then with value's; ranks may differ): query
            (2, 1, 1, 4, 8) with key and value (1, 2, 1, 4, 8) gives (2, 2, 1, 4, 8). Inputs
            smaller than the result are copied to its leading dimensions for the device.
        attn_mask: bool, float32 or the query's dtype (as PyTorch), broadcastable to the
            scores q·kᵀ [..., L, S] without growing them (PyTorch adds it in place); with 4-D
            query, key and value it needs 2 dimensions at least ((1, S), not (S,): PyTorch
            2.9 refuses fewer there). A boolean mask means True = attend (PyTorch's polarity:
            the binding inverts it for the C API, where nonzero = ignore); a floating one is
            added to the scores (-inf masks a key). A query that attends to no key gets zeros,
            as PyTorch's.
        is_causal: query i attends to the keys j <= i (a lower-triangular mask aligned at the
            top left, as PyTorch's). Not together with attn_mask (ValueError, as PyTorch).
        scale: multiplies the scores; None: 1/sqrt(E). Taken as a float32: a value that
            rounds to 0 there (0.0, 1e-50) gives PyTorch's result for 0, every score 0 (the
            softmax of the mask alone: uniform over the keys it leaves); one beyond float32's
            range (1e39), inf or NaN is a ValueError.
        enable_gqa: grouped-query attention: key and value have H_kv heads (dimension -3),
            dividing the query's H; each is used by H / H_kv query heads.

    Returns:
        [..., L, Ev], of the inputs' dtype (float64 inputs give float64, computed in
        float32). Zero-size inputs give what PyTorch gives: an empty result when
        it has no elements, zeros when there are no keys (S = 0), the mean of value's rows
        (softmax of the mask alone) when E = 0.

    Raises:
        TypeError: an argument of the wrong type or dtype (named), query, key and value of
            different dtypes, a floating mask of another dtype than float32 or the query's
            (named: PyTorch refuses the same).
        ValueError: shapes that do not agree or broadcast, or a mask that does not broadcast
            to the scores (named, with the shapes: PyTorch refuses the same); a scale that is
            not finite in float32.
        clattn.Error: the library's failure, with its message.
    """
    q = _floating_array(query, "query")
    k = _floating_array(key, "key")
    v = _floating_array(value, "value")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"query, key and value must have the same dtype (as in PyTorch), not "
                        f"query {q.dtype}, key {k.dtype} and value {v.dtype}")
    dtype = q.dtype
    if attn_mask is not None and is_causal:
        raise ValueError("attn_mask and is_causal cannot both be set (as in PyTorch)")
    c_scale = _scale_argument(scale)
    mask = None
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.floating):
            raise TypeError(f"attn_mask must be bool or floating-point (as in PyTorch), not "
                            f"dtype {mask.dtype}")
        if mask.dtype not in (np.bool_, np.float32, dtype):
            raise TypeError(f"a floating attn_mask must be float32 or the query's dtype (as in "
                            f"PyTorch), not {mask.dtype} with query {dtype}")
    plan = _sdpa_shapes.plan(q.shape, k.shape, v.shape,
                             None if mask is None else mask.shape, bool(enable_gqa))

    keys, width = k.shape[-2], q.shape[-1]
    if math.prod(plan.out_shape) == 0 or keys == 0:
        # PyTorch: no elements, or a softmax over no keys times no rows of value: zeros.
        return np.zeros(plan.out_shape, dtype=dtype)
    if c_scale == 0.0:
        # PyTorch multiplies query and key by sqrt(scale) = 0: every score is 0 (NaN where a
        # row holds inf or NaN), so the softmax is that of the mask alone. The C API's scale 0
        # means the default instead: the same scores come from q·0 and k·0 at scale 1.
        with np.errstate(invalid="ignore"):
            q, k = q * q.dtype.type(0), k * k.dtype.type(0)
        c_scale = 1.0
    params = _api.SdpaParams()
    lib.clattn_sdpa_params_default(ctypes.byref(params))
    params.scale = c_scale if c_scale is not None else 0.0  # 0: the library's 1/sqrt(E)
    if width == 0:
        # Every score is 0 (PyTorch scales q and k by sqrt(1/sqrt(0)) = inf, but a sum over no
        # products is 0): the same as a width of 1 with zeros, at any finite scale.
        q = np.zeros(q.shape[:-1] + (1,), dtype=np.float32)
        k = np.zeros(k.shape[:-1] + (1,), dtype=np.float32)
        params.scale = 1.0
    params.causal = 1 if is_causal else 0

    batch, length = plan.batch, q.shape[-2]
    if plan.kv_heads == "repeat":  # k's and v's heads differ: each repeated to the query's
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
        v = np.repeat(v, q.shape[-3] // v.shape[-3], axis=-3)
    kv_batch = batch
    if plan.kv_heads == "gqa":
        kv_batch = batch[:-1] + (k.shape[-3],)
        params.enable_gqa = 1
    c_q = _c_array(q, batch, q.shape[-2:])
    c_k = _c_array(k, kv_batch, k.shape[-2:])
    c_v = _c_array(v, kv_batch, v.shape[-2:])
    c_mask = None
    if mask is not None:
        if mask.dtype == np.bool_:
            mask = ~mask  # PyTorch: True = attend; the C API's bool masks: nonzero = ignore
            params.attn_mask_kind = _api.MASK_BOOL
        else:
            params.attn_mask_kind = _api.MASK_ADDITIVE
        c_mask = np.ascontiguousarray(_sdpa_shapes.mask_to_4d(mask, batch), dtype=np.float32)

    context = default_context()
    out4 = _sdpa_shapes.merged(batch) + (length, v.shape[-1])
    with _device_call(context) as tensors:
        tq, tk, tv = tensors.upload(c_q), tensors.upload(c_k), tensors.upload(c_v)
        if c_mask is not None:
            params.attn_mask = tensors.upload(c_mask).value
        tout = tensors.new(out4)
        context.check(lib.clattn_sdpa(context.handle, tq, tk, tv, tout, ctypes.byref(params)),
                      "sdpa")
        out = tensors.download(tout, out4)
    return out.reshape(plan.out_shape).astype(dtype, copy=False)


_MHA_WEIGHT_NAMES = ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight",
                     "in_proj_bias", "out_proj_weight", "out_proj_bias")


class MultiheadAttention:
    """torch.nn.MultiheadAttention(embed_dim, num_heads, bias, kdim, vdim, batch_first=True)
    for inference, on NumPy arrays (clattn_mha_* of clattn/attention.h).

    Load the weights with load_state_dict (PyTorch's names: "in_proj_weight",
    "out_proj.weight"...), then call the object. Its own context (device as SentenceModel's)
    and lock; close() waits for a call in flight, and a call after it raises clattn.Error.
    embed_dim, num_heads, kdim and vdim: ints from 1 to the largest size_t (kdim, vdim None:
    embed_dim).
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True,
                 kdim: Optional[int] = None, vdim: Optional[int] = None,
                 device: Optional[str] = None):
        embed_dim = int_argument(embed_dim, "embed_dim", 1)
        num_heads = int_argument(num_heads, "num_heads", 1)
        kdim = int_argument(kdim, "kdim", 1) if kdim is not None else 0
        vdim = int_argument(vdim, "vdim", 1) if vdim is not None else 0
        self._handle = ctypes.c_void_p()
        self._context = Context(device, owner="MultiheadAttention")
        config = _api.MhaConfig()
        lib.clattn_mha_config_default(ctypes.byref(config), embed_dim, num_heads)
        config.in_proj_bias = 1 if bias else 0
        config.out_proj_bias = 1 if bias else 0
        config.kdim = kdim
        config.vdim = vdim
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
        with self._context.exclusive():
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
        """Releases the layer and its context now (also done when the object is collected),
        after a call in flight in another thread; the calls made after it raise clattn.Error."""
        if getattr(self, "_context", None) is not None:
            self._context.close(self._destroy)

    def _destroy(self) -> None:
        if self._handle.value:
            lib.clattn_mha_destroy(ctypes.byref(self._handle))

    def __del__(self):
        if getattr(self, "_context", None) is not None:
            self._context.close_when_collected(self._destroy)
