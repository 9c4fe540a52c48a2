"""Fixtures of the Python package's tests (run by tools/run-tests.sh in a fresh venv after
`pip install .`; by hand: CLATTN_EMBED=build/examples/embed python -m pytest tests/python).

Environment:
  CLATTN_MODEL_CACHE          where tools/fetch-model.sh put all-MiniLM-L6-v2 (default
                              ~/.cache/clattn); without the model its tests skip, unless
  CLATTN_REQUIRE_REAL_MODEL=1 which fails them (CI: .ci/run).
  CLATTN_EMBED, CLATTN_RERANK the command-line programs (build/examples/embed, .../rerank) for
                              the byte-for-byte parity tests; unset: those tests skip (fail
                              with CLATTN_REQUIRE_REAL_MODEL=1).
  CLATTN_ABI_LAYOUT           the C layout table (build/tests/abi_layout) that
                              test_abi_layout.py compares the ctypes structs with; unset: those
                              checks fail (they never skip).
"""

import os
import pathlib

import pytest

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"


def _require_or_skip(reason: str):
    if os.environ.get("CLATTN_REQUIRE_REAL_MODEL") == "1":
        pytest.fail(f"CLATTN_REQUIRE_REAL_MODEL=1: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def golden() -> pathlib.Path:
    return GOLDEN


@pytest.fixture(scope="session")
def minilm_dir() -> pathlib.Path:
    cache = os.environ.get("CLATTN_MODEL_CACHE") or os.path.expanduser("~/.cache/clattn")
    folder = pathlib.Path(cache) / "all-MiniLM-L6-v2"
    if not (folder / "model.safetensors").is_file():
        _require_or_skip(f"the real model is not in {folder} (tools/fetch-model.sh)")
    return folder


@pytest.fixture(scope="session")
def minilm(minilm_dir):
    import clattn
    return clattn.SentenceModel(minilm_dir)


def _program(variable: str) -> str:
    path = os.environ.get(variable)
    if not path or not os.access(path, os.X_OK):
        _require_or_skip(f"{variable} does not name the built program")
    return path


@pytest.fixture(scope="session")
def embed_cli() -> str:
    return _program("CLATTN_EMBED")


@pytest.fixture(scope="session")
def rerank_cli() -> str:
    return _program("CLATTN_RERANK")


def read_lines(path: pathlib.Path):
    """The texts of a file as examples/embed's --input reads them: one per line, the line end
    (\\n or \\r\\n) not part of the text, no text after a final line end."""
    data = path.read_bytes().decode("utf-8")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> pathlib.Path:
    """A small random BERT folder with a WordPiece vocabulary (tests/tiny_corpus.sh's
    make_tiny_embedder): tests/golden/bert/gelu's weights, 89 tokens; no real model needed."""
    import shutil
    folder = tmp_path_factory.mktemp("tiny")
    for name in ("config.json", "model.safetensors"):
        shutil.copy(GOLDEN / "bert" / "gelu" / name, folder / name)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(letters)
             + list("0123456789") + [".", ","] + ["##" + c for c in letters]
             + "the of and to in is was for on that with as by at from it an be this are".split())
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return folder
