"""CrossEncoder.predict against sentence-transformers' CrossEncoder (the committed goldens of
tests/golden/crossenc, by tools/gen_crossenc_golden.py) and against the command-line rerank."""

import json
import subprocess

import numpy as np
import pytest

import clattn


def load(golden, name):
    folder = golden / "crossenc" / name
    cases = json.loads((folder / "pairs.json").read_text(encoding="utf-8"))
    return folder, cases


def test_one_label(golden):
    folder, cases = load(golden, "one_label")
    model = clattn.CrossEncoder(folder)
    assert model.num_labels == 1 and model.default_activation == "sigmoid"
    pairs = [tuple(p) for p in cases["pairs"]]
    scores = model.predict(pairs)
    assert scores.dtype == np.float32 and scores.shape == (len(pairs),)
    assert np.abs(scores - np.array(cases["predict"])).max() <= 1e-5
    logits = model.predict(pairs, activation_fn="identity", batch_size=3)
    assert np.abs(logits - np.array(cases["logits"])[:, 0]).max() <= 1e-5
    # a single pair gives its score; a callable activation gets the logits
    assert float(model.predict(pairs[1])) == float(scores[1])
    doubled = model.predict(pairs, activation_fn=lambda z: 2 * z)
    assert np.abs(doubled - 2 * logits).max() <= 1e-6
    ranked = model.rank(cases["rerank"]["query"], cases["rerank"]["documents"])
    assert [r["corpus_id"] for r in ranked] == [i for i, _ in cases["rerank"]["ranked"]]


def test_three_labels(golden):
    folder, cases = load(golden, "three_labels")
    model = clattn.CrossEncoder(folder)
    assert model.num_labels == 3
    pairs = [tuple(p) for p in cases["pairs"]]
    raw = model.predict(pairs)  # several labels: the logits by default
    assert raw.shape == (len(pairs), 3)
    assert np.abs(raw - np.array(cases["predict"])).max() <= 1e-5
    soft = model.predict(pairs, apply_softmax=True)
    assert np.abs(soft - np.array(cases["softmax"])).max() <= 1e-5
    sig = model.predict(pairs, activation_fn="sigmoid")
    assert np.abs(sig - np.array(cases["sigmoid"])).max() <= 1e-5


def test_rerank_cli_byte_for_byte(golden, rerank_cli):
    folder, cases = load(golden, "one_label")
    query, documents = cases["rerank"]["query"], cases["rerank"]["documents"]
    result = subprocess.run([rerank_cli, "--model", str(folder), "--query", query, "--json",
                             *documents], check=True, capture_output=True, text=True)
    cli = json.loads(result.stdout)
    scores = clattn.CrossEncoder(folder).predict([(query, d) for d in documents])
    for entry in cli:  # printed with 9 significant digits: float32 round-trips exactly
        assert np.float32(entry["score"]).tobytes() == scores[entry["index"]].tobytes()
