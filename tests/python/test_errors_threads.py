"""Errors (the library's message in clattn.Error, TypeError/ValueError naming the argument) and
threads (two threads, two models: the results of a sequential run)."""

import threading

import numpy as np
import pytest

import clattn
from conftest import read_lines


def test_bad_path_is_library_error(tmp_path):
    """A folder without config.json: the library's message (a missing folder is
    FileNotFoundError: test_arguments.py)."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(clattn.Error) as info:
        clattn.SentenceModel(tmp_path / "empty")
    assert "empty/config.json" in str(info.value) and "cannot open" in str(info.value)
    assert info.value.status_name == "CLATTN_ERROR_IO"
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(clattn.Error, match="config.json"):
        clattn.CrossEncoder(tmp_path / "empty")
    (tmp_path / "nope.safetensors").write_bytes(b"")
    with pytest.raises(clattn.Error, match="nope.safetensors"):
        clattn.Encoder.from_file(tmp_path / "nope.safetensors")


def test_unsupported_model(golden):
    with pytest.raises(clattn.Error, match='model_type "gpt2" is not supported'):
        clattn.SentenceModel(golden / "bert" / "bad_model_type")
    with pytest.raises(clattn.Error, match="not a sequence classification model"):
        clattn.CrossEncoder(golden / "bert" / "gelu")


def test_bad_device(golden):
    with pytest.raises(clattn.Error, match="no-such-device"):
        clattn.SentenceModel(golden / "bert" / "gelu", device="no-such-device")


def test_devices():
    found = clattn.devices()
    assert found and all({"name", "type", "spec"} <= set(d) for d in found)


def test_wrong_types(golden, tiny_model):
    with pytest.raises(TypeError, match="path"):
        clattn.SentenceModel(42)
    with pytest.raises(TypeError, match="device"):
        clattn.SentenceModel(tiny_model, device=0)
    model = clattn.SentenceModel(tiny_model)
    with pytest.raises(TypeError, match=r"sentences\[1\]"):
        model.encode(["a", 2])
    with pytest.raises(TypeError, match="sentences"):
        model.encode(b"bytes")
    with pytest.raises(TypeError, match="batch_size"):
        model.encode(["a"], batch_size="8")
    with pytest.raises(ValueError, match="batch_size"):
        model.encode(["a"], batch_size=0)
    with pytest.raises(TypeError, match="prompt"):
        model.encode(["a"], prompt=1)
    with pytest.raises(ValueError, match="max_seq_length"):
        model.max_seq_length = 1
    with pytest.raises(clattn.Error, match="prompt"):
        model.encode(["a"], prompt_name="no-such-prompt")
    with pytest.raises(ValueError, match=r"sentences\[1\] is not valid Unicode"):
        model.encode(["a", "\udc80"])
    cross = clattn.CrossEncoder(golden / "crossenc" / "one_label")
    with pytest.raises(TypeError, match=r"pairs\[0\]"):
        cross.predict(["just one text", "and another", "and a third"])
    with pytest.raises(ValueError, match="activation_fn"):
        cross.predict([("q", "d")], activation_fn="tanh")


def test_two_threads_two_models(minilm_dir, golden):
    texts = read_lines(golden / "minilm" / "lines.txt")
    cross_folder = golden / "crossenc" / "one_label"
    pairs = [("what is the capital of france?", t) for t in texts]
    models = [clattn.SentenceModel(minilm_dir), clattn.CrossEncoder(cross_folder),
              clattn.SentenceModel(minilm_dir)]
    sequential = [models[0].encode(texts, batch_size=8), models[1].predict(pairs),
                  models[2].encode(texts[::-1], batch_size=16)]
    results = [None] * 3
    errors = []

    def run(i):
        try:
            for _ in range(2):
                if i == 1:
                    results[i] = models[1].predict(pairs)
                elif i == 0:
                    results[i] = models[0].encode(texts, batch_size=8)
                else:
                    results[i] = models[2].encode(texts[::-1], batch_size=16)
        except Exception as err:  # noqa: BLE001 (reported below)
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got, want in zip(results, sequential):
        assert got.tobytes() == want.tobytes()


def test_progress_bar(tiny_model, capsys):
    model = clattn.SentenceModel(tiny_model)
    model.encode([f"text {i}" for i in range(10)], batch_size=4, show_progress_bar=True)
    assert "Batches: 10/10" in capsys.readouterr().err


def test_one_model_shared_by_threads(tiny_model):
    model = clattn.SentenceModel(tiny_model)
    texts = [f"text number {i}" for i in range(20)]
    want = model.encode(texts)
    results = []

    def run():
        results.append(model.encode(texts))  # the lock serialises the calls

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(r.tobytes() == want.tobytes() for r in results)


def test_missing_system_library_is_named(monkeypatch):
    """dlopen's message for a missing dependency becomes an ImportError naming it and its
    Debian package (the real libraries are installed here, so CDLL is made to fail as it
    would without libclblast1)."""
    import ctypes
    from clattn import _lib

    def fail(path, *args, **kwargs):
        raise OSError("libclblast.so.1: cannot open shared object file: No such file or "
                      "directory")

    monkeypatch.setattr(ctypes, "CDLL", fail)
    with pytest.raises(ImportError, match=r"libclblast\.so\.1.*apt-get install libclblast1"):
        _lib.load()
    monkeypatch.setenv("CLATTN_LIBRARY", "/no/such/libclattn.so")
    with pytest.raises(ImportError, match="/no/such/libclattn.so does not exist"):
        _lib.load()
