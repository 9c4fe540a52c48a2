"""SentenceModel: sentence-transformers' SentenceTransformer.encode over clattn/pretrained.h."""

import ctypes
from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from . import _api
from ._api import lib
from ._arguments import int_argument, model_folder, utf8
from ._context import Context, Progress, check


def _texts_argument(sentences, name: str = "sentences"):
    """(list of UTF-8 bytes, input_was_string) for a str or a sequence of str."""
    if isinstance(sentences, str):
        return [utf8(sentences, name)], True
    if isinstance(sentences, (bytes, bytearray)) or not hasattr(sentences, "__iter__"):
        raise TypeError(f"{name} must be a str or a list of str, not {type(sentences).__name__}")
    encoded = []
    for i, text in enumerate(sentences):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{i}] must be a str, not {type(text).__name__}")
        encoded.append(utf8(text, f"{name}[{i}]"))
    return encoded, False


def _c_texts(texts: List[bytes]):
    """The C arrays (const char *const *, const size_t *) of a list of bytes, kept alive by the
    caller holding the returned tuple."""
    pointers = (ctypes.c_char_p * max(len(texts), 1))(*texts)
    lengths = (ctypes.c_size_t * max(len(texts), 1))(*[len(t) for t in texts])
    return pointers, lengths


class SentenceModel:
    """A sentence-transformers model folder, embedded on an OpenCL device.

    Loads the folder the way sentence-transformers' SentenceTransformer(path) does (config.json,
    model.safetensors, the tokenizer, sentence_bert_config.json, the Pooling and Normalize
    modules, config_sentence_transformers.json's prompts) with clattn_sentence_model_load, on
    its own context (device: a spec as CLATTN_DEVICE: "gpu", "cpu", "P:D" or part of a device
    name; None: CLATTN_DEVICE, else the first GPU, else the first CPU). precision: the GEMMs'
    number format, "fp32" (default), "bf16" or "int8" (as embed --precision: CPU devices with
    oneDNN; clattn.Error naming the missing CPU feature elsewhere; docs/performance.md gives the
    accuracy against fp32).

    The embeddings are the very bytes the command-line `embed` writes for the same texts: the
    texts are sorted by length and batched, and a text's row never depends on its neighbours.

    path: the folder (a str or os.PathLike); a model name that is not a folder here is looked
    for in the model cache that tools/fetch-model.sh fills ($CLATTN_MODEL_CACHE, else
    ~/.cache/clattn), as sentence-transformers finds a hub name in its cache:
    "all-MiniLM-L6-v2" and "sentence-transformers/all-MiniLM-L6-v2" as CACHE/all-MiniLM-L6-v2
    (where the script puts it), another ORG/NAME as CACHE/ORG/NAME. An empty path is a
    ValueError.

    Thread safety: one call at a time per model (a lock serialises them; tokenize runs beside
    them); two models run in parallel in two threads (the GIL is released while the device
    works). close() waits for the calls in flight; a call after it raises clattn.Error.

    Raises clattn.ModelNotFoundError (a clattn.Error and a FileNotFoundError) naming where it
    looked when there is no such folder, clattn.Error (with the library's message: the file
    and what is wrong) when the folder cannot be loaded.
    """

    def __init__(self, path, device: Optional[str] = None, precision: str = "fp32"):
        path_bytes = model_folder(path, "path")
        self._handle = ctypes.c_void_p()
        self._context = Context(device, precision, owner="SentenceModel")
        self._context.check(lib.clattn_sentence_model_load(
            self._context.handle, ctypes.byref(self._handle), path_bytes))
        info = _api.SentenceModelInfo()
        self._context.check(lib.clattn_sentence_model_get_info(self._handle,
                                                               ctypes.byref(info)))
        self._dimension = int(info.hidden_size)
        self._model_max_length = int(info.max_length)
        self._max_seq_length = int(info.max_length)
        self.pooling: str = _api.POOLING_NAMES.get(info.pooling, str(info.pooling))
        """The pooling: "mean" or "cls"."""
        self.normalize: bool = bool(info.normalize)
        """Whether the model itself normalises its embeddings (a Normalize module)."""
        self.default_prompt_name: Optional[str] = (
            info.default_prompt_name.decode() if info.default_prompt_name else None)
        """config_sentence_transformers.json's default_prompt_name, or None."""
        self.prompts: Dict[str, str] = {}
        """The model's prompts, name -> text (config_sentence_transformers.json)."""
        i = 0
        while True:
            name = lib.clattn_sentence_model_prompt_name(self._handle, i)
            if name is None:
                break
            text = lib.clattn_sentence_model_prompt(self._handle, name)
            self.prompts[name.decode()] = text.decode() if text is not None else ""
            i += 1

    # ---- sentence-transformers' attributes ----

    @property
    def max_seq_length(self) -> int:
        """Tokens per text after truncation, special tokens included. Settable to a smaller
        value (at least 2, at most the model's), as in sentence-transformers."""
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self._max_seq_length = int_argument(value, "max_seq_length", 2, self._model_max_length)

    def get_sentence_embedding_dimension(self) -> int:
        """The width of each embedding (the model's hidden size)."""
        return self._dimension

    @property
    def device(self) -> str:
        """The name of the OpenCL device the model runs on."""
        return self._context.device()["name"]

    # ---- encode ----

    def encode(self, sentences: Union[str, Sequence[str]], batch_size: int = 32,
               normalize_embeddings: bool = False, show_progress_bar: bool = False,
               prompt: Optional[str] = None, prompt_name: Optional[str] = None,
               convert_to_numpy: bool = True) -> Union[np.ndarray, List[np.ndarray]]:
        """Embeds texts, as sentence-transformers' SentenceTransformer.encode.

        Args:
            sentences: a str (the result is then one 1-D array) or a list of str.
            batch_size: texts per batch, an int from 1 to the largest size_t (speed and memory
                only: the rows do not depend on it).
            normalize_embeddings: True L2-normalises every embedding; False (the default, as in
                sentence-transformers) leaves them as the model makes them: a model with a
                Normalize module (self.normalize) normalises, one without does not.
            show_progress_bar: print "Batches: done/total" to stderr after each batch.
            prompt: text put before every text ("query: "); wins over prompt_name.
            prompt_name: the name of one of the model's prompts (self.prompts). Neither: the
                model's default prompt, if it has one.
            convert_to_numpy: True: one float32 array [len(sentences), dimension]; False: a
                list of 1-D float32 arrays.

        Raises:
            TypeError, ValueError: an argument of the wrong type or value (named).
            clattn.Error: the library's failure (an unknown prompt_name, the device...), or
                the model is closed.
        """
        texts, single = _texts_argument(sentences)
        batch_size = int_argument(batch_size, "batch_size", 1)
        for value, name in ((prompt, "prompt"), (prompt_name, "prompt_name")):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
        if prompt is not None:
            prompt_name = None  # sentence-transformers: prompt wins over prompt_name
        params = _api.EmbedParams()
        lib.clattn_embed_params_default(ctypes.byref(params))
        params.batch_size = batch_size
        params.max_length = (0 if self._max_seq_length == self._model_max_length
                             else self._max_seq_length)
        params.normalize = 1 if normalize_embeddings else -1
        params.prompt = utf8(prompt, "prompt") if prompt is not None else None
        params.prompt_name = utf8(prompt_name, "prompt_name") if prompt_name is not None else None
        progress = Progress("Batches", bool(show_progress_bar))
        params.progress = progress.callback

        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        pointers, lengths = _c_texts(texts)
        with self._context.exclusive():  # also for no texts: a closed model raises
            if texts:
                self._context.check(lib.clattn_sentence_model_embed(
                    self._handle, pointers, lengths, len(texts),
                    out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), ctypes.byref(params),
                    None))
        if single:
            return out[0]
        if not convert_to_numpy:
            return list(out)
        return out

    def tokenize(self, texts: Union[str, Sequence[str]]) -> Dict[str, np.ndarray]:
        """The token ids encode() gives the model, padded into arrays.

        Returns a dict of int64 arrays [len(texts), longest]: "input_ids" (padded with the
        tokenizer's pad id, 0 when it has none), "attention_mask" (1 for a real token) and
        "token_type_ids" (zeros), as sentence-transformers' tokenize gives them (NumPy instead
        of torch). No prompt is added. Thread-safe without the model's lock: any number of
        threads tokenize at once, also while another encodes; close() waits for them.
        """
        encoded, _ = _texts_argument(texts, "texts")
        rows = []
        max_length = self._max_seq_length
        ids = (ctypes.c_int32 * max_length)()
        count = ctypes.c_size_t()
        with self._context.shared():
            for text in encoded:
                # sentence-transformers strips the text before tokenizing; so does the C call.
                check(lib.clattn_sentence_model_encode(self._handle, text, len(text),
                                                       max_length, ids, max_length,
                                                       ctypes.byref(count)))
                rows.append(list(ids[:count.value]))
            special = lib.clattn_tokenizer_special_ids(
                lib.clattn_sentence_model_tokenizer(self._handle))
        longest = max((len(r) for r in rows), default=0)
        pad = special.pad if special.pad >= 0 else 0
        input_ids = np.full((len(rows), longest), pad, dtype=np.int64)
        attention_mask = np.zeros((len(rows), longest), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, :len(row)] = row
            attention_mask[i, :len(row)] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "token_type_ids": np.zeros_like(input_ids)}

    def close(self) -> None:
        """Releases the model and its context now (also done when the object is collected).
        Waits for the calls in flight in other threads (encode, tokenize); the calls made
        after it raise clattn.Error. A second close() does nothing. Called on the thread of a
        call in flight (a signal handler, a progress callback), it does not wait: that call
        finishes as usual and frees the model when it returns."""
        if getattr(self, "_context", None) is not None:
            self._context.close(self._destroy)

    def _destroy(self) -> None:
        if self._handle.value:
            lib.clattn_sentence_model_destroy(ctypes.byref(self._handle))

    def __del__(self):
        if getattr(self, "_context", None) is not None:
            self._context.close_when_collected(self._destroy)

    def __enter__(self) -> "SentenceModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"SentenceModel(dimension={self._dimension}, "
                f"max_seq_length={self._max_seq_length}, pooling={self.pooling!r}, "
                f"normalize={self.normalize})")


SentenceTransformer = SentenceModel
