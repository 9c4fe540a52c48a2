"""LLM: a decoder-only language model from a GGUF file over clattn/llm.h and clattn/llm_text.h,
with transformers' and llama-cpp-python's names: tokenize, detokenize, apply_chat_template,
logits, generate, chat."""

import ctypes
import json
import queue
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _api
from ._api import lib
from ._arguments import int_argument, model_file, utf8
from ._context import Context, Error, check

_FINISH = {1: "stop", 2: "length", 3: "stop", 4: "cancelled"}


@dataclass
class Generation:
    """What LLM.generate and LLM.chat give."""
    tokens: List[int]
    """The generated ids (an end-of-generation token not included)."""
    text: str
    """Their text (ending before a stop string)."""
    finish_reason: str
    """"stop" (an end-of-generation token or a stop string) or "length" (max_new_tokens)."""
    prompt_tokens: int
    timings: Dict[str, float] = field(default_factory=dict)
    """prompt_seconds, decode_seconds."""


def _float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


class LLM:
    """A decoder-only LLM (llama, qwen2, qwen3) from a GGUF file, run on an OpenCL device, with
    the file's tokenizer and chat template.

    device as clattn.devices()' "spec" (None: $CLATTN_DEVICE, else the first GPU, else the first
    CPU); precision None or "fp32" (activations are float32, the default) or "int8" (the
    activations entering block-type weights quantised to int8 per block, integer dot products:
    faster on CPUs, logits within about 1e-1 of float32's; clattn_llm_set_precision in
    clattn/llm.h). One call at a time per object (a
    lock); the GIL is released while the device works; close() (or a with block) releases the
    model, and a call after it raises clattn.Error. A missing file raises
    clattn.ModelNotFoundError; a refused one clattn.Error with the library's message.
    """

    def __init__(self, path, device: Optional[str] = None, precision: Optional[str] = None):
        path_bytes = model_file(path, "path")
        self._llm = ctypes.c_void_p()
        self._text = ctypes.c_void_p()
        if precision not in (None, "fp32", "int8"):
            raise ValueError(f"precision must be None, 'fp32' or 'int8', not {precision!r}")
        self._context = Context(device, "fp32", owner="LLM")
        with self._context.exclusive():
            self._context.check(lib.clattn_llm_load(self._context.handle, path_bytes,
                                                    ctypes.byref(self._llm)))
            if precision == "int8":
                self._context.check(lib.clattn_llm_set_precision(self._llm,
                                                                 _api.PRECISIONS["int8"]))
            info = _api.LlmInfo()
            self._context.check(lib.clattn_llm_get_info(self._llm, ctypes.byref(info)))
        # The tokenizer and template from the metadata the model read: the file is opened once.
        check(lib.clattn_llm_text_from_model(self._llm, ctypes.byref(self._text)))
        self.architecture: str = info.architecture.decode()
        self.vocab_size: int = int(info.vocab_size)
        """Logits per token."""
        self.context_length: int = int(info.context_length)
        self.num_layers: int = int(info.num_layers)
        self.d_model: int = int(info.d_model)
        template = lib.clattn_llm_chat_template(self._text)
        self.chat_template: Optional[str] = (template.decode("utf-8", "replace") if template
                                             else None)
        """The file's tokenizer.chat_template (None when it has none)."""
        self.bos_token_id: Optional[int] = self._id_or_none(lib.clattn_llm_bos_id(self._text))
        self.eos_token_id: Optional[int] = self._id_or_none(lib.clattn_llm_eos_id(self._text))
        self.bos_token: Optional[str] = self._token_text(self.bos_token_id)
        self.eos_token: Optional[str] = self._token_text(self.eos_token_id)

    @staticmethod
    def _id_or_none(value: int) -> Optional[int]:
        return None if value < 0 else int(value)

    def _token_text(self, token: Optional[int]) -> Optional[str]:
        if token is None:
            return None
        raw = lib.clattn_llm_token_text(self._text, token)
        return raw.decode("utf-8", "replace") if raw is not None else None

    # ---- text ----

    def tokenize(self, text: str, add_special_tokens: bool = True,
                 parse_special: bool = False) -> List[int]:
        """The ids of text: add_special_tokens adds BOS (and EOS) as the file says;
        parse_special matches control tokens written in the text ("<|im_start|>")."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        raw = utf8(text, "text")
        ids = ctypes.POINTER(ctypes.c_int32)()
        count = ctypes.c_size_t()
        with self._context.shared():
            check(lib.clattn_llm_tokenize(self._text, raw, len(raw), int(bool(add_special_tokens)),
                                          int(bool(parse_special)), ctypes.byref(ids),
                                          ctypes.byref(count)))
        try:
            return [int(ids[i]) for i in range(count.value)]
        finally:
            lib.clattn_llm_free(ctypes.cast(ids, ctypes.c_void_p))

    def _ids_argument(self, ids: Any, name: str) -> "ctypes.Array":
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"{name} must be a list of ids, not {type(ids).__name__}")
        values = [int_argument(v, f"{name}[{i}]", 0, self.vocab_size - 1)
                  for i, v in enumerate(ids)]
        return (ctypes.c_int32 * max(len(values), 1))(*values), len(values)

    def detokenize(self, ids: Sequence[int], special: bool = False) -> str:
        """The text of ids (special: control tokens give their text)."""
        array, n = self._ids_argument(ids, "ids")
        out = ctypes.POINTER(ctypes.c_char)()
        length = ctypes.c_size_t()
        with self._context.shared():
            check(lib.clattn_llm_detokenize(self._text, array, n, int(bool(special)),
                                            ctypes.byref(out), ctypes.byref(length)))
        try:
            return ctypes.string_at(out, length.value).decode("utf-8", "replace")
        finally:
            lib.clattn_llm_free(ctypes.cast(out, ctypes.c_void_p))

    def apply_chat_template(self, messages: List[Dict[str, Any]],
                            add_generation_prompt: bool = True, tokenize: bool = False,
                            chat_template: Optional[str] = None) -> Union[str, List[int]]:
        """The conversation rendered with the chat template (the file's, or chat_template), as
        transformers' apply_chat_template: the text, or its ids with tokenize=True (no BOS
        added, control tokens matched)."""
        try:
            encoded = json.dumps(messages, ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as err:
            raise TypeError(f"messages must be JSON-serialisable: {err}") from None
        template = utf8(chat_template, "chat_template") if chat_template is not None else None
        out = ctypes.POINTER(ctypes.c_char)()
        length = ctypes.c_size_t()
        with self._context.shared():
            check(lib.clattn_llm_apply_chat_template(self._text, encoded, template,
                                                     int(bool(add_generation_prompt)),
                                                     ctypes.byref(out), ctypes.byref(length)))
        try:
            text = ctypes.string_at(out, length.value).decode("utf-8", "replace")
        finally:
            lib.clattn_llm_free(ctypes.cast(out, ctypes.c_void_p))
        if tokenize:
            return self.tokenize(text, add_special_tokens=False, parse_special=True)
        return text

    # ---- the model ----

    def logits(self, ids: Sequence[int]) -> np.ndarray:
        """Teacher-forced logits of ids: float32 [len(ids), vocab_size]."""
        array, n = self._ids_argument(ids, "ids")
        if n == 0:
            raise ValueError("ids is empty")
        out = np.empty((n, self.vocab_size), dtype=np.float32)
        with self._context.exclusive():
            self._context.check(lib.clattn_llm_logits(
                self._llm, array, n, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))
        return out

    def _options(self, max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                 presence_penalty, frequency_penalty, seed, stop):
        o = _api.LlmGenerateOptions()
        lib.clattn_llm_generate_options_default(ctypes.byref(o))
        o.max_new_tokens = int_argument(max_new_tokens, "max_new_tokens", 1)
        s = o.sampling
        s.temperature = _float(temperature, "temperature")
        s.top_k = int_argument(top_k, "top_k", 0, 2**31 - 1)
        s.top_p = _float(top_p, "top_p")
        s.min_p = _float(min_p, "min_p")
        s.repetition_penalty = _float(repetition_penalty, "repetition_penalty")
        s.presence_penalty = _float(presence_penalty, "presence_penalty")
        s.frequency_penalty = _float(frequency_penalty, "frequency_penalty")
        s.seed = int_argument(seed, "seed", 0, 2**64 - 1)
        if stop is None:
            stops = []
        elif isinstance(stop, str):
            stops = [stop]
        else:
            stops = list(stop)
        encoded = []
        for i, text in enumerate(stops):
            if not isinstance(text, str):
                raise TypeError(f"stop[{i}] must be a str, not {type(text).__name__}")
            encoded.append(utf8(text, f"stop[{i}]"))
        array = (ctypes.c_char_p * max(len(encoded), 1))(*encoded)
        o.stop = array
        o.stop_count = len(encoded)
        return o, array  # the array must live as long as the options

    def _prompt_ids(self, prompt: Union[str, Sequence[int]]):
        if isinstance(prompt, str):
            ids = self.tokenize(prompt, add_special_tokens=True)
        else:
            ids = prompt
        array, n = self._ids_argument(ids, "prompt")
        if n == 0:
            raise ValueError("the prompt is empty (no tokens)")
        return array, n

    @staticmethod
    def _result(result) -> Generation:
        return Generation(
            tokens=[int(result.tokens[i]) for i in range(result.token_count)],
            text=ctypes.string_at(result.text, result.text_length).decode("utf-8", "replace"),
            finish_reason=_FINISH.get(result.finish, "stop"),
            prompt_tokens=int(result.prompt_tokens),
            timings={"prompt_seconds": result.prompt_seconds,
                     "decode_seconds": result.decode_seconds})

    def _run(self, array, n, options, on_piece=None) -> Generation:
        def callback(piece, length, token, logits, user):
            if on_piece is None:
                return 0
            return 1 if on_piece(ctypes.string_at(piece, length)) else 0

        c_callback = _api.llm_token_callback(callback)
        result = _api.LlmGeneration()
        with self._context.exclusive():
            self._context.check(lib.clattn_llm_generate(
                self._llm, self._text, None, 0, array, n, ctypes.byref(options), c_callback,
                None, ctypes.byref(result)))
        try:
            return self._result(result)
        finally:
            lib.clattn_llm_generation_clear(ctypes.byref(result))

    def generate(self, prompt: Union[str, Sequence[int]], max_new_tokens: int = 256,
                 temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                 min_p: float = 0.0, repetition_penalty: float = 1.0,
                 presence_penalty: float = 0.0, frequency_penalty: float = 0.0, seed: int = 0,
                 stop: Union[None, str, Sequence[str]] = None, stream: bool = False
                 ) -> Union[Generation, Iterator[str]]:
        """A continuation of prompt (a str, tokenized with BOS as the file says, or a list of
        ids): temperature 0 is greedy; else repetition_penalty, the presence and frequency
        penalties, temperature, top_k, top_p, min_p in transformers' order, drawn from seed's
        stream (the same seed and inputs give the same tokens). It ends at an
        end-of-generation token, before a stop string, or after max_new_tokens (a prompt and
        max_new_tokens beyond the model's context raise clattn.Error naming the numbers).
        Returns a Generation (.tokens, .text); with stream=True an iterator of text pieces
        (valid UTF-8 each) that join to the text."""
        array, n = self._prompt_ids(prompt)
        options, keep = self._options(max_new_tokens, temperature, top_k, top_p, min_p,
                                      repetition_penalty, presence_penalty, frequency_penalty,
                                      seed, stop)
        if not stream:
            return self._run(array, n, options)
        return self._stream(array, n, options, keep)

    def generate_batch(self, prompts: Sequence[Union[str, Sequence[int]]],
                       max_new_tokens: int = 256, temperature: float = 0.0, top_k: int = 0,
                       top_p: float = 1.0, min_p: float = 0.0, repetition_penalty: float = 1.0,
                       presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                       seed: int = 0, stop: Union[None, str, Sequence[str]] = None
                       ) -> List[Generation]:
        """generate() for several prompts at once, one decode batch per step: each result is
        what generate(prompts[i], ...) gives (the same tokens and text)."""
        if isinstance(prompts, str) or not hasattr(prompts, "__len__"):
            raise TypeError("prompts must be a list of prompts (each a str or a list of ids)")
        if not prompts:
            return []
        arrays = [self._prompt_ids(p) for p in prompts]
        options, keep = self._options(max_new_tokens, temperature, top_k, top_p, min_p,
                                      repetition_penalty, presence_penalty, frequency_penalty,
                                      seed, stop)
        count = len(arrays)
        pointers = (ctypes.POINTER(ctypes.c_int32) * count)(
            *[ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) for a, _ in arrays])
        lengths = (ctypes.c_size_t * count)(*[n for _, n in arrays])
        results = (_api.LlmGeneration * count)()
        with self._context.exclusive():
            self._context.check(lib.clattn_llm_generate_batch(
                self._llm, self._text, count, pointers, lengths, ctypes.byref(options),
                _api.llm_batch_callback(), None, results))
        try:
            return [self._result(results[i]) for i in range(count)]
        finally:
            for i in range(count):
                lib.clattn_llm_generation_clear(ctypes.byref(results[i]))
            del keep

    def _stream(self, array, n, options, keep) -> Iterator[str]:
        pieces: "queue.Queue" = queue.Queue()
        cancel = threading.Event()
        done = object()

        def on_piece(raw: bytes) -> bool:
            if raw:
                pieces.put(raw.decode("utf-8", "replace"))
            return cancel.is_set()

        def work():
            try:
                assert keep is not None  # the options' stop strings live while it runs
                self._run(array, n, options, on_piece)
                pieces.put(done)
            except BaseException as err:  # handed to the consumer
                pieces.put(err)

        def iterate():
            worker = threading.Thread(target=work, daemon=True)
            worker.start()
            try:
                while True:
                    item = pieces.get()
                    if item is done:
                        return
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                cancel.set()
                worker.join()

        return iterate()

    def chat(self, messages: List[Dict[str, Any]], chat_template: Optional[str] = None,
             **kwargs) -> Union[Generation, Iterator[str]]:
        """The assistant's answer to messages: rendered with the chat template (with the
        generation prompt), then generate(ids, **kwargs)."""
        ids = self.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                       chat_template=chat_template)
        return self.generate(ids, **kwargs)

    # ---- lifetime ----

    def close(self) -> None:
        """Releases the model now (also done when the object is collected); calls made after
        it raise clattn.Error. A second close() does nothing."""
        if getattr(self, "_context", None) is not None:
            self._context.close(self._destroy)

    def _destroy(self) -> None:
        if self._llm.value:
            lib.clattn_llm_destroy(ctypes.byref(self._llm))
        if self._text.value:
            lib.clattn_llm_text_destroy(ctypes.byref(self._text))

    def __del__(self):
        if getattr(self, "_context", None) is not None:
            self._context.close_when_collected(self._destroy)

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"LLM(architecture={self.architecture!r}, vocab_size={self.vocab_size}, "
                f"context_length={self.context_length})")


__all__ = ["LLM", "Generation", "Error"]
