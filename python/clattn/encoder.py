"""Encoder: the library's Transformer encoder model files (clattn/encoder.h) on NumPy arrays."""

import ctypes
from typing import Any, Dict, Optional

import numpy as np

from . import _api
from ._api import lib
from ._arguments import model_file
from ._context import Context
from .attention import _device_call, float_array

_ACTIVATION_NAMES = {0: "relu", 1: "gelu", 2: "gelu_tanh", 3: "silu"}
_POSITIONAL_NAMES = {0: "none", 1: "sinusoidal", 2: "learned", 3: "learned_padded"}


class Encoder:
    """A stack of nn.TransformerEncoderLayer (batch_first, inference) from a model file.

    Make one with Encoder.from_file(path): a safetensors file as tools/export_torch.py writes
    it (clattn_encoder_load_file: the configuration in the header's metadata, the weights by
    nn.TransformerEncoder's state_dict names). Its own context and lock; close() waits for a
    call in flight, and a call after it raises clattn.Error.
    """

    def __init__(self):
        raise TypeError("use clattn.Encoder.from_file(path)")

    @classmethod
    def from_file(cls, path, device: Optional[str] = None) -> "Encoder":
        """Loads a model file; raises clattn.ModelNotFoundError (a clattn.Error and a
        FileNotFoundError) when it does not exist, clattn.Error naming the file and what is wrong
        when it is refused."""
        path_bytes = model_file(path, "path")
        self = cls.__new__(cls)
        self._handle = ctypes.c_void_p()
        self._context = Context(device, owner="Encoder")
        self._context.check(lib.clattn_encoder_load_file(
            self._context.handle, ctypes.byref(self._handle), path_bytes))
        config = _api.EncoderConfig()
        self._context.check(lib.clattn_encoder_get_config(self._handle, ctypes.byref(config)))
        self.config: Dict[str, Any] = {
            "d_model": config.d_model, "nhead": config.nhead, "num_layers": config.num_layers,
            "dim_feedforward": config.dim_feedforward,
            "activation": _ACTIVATION_NAMES.get(config.activation, str(config.activation)),
            "norm_first": bool(config.norm_first), "layer_norm_eps": config.layer_norm_eps,
            "final_norm": bool(config.final_norm),
            "positional": _POSITIONAL_NAMES.get(config.positional, str(config.positional)),
            "vocab_size": config.vocab_size,
        }
        """The model's configuration (a few of clattn_encoder_config's fields)."""
        self.d_model = int(config.d_model)
        return self

    def forward(self, src, src_key_padding_mask=None, is_causal: bool = False) -> np.ndarray:
        """nn.TransformerEncoder(src, src_key_padding_mask=..., is_causal=...) on
        src [B, N, d_model]; the positional encoding of the file (if any) is added first.
        src_key_padding_mask [B, N]: boolean True (or nonzero) marks padding, a float mask is
        added. Returns float32 [B, N, d_model]."""
        x = float_array(src, "src")
        if x.ndim != 3 or x.shape[2] != self.d_model:
            raise ValueError(f"src must be [B, N, {self.d_model}], not shape {x.shape}")
        return self._run(x, None, src_key_padding_mask, is_causal)

    __call__ = forward

    def forward_tokens(self, ids, src_key_padding_mask=None,
                       is_causal: bool = False) -> np.ndarray:
        """The same from token ids [B, N] (a model file with an embedding); int64 ids."""
        if self.config["vocab_size"] == 0:
            raise ValueError("this model has no token embedding: use forward on floats")
        tokens = np.asarray(ids)
        if not np.issubdtype(tokens.dtype, np.integer):
            raise TypeError(f"ids must be an integer array, not dtype {tokens.dtype}")
        if tokens.ndim != 2:
            raise ValueError(f"ids must be [B, N], not shape {tokens.shape}")
        if tokens.dtype == np.uint64 and tokens.size and tokens.max() > np.iinfo(np.int64).max:
            raise ValueError(f"ids must fit in int64; the largest is {tokens.max()}")
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        return self._run(None, tokens, src_key_padding_mask, is_causal)

    def _run(self, x, tokens, padding, is_causal):
        shape = x.shape if x is not None else tokens.shape + (self.d_model,)
        params = _api.EncoderForwardParams()
        lib.clattn_encoder_forward_params_default(ctypes.byref(params))
        params.causal = 1 if is_causal else 0
        with _device_call(self._context) as tensors:
            if padding is not None:
                raw = np.asarray(padding)
                params.key_padding_mask_kind = (_api.MASK_BOOL if raw.dtype == np.bool_
                                                else _api.MASK_ADDITIVE)
                params.key_padding_mask = tensors.upload(
                    float_array(raw, "src_key_padding_mask")).value
            out = tensors.new(shape)
            if x is not None:
                status = lib.clattn_encoder_forward(self._handle, tensors.upload(x), out,
                                                    ctypes.byref(params))
            else:
                status = lib.clattn_encoder_forward_tokens(
                    self._handle, tokens.ctypes.data_as(ctypes.POINTER(ctypes.c_int64)),
                    shape[0], shape[1], out, ctypes.byref(params))
            self._context.check(status, "Encoder")
            return tensors.download(out, shape)

    def close(self) -> None:
        """Releases the encoder and its context now (also done when collected), after a call
        in flight in another thread; the calls made after it raise clattn.Error."""
        if getattr(self, "_context", None) is not None:
            self._context.close(self._destroy)

    def _destroy(self) -> None:
        if self._handle.value:
            lib.clattn_encoder_destroy(ctypes.byref(self._handle))

    def __del__(self):
        if getattr(self, "_context", None) is not None:
            self._context.close_when_collected(self._destroy)
