"""The public API's arguments: model names found in the model cache as tools/fetch-model.sh
fills it, FileNotFoundError for a model that is not there, every integer argument checked
against its range and its C type (2**64 used to wrap silently to 0), and the README's example."""

import errno
import re

import numpy as np
import pytest

import clattn
from conftest import GOLDEN


@pytest.fixture
def cache(tmp_path, monkeypatch, tiny_model):
    """A model cache holding the tiny embedder as "tiny-model" and a cross-encoder as
    "tiny-reranker", named by CLATTN_MODEL_CACHE; the current folder is an empty one."""
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "tiny-model").symlink_to(tiny_model, target_is_directory=True)
    (folder / "tiny-reranker").symlink_to(GOLDEN / "crossenc" / "one_label",
                                          target_is_directory=True)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("CLATTN_MODEL_CACHE", str(folder))
    return folder


def test_bare_name_in_the_model_cache(cache, tiny_model, tmp_path, monkeypatch):
    want = clattn.SentenceModel(tiny_model).encode("a text")
    assert clattn.SentenceModel("tiny-model").encode("a text").tobytes() == want.tobytes()
    pair = ("what is the capital of france?", "paris is the capital of france.")
    assert clattn.CrossEncoder("tiny-reranker").predict(pair) == \
        clattn.CrossEncoder(GOLDEN / "crossenc" / "one_label").predict(pair)

    # CLATTN_MODEL_CACHE unset or empty: $HOME/.cache/clattn (tools/fetch-model.sh's
    # ${CLATTN_MODEL_CACHE:-${HOME:-/root}/.cache/clattn})
    home = tmp_path / "home"
    (home / ".cache" / "clattn").mkdir(parents=True)
    (home / ".cache" / "clattn" / "tiny-model").symlink_to(tiny_model, target_is_directory=True)
    monkeypatch.setenv("HOME", str(home))
    for value in ("", None):
        if value is None:
            monkeypatch.delenv("CLATTN_MODEL_CACHE")
        else:
            monkeypatch.setenv("CLATTN_MODEL_CACHE", value)
        assert clattn.SentenceModel("tiny-model").encode("a text").tobytes() == want.tobytes()


def test_a_folder_here_wins(cache):
    import pathlib
    (pathlib.Path.cwd() / "tiny-model").mkdir()  # an empty folder of the same name
    # the library names the folder as given, relative: not the cache's (absolute) one
    with pytest.raises(clattn.Error, match=r"(?<![/\w])tiny-model/config\.json: cannot open"):
        clattn.SentenceModel("tiny-model")


@pytest.mark.parametrize("loader", [clattn.SentenceModel, clattn.CrossEncoder])
def test_missing_model_is_file_not_found(cache, loader):
    import pathlib
    here = pathlib.Path.cwd()
    with pytest.raises(FileNotFoundError) as info:
        loader("no-such-model")
    err = info.value
    assert isinstance(err, clattn.Error) and isinstance(err, clattn.ModelNotFoundError)
    assert err.errno == errno.ENOENT and err.filename == "no-such-model"
    assert err.status_name == "CLATTN_ERROR_IO"
    message = str(err)  # where it looked: here, then the cache
    assert str(here / "no-such-model") in message and str(cache / "no-such-model") in message
    assert "tools/fetch-model.sh" in message
    # a path that is no model name is not looked for in the cache, even when the cache has its
    # last part; the message says where a name would be looked for
    for path in (here / "tiny-model", "./tiny-model", "a/b/tiny-model", "sub/../tiny-model"):
        with pytest.raises(FileNotFoundError, match="does not exist") as info:
            loader(path)
        assert isinstance(info.value, clattn.Error)
        assert f"model cache {cache}" in str(info.value)


def test_hub_names(cache, tiny_model):
    """ORG/NAME, as sentence-transformers spells a hub model: the cache's ORG/NAME, and for
    sentence-transformers' own models (what tools/fetch-model.sh stores by their last part, and
    what a bare name means to sentence-transformers) the cache's NAME. Another organisation's
    name is not taken for the cache's NAME: a ModelNotFoundError naming where it looked."""
    want = clattn.SentenceModel(tiny_model).encode("a text")
    model = clattn.SentenceModel("sentence-transformers/tiny-model")
    assert model.encode("a text").tobytes() == want.tobytes()
    (cache / "some-org").mkdir()
    (cache / "some-org" / "its-model").symlink_to(tiny_model, target_is_directory=True)
    assert clattn.SentenceModel("some-org/its-model").encode("a text").tobytes() == \
        want.tobytes()
    with pytest.raises(clattn.ModelNotFoundError) as info:
        clattn.SentenceModel("other-org/tiny-model")
    assert str(cache / "other-org" / "tiny-model") in str(info.value)
    with pytest.raises(clattn.ModelNotFoundError) as info:
        clattn.CrossEncoder("sentence-transformers/no-such-reranker")
    for place in (cache / "sentence-transformers" / "no-such-reranker",
                  cache / "no-such-reranker"):
        assert str(place) in str(info.value)
    pair = ("what is the capital of france?", "paris is the capital of france.")
    assert clattn.CrossEncoder("sentence-transformers/tiny-reranker").predict(pair) == \
        clattn.CrossEncoder(GOLDEN / "crossenc" / "one_label").predict(pair)


def test_a_file_here_does_not_hide_the_cache(cache, tiny_model):
    import pathlib
    (pathlib.Path.cwd() / "tiny-model").write_text("not a model folder\n")
    want = clattn.SentenceModel(tiny_model).encode("a text")
    assert clattn.SentenceModel("tiny-model").encode("a text").tobytes() == want.tobytes()
    # a file that is no name in the cache: the library says what is wrong with it
    (pathlib.Path.cwd() / "a-file").write_text("not a model folder\n")
    with pytest.raises(clattn.Error, match="a-file/config.json: cannot open: Not a directory"):
        clattn.SentenceModel("a-file")


@pytest.mark.parametrize("load", [clattn.SentenceModel, clattn.CrossEncoder,
                                  clattn.Encoder.from_file])
def test_empty_model_name(load):
    for empty in ("", b""):
        with pytest.raises(ValueError, match="path is empty"):
            load(empty)


def test_missing_encoder_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.safetensors does not exist") as info:
        clattn.Encoder.from_file(tmp_path / "nope.safetensors")
    assert isinstance(info.value, clattn.Error)


SIZE_MAX = 2 ** 64 - 1  # the platforms the package builds for have a 64-bit size_t


def _refused(call, name, none_allowed=False):
    """call(value) refuses every bad integer, naming the argument."""
    for value in (-1, SIZE_MAX + 1, 2 ** 70):
        with pytest.raises(ValueError, match=name):
            call(value)
    for value in (True, False, np.bool_(True), 2.0, "8", [8]) + (() if none_allowed else (None,)):
        with pytest.raises(TypeError, match=name):
            call(value)


def test_integer_arguments(tiny_model, golden):
    model = clattn.SentenceModel(tiny_model)
    _refused(lambda n: model.encode(["a"], batch_size=n), "batch_size")
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(["a"], batch_size=0)
    want = model.encode(["a", "bc"])
    for n in (1, np.int64(2), SIZE_MAX):  # the whole size_t range works
        assert model.encode(["a", "bc"], batch_size=n).tobytes() == want.tobytes()

    def set_length(n):
        model.max_seq_length = n
    _refused(set_length, "max_seq_length")
    with pytest.raises(ValueError, match="max_seq_length"):
        set_length(1)
    with pytest.raises(ValueError, match="max_seq_length"):
        set_length(model._model_max_length + 1)
    set_length(np.int32(8))
    assert model.max_seq_length == 8 and type(model.max_seq_length) is int

    cross = clattn.CrossEncoder(golden / "crossenc" / "one_label")
    pairs = [("q", "a document"), ("q", "another")]
    _refused(lambda n: cross.predict(pairs, batch_size=n), "batch_size")
    _refused(lambda n: cross.rank("q", ["a", "b"], batch_size=n), "batch_size")
    assert cross.predict(pairs, batch_size=SIZE_MAX).tobytes() == cross.predict(pairs).tobytes()
    for value in (0, -1):
        with pytest.raises(ValueError, match="top_k"):
            cross.rank("q", ["a", "b"], top_k=value)
    for value in (True, 1.5, "1"):
        with pytest.raises(TypeError, match="top_k"):
            cross.rank("q", ["a", "b"], top_k=value)
    assert len(cross.rank("q", ["a", "b", "c"], top_k=2)) == 2
    assert len(cross.rank("q", ["a", "b"], top_k=2 ** 70)) == 2  # a Python slice: no C type

    _refused(lambda n: clattn.MultiheadAttention(n, 1), "embed_dim")
    _refused(lambda n: clattn.MultiheadAttention(8, n), "num_heads")
    for name in ("kdim", "vdim"):
        _refused(lambda n: clattn.MultiheadAttention(8, 2, **{name: n}), name, True)
        with pytest.raises(ValueError, match=name):
            clattn.MultiheadAttention(8, 2, **{name: 0})
    for name in ("embed_dim", "num_heads"):
        with pytest.raises(ValueError, match=name):
            clattn.MultiheadAttention(**dict({"embed_dim": 8, "num_heads": 2}, **{name: 0}))
    assert clattn.MultiheadAttention(np.int64(8), 2, kdim=4).kdim == 4


def test_readme_example(minilm_dir, tmp_path, monkeypatch):
    """README.md's Python example, as written, from a folder without the model: the bare name
    is found in the model cache that tools/fetch-model.sh filled (where minilm_dir is)."""
    readme = (GOLDEN.parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## Python\n"):]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'SentenceModel("all-MiniLM-L6-v2")' in example
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLATTN_MODEL_CACHE", str(minilm_dir.parent))
    scope = {}
    exec(compile(example, "README.md", "exec"), scope)  # noqa: S102 (the README's own code)
    embeddings = scope["embeddings"]
    assert embeddings.shape == (2, 384) and embeddings.dtype == np.float32
    assert np.abs(np.linalg.norm(embeddings, axis=1) - 1).max() < 1e-5
