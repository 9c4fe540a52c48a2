"""CrossEncoder: sentence-transformers' CrossEncoder.predict over clattn/cross_encoder.h."""

import ctypes
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _api
from ._api import lib
from ._arguments import int_argument, model_folder, utf8
from ._context import Context, Progress
from .sentence import _c_texts

# activation_fn names -> clattn_score_activation
_ACTIVATIONS = {
    "sigmoid": _api.SCORES_SIGMOID,
    "identity": _api.SCORES_RAW,
    "raw": _api.SCORES_RAW,
    "softmax": _api.SCORES_SOFTMAX,
}


def _pair_argument(pair, i: int) -> Tuple[bytes, bytes]:
    if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
        raise TypeError(f"pairs[{i}] must be a (query, document) pair of str")
    query, document = pair
    for text, what in ((query, "query"), (document, "document")):
        if not isinstance(text, str):
            raise TypeError(f"pairs[{i}]: the {what} must be a str, not {type(text).__name__}")
    return utf8(query, f"pairs[{i}]: the query"), utf8(document, f"pairs[{i}]: the document")


class CrossEncoder:
    """A cross-encoder (reranker) folder, scored on an OpenCL device.

    A Hugging Face *ForSequenceClassification folder (BERT, RoBERTa, XLM-RoBERTa, ModernBERT;
    clattn/cross_encoder.h), as sentence-transformers' CrossEncoder(path) loads it; path (a
    model name looked for in the model cache), device and precision as SentenceModel's. One call
    at a time per object (a lock); the GIL is released while the device works; close() waits for
    the call in flight, and a call after it raises clattn.Error. Raises
    clattn.ModelNotFoundError (a clattn.Error and a FileNotFoundError) when there is no such
    folder, clattn.Error with the library's message when the folder is refused.
    """

    def __init__(self, path, device: Optional[str] = None, precision: str = "fp32"):
        path_bytes = model_folder(path, "path")
        self._handle = ctypes.c_void_p()
        self._context = Context(device, precision, owner="CrossEncoder")
        self._context.check(lib.clattn_cross_encoder_load(
            self._context.handle, ctypes.byref(self._handle), path_bytes))
        info = _api.CrossEncoderInfo()
        self._context.check(lib.clattn_cross_encoder_get_info(self._handle, ctypes.byref(info)))
        self.num_labels: int = int(info.num_labels)
        """Scores per pair (1 for a reranker)."""
        self.labels: List[str] = [info.labels[k].decode() for k in range(self.num_labels)]
        """The labels' names (config.json's id2label)."""
        self.max_length: int = int(info.max_length)
        """Tokens per pair after truncation, special tokens included."""
        self.model_type: str = info.model_type.decode() if info.model_type else ""
        self.architecture: str = info.architecture.decode() if info.architecture else ""
        self.default_activation: str = (
            "sigmoid" if info.default_activation == _api.SCORES_SIGMOID else "identity")
        """What activation_fn=None applies: "sigmoid" or "identity" (config.json's)."""

    def predict(self, sentences: Union[Tuple[str, str], Sequence[Tuple[str, str]]],
                batch_size: int = 32, show_progress_bar: bool = False,
                activation_fn: Union[None, str, Callable[[np.ndarray], Any]] = None,
                apply_softmax: bool = False, convert_to_numpy: bool = True
                ) -> Union[np.ndarray, float, List[np.ndarray]]:
        """Scores (query, document) pairs, as sentence-transformers' CrossEncoder.predict.

        Args:
            sentences: one (query, document) pair (the result is then that pair's scores) or
                a list of them.
            batch_size: pairs per batch, an int from 1 to the largest size_t (speed only: a
                pair's scores do not depend on it).
            show_progress_bar: print "Batches: done/total" to stderr after each batch.
            activation_fn: None: the model's default (sigmoid for one label unless config.json
                says otherwise, identity for several); "sigmoid", "identity" (or "raw"),
                "softmax"; or a callable applied to the float32 logits [n, num_labels].
            apply_softmax: with several labels and activation_fn None, softmax over the labels.
            convert_to_numpy: False: a list of arrays (one per pair).

        Returns:
            float32 scores: [n] with one label, [n, num_labels] with several.
        """
        pairs = sentences
        single = (isinstance(pairs, (tuple, list)) and len(pairs) == 2
                  and all(isinstance(t, str) for t in pairs))
        if single:
            pairs = [pairs]
        if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__iter__"):
            raise TypeError("sentences must be a (query, document) pair or a list of pairs, "
                            f"not {type(sentences).__name__}")
        encoded = [_pair_argument(pair, i) for i, pair in enumerate(pairs)]
        batch_size = int_argument(batch_size, "batch_size", 1)

        python_activation = None
        if activation_fn is None:
            activation = (_api.SCORES_SOFTMAX if apply_softmax and self.num_labels > 1
                          else _api.SCORES_DEFAULT)
        elif isinstance(activation_fn, str):
            if activation_fn.lower() not in _ACTIVATIONS:
                raise ValueError(f"activation_fn must be one of {sorted(_ACTIVATIONS)}, a "
                                 f"callable or None, not {activation_fn!r}")
            activation = _ACTIVATIONS[activation_fn.lower()]
        elif callable(activation_fn):
            activation = _api.SCORES_RAW
            python_activation = activation_fn
        else:
            raise TypeError("activation_fn must be None, a str or a callable, not "
                            f"{type(activation_fn).__name__}")

        params = _api.CrossEncoderParams()
        lib.clattn_cross_encoder_params_default(ctypes.byref(params))
        params.batch_size = batch_size
        params.activation = activation
        progress = Progress("Batches", bool(show_progress_bar))
        params.progress = progress.callback

        out = np.empty((len(encoded), self.num_labels), dtype=np.float32)
        queries, query_lengths = _c_texts([q for q, _ in encoded])
        documents, document_lengths = _c_texts([d for _, d in encoded])
        with self._context.exclusive():  # also for no pairs: a closed model raises
            if encoded:
                self._context.check(lib.clattn_cross_encoder_score(
                    self._handle, queries, query_lengths, documents, document_lengths,
                    len(encoded), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                    ctypes.byref(params), None))
        scores = out
        if python_activation is not None:
            scores = np.asarray(python_activation(out), dtype=np.float32)
        if self.num_labels == 1:
            scores = scores.reshape(len(encoded))
        if single:
            return scores[0]
        if not convert_to_numpy:
            return list(scores)
        return scores

    def rank(self, query: str, documents: Sequence[str], top_k: Optional[int] = None,
             return_documents: bool = False, batch_size: int = 32,
             activation_fn: Union[None, str, Callable[[np.ndarray], Any]] = None
             ) -> List[Dict[str, Any]]:
        """The documents ranked for a query, best first, as sentence-transformers'
        CrossEncoder.rank: a list of {"corpus_id": i, "score": s} (and "text" with
        return_documents), top_k of them (None: all; else an int >= 1). Needs a model with one
        label."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        if top_k is not None:
            top_k = int_argument(top_k, "top_k", 1, None)
        if isinstance(documents, str):
            raise TypeError("documents must be a list of str, not a str")
        documents = list(documents)
        scores = self.predict([(query, d) for d in documents], batch_size=batch_size,
                              activation_fn=activation_fn)
        if self.num_labels != 1:
            raise ValueError("rank needs a model with one label; this one has "
                             f"{self.num_labels}")
        order = sorted(range(len(documents)), key=lambda i: -float(scores[i]))
        if top_k is not None:
            order = order[:top_k]
        ranked = []
        for i in order:
            entry = {"corpus_id": i, "score": float(scores[i])}
            if return_documents:
                entry["text"] = documents[i]
            ranked.append(entry)
        return ranked

    def close(self) -> None:
        """Releases the model and its context now (also done when the object is collected).
        Waits for a predict in flight in another thread; the calls made after it raise
        clattn.Error. A second close() does nothing. Called on the thread of a call in flight
        (a signal handler, a progress callback), it does not wait: that call finishes as usual
        and frees the model when it returns."""
        if getattr(self, "_context", None) is not None:
            self._context.close(self._destroy)

    def _destroy(self) -> None:
        if self._handle.value:
            lib.clattn_cross_encoder_destroy(ctypes.byref(self._handle))

    def __del__(self):
        if getattr(self, "_context", None) is not None:
            self._context.close_when_collected(self._destroy)

    def __enter__(self) -> "CrossEncoder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"CrossEncoder(architecture={self.architecture!r}, "
                f"num_labels={self.num_labels}, max_length={self.max_length})")
