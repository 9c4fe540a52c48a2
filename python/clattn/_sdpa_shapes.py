"""clattn.sdpa's shapes: PyTorch's broadcasting rules, and the C API's [B, H, N, d] tensors.

torch.nn.functional.scaled_dot_product_attention computes scores = q·kᵀ (matmul: the leading
dimensions of q and k broadcast), adds the mask to the scores in place (so the mask broadcasts
to the scores' shape without growing it), then scores·v (the leading dimensions broadcast again,
with v's). With enable_gqa, k and v first repeat each head H_q / H_kv times (dimension -3). The
plan below follows those steps and refuses, naming the shapes, what PyTorch refuses (also a
mask of fewer than 2 dimensions with 4-D query, key and value, which PyTorch 2.9's CPU path
refuses while it broadcasts such a mask at other ranks).

clattn_sdpa takes [B, H, N, d] tensors of equal B and H (H_kv for k and v with enable_gqa): the
result's leading dimensions are merged into B (all but the last) and H (the last), and every
input is broadcast to them (a copy only where it is smaller).
"""

import math
from typing import NamedTuple, Optional, Tuple

import numpy as np

Shape = Tuple[int, ...]


class SdpaPlan(NamedTuple):
    out_shape: Shape     # the result: batch + (L, Ev)
    batch: Shape         # the result's leading dimensions
    scores_batch: Shape  # q·kᵀ's leading dimensions (the mask broadcasts to these + (L, S))
    # How k and v reach the query's heads: "broadcast" (the heads broadcast as any dimension),
    # "gqa" (k and v keep their H_kv heads: clattn_sdpa's enable_gqa) or "repeat" (k's and v's
    # heads differ: each is repeated to the query's heads first, as torch's repeat_interleave).
    kv_heads: str


def _broadcast(what: str, *shapes: Shape) -> Shape:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"{what} do not broadcast (as in torch's "
                         "scaled_dot_product_attention)") from None


def _names(q: Shape, k: Shape, v: Shape) -> str:
    return f"query {q}, key {k} and value {v}"


def plan(q: Shape, k: Shape, v: Shape, mask: Optional[Shape], enable_gqa: bool) -> SdpaPlan:
    """The shapes of one call (q [..., L, E], k [..., S, E], v [..., S, Ev], mask broadcastable
    to the scores [..., L, S]); ValueError naming the shapes for what PyTorch refuses."""
    q, k, v = tuple(q), tuple(k), tuple(v)
    for shape, name in ((q, "query"), (k, "key"), (v, "value")):
        if len(shape) < 2:
            raise ValueError(f"{name} must have at least 2 dimensions [..., N, d], not shape "
                             f"{shape}")
    if q[-1] != k[-1]:
        raise ValueError(f"query and key must have the same last dimension: {_names(q, k, v)}")
    if k[-2] != v[-2]:
        raise ValueError(f"key and value must have as many rows (dimension -2): "
                         f"{_names(q, k, v)}")
    length, keys, width_v = q[-2], k[-2], v[-1]

    kv_heads = "broadcast"
    k_batch, v_batch = k[:-2], v[:-2]
    if enable_gqa:
        if min(len(q), len(k), len(v)) < 3:
            raise ValueError("enable_gqa needs query, key and value of at least 3 dimensions "
                             f"[..., H, N, d]: {_names(q, k, v)}")
        heads, k_heads, v_heads = q[-3], k[-3], v[-3]
        if not heads == k_heads == v_heads:
            if not (k_heads and v_heads and heads % k_heads == 0 and heads % v_heads == 0):
                raise ValueError("with enable_gqa the heads of key and value (dimension -3) "
                                 f"must divide the query's: {_names(q, k, v)}")
            # k and v repeat each head to the query's heads before broadcasting.
            k_batch, v_batch = k[:-3] + (heads,), v[:-3] + (heads,)
            kv_heads = "gqa" if k_heads == v_heads else "repeat"

    scores_batch = _broadcast(f"the leading dimensions of query {q} and key {k}",
                              q[:-2], k_batch)
    batch = _broadcast(f"the leading dimensions of q·kᵀ {scores_batch + (length, keys)} "
                       f"(query {q}, key {k}) and value {v}", scores_batch, v_batch)
    if mask is not None:
        mask = tuple(mask)
        scores = scores_batch + (length, keys)
        if len(mask) < 2 and len(q) == len(k) == len(v) == 4:
            # PyTorch 2.9 (CPU) takes its fused path for 4-D inputs, which reads the mask's
            # dimension -2: an IndexError there, where other ranks broadcast such a mask.
            as_2d = (1,) * (2 - len(mask)) + mask
            raise ValueError(f"attn_mask of shape {mask} has fewer than 2 dimensions, which "
                             f"PyTorch's scaled_dot_product_attention refuses with 4-D query "
                             f"{q}, key {k} and value {v}: give it as {as_2d}")
        try:  # a mask with more dimensions, or larger ones, would grow the scores
            fits = tuple(np.broadcast_shapes(mask, scores)) == scores
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"attn_mask of shape {mask} does not broadcast to the scores "
                             f"q·kᵀ of shape {scores} (query {q}, key {k}; as in torch's "
                             "scaled_dot_product_attention, the mask cannot grow them)")
    return SdpaPlan(batch + (length, width_v), batch, scores_batch, kv_heads)


def merged(batch: Shape) -> Tuple[int, int]:
    """The C API's (B, H) for leading dimensions: (1, 1) for none, else all but the last
    merged into B, the last as H."""
    if not batch:
        return 1, 1
    return math.prod(batch[:-1]), batch[-1]


def mask_to_4d(mask: np.ndarray, batch: Shape) -> np.ndarray:
    """A mask that broadcasts to batch + (L, S), as the C API's [B or 1, H or 1, L or 1, S or 1]
    (which broadcasts size-1 dimensions): leading dimensions spelled out only when the mask has
    some that are not 1."""
    shape = (1,) * (len(batch) + 2 - mask.ndim) + mask.shape
    mask = mask.reshape(shape)
    if not batch:
        return mask.reshape((1, 1) + shape)
    lead, rest = shape[:-3], shape[-3:]
    if all(size == 1 for size in lead):
        return mask.reshape((1,) + rest)
    if lead != batch[:-1]:
        mask = np.broadcast_to(mask, batch[:-1] + rest)
    return mask.reshape((math.prod(batch[:-1]),) + rest)
