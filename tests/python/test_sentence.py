"""SentenceModel against sentence-transformers (committed goldens of tests/golden/minilm, by
tools/gen_minilm_golden.py) and against the command-line embed, byte for byte."""

import json
import subprocess

import numpy as np
import pytest

import clattn
from conftest import read_lines


def test_attributes(minilm):
    assert minilm.get_sentence_embedding_dimension() == 384
    assert minilm.max_seq_length == 256
    assert minilm.pooling == "mean" and minilm.normalize
    assert clattn.SentenceTransformer is clattn.SentenceModel


def test_sentence_transformers_lines(minilm, golden):
    texts = read_lines(golden / "minilm" / "lines.txt")
    expected = np.load(golden / "minilm" / "lines_embeddings.npy")
    got = minilm.encode(texts)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5


def test_sentence_transformers_cases(minilm, golden):
    cases = json.loads((golden / "minilm" / "sentences.json").read_text(encoding="utf-8"))
    texts = [case["text"] for case in cases["cases"]]
    expected = np.load(golden / "minilm" / "embeddings.npy")
    got = minilm.encode(texts, batch_size=7)
    assert np.abs(got - expected).max() <= 1e-5
    # tokenize gives Hugging Face's ids (the golden's), padded
    tokens = minilm.tokenize(texts)
    for i, case in enumerate(cases["cases"]):
        n = int(tokens["attention_mask"][i].sum())
        assert tokens["input_ids"][i, :n].tolist() == case["ids"][:256]


def test_shapes_and_options(minilm, golden):
    texts = read_lines(golden / "minilm" / "lines.txt")[:5]
    batch = minilm.encode(texts)
    one = minilm.encode(texts[2])
    assert one.shape == (384,)
    assert one.tobytes() == batch[2].tobytes()  # batch invariance
    as_list = minilm.encode(texts, convert_to_numpy=False)
    assert isinstance(as_list, list) and len(as_list) == 5
    assert all(row.tobytes() == batch[i].tobytes() for i, row in enumerate(as_list))
    # the model normalises already: normalize_embeddings=True changes nothing measurable
    assert np.abs(minilm.encode(texts, normalize_embeddings=True) - batch).max() <= 1e-6
    assert minilm.encode([]).shape == (0, 384)
    # a prompt is text put before every text
    prompted = minilm.encode(texts[0], prompt="query: ")
    assert prompted.tobytes() == minilm.encode("query: " + texts[0]).tobytes()


def test_normalize_default_as_sentence_transformers(tiny_model):
    """normalize_embeddings defaults to False, as in sentence-transformers: a model without a
    Normalize module gives rows that are not unit length; True normalises them."""
    model = clattn.SentenceModel(tiny_model)
    assert not model.normalize  # the folder has no modules.json, so no Normalize module
    texts = ["the cat", "a longer text of the corpus", "x", "on the 12 of it"]
    default = model.encode(texts)
    norms = np.linalg.norm(default.astype(np.float64), axis=1)
    assert np.all(np.abs(norms - 1) > 1e-3), norms
    assert model.encode(texts, normalize_embeddings=False).tobytes() == default.tobytes()
    unit = model.encode(texts, normalize_embeddings=True)
    assert np.abs(np.linalg.norm(unit, axis=1) - 1).max() <= 1e-6
    assert np.abs(unit - default / norms[:, None]).max() <= 1e-6
    assert model.encode(texts[0]).tobytes() == default[0].tobytes()


def test_cli_byte_for_byte(minilm, minilm_dir, golden, embed_cli, tmp_path):
    lines = golden / "minilm" / "lines.txt"
    texts = read_lines(lines)
    for batch in (32, 5):
        out = tmp_path / f"cli{batch}.npy"
        subprocess.run([embed_cli, "--model", str(minilm_dir), "--input",
                        str(lines), "--batch-size", str(batch), "--output", str(out)],
                       check=True, capture_output=True)
        expected = np.load(out)
        got = minilm.encode(texts, batch_size=batch)
        assert got.tobytes() == expected.tobytes(), f"batch {batch}"


# The bounds are for these 98 lines, whose empty text quantises worst (int8 measured 0.9952 on
# AVX-512 VNNI); the corpus-wide bounds are asserted by tests/test_precision.c.
@pytest.mark.parametrize("precision,worst", [("bf16", 0.999), ("int8", 0.99)])
def test_precision_as_cli(minilm, minilm_dir, golden, embed_cli, tmp_path, precision, worst):
    """precision= is embed --precision's: the same bytes where the CPU has the feature (and
    not fp32's bytes, within a cosine bound), the same refusal where it lacks it."""
    lines = golden / "minilm" / "lines.txt"
    texts = read_lines(lines)
    out = tmp_path / f"{precision}.npy"
    cli = subprocess.run([embed_cli, "--model", str(minilm_dir), "--input", str(lines),
                          "--precision", precision, "--output", str(out)], capture_output=True,
                         text=True)
    if cli.returncode != 0:
        assert cli.returncode == 1, cli.stderr
        with pytest.raises(clattn.Error):
            clattn.SentenceModel(minilm_dir, precision=precision)
        pytest.skip(f"this CPU or build has no {precision}: {cli.stderr.strip()}")
    got = clattn.SentenceModel(minilm_dir, precision=precision).encode(texts)
    assert got.tobytes() == np.load(out).tobytes()
    full = minilm.encode(texts)
    assert got.tobytes() != full.tobytes()
    cosine = (got * full).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(full, axis=1)
    assert cosine.min() >= worst, cosine.min()


def test_precision_argument(minilm_dir):
    with pytest.raises(ValueError, match="precision"):
        clattn.SentenceModel(minilm_dir, precision="fp16")
    with pytest.raises(TypeError, match="precision"):
        clattn.SentenceModel(minilm_dir, precision=16)



def test_max_seq_length_as_cli(minilm, minilm_dir, golden, embed_cli, tmp_path):
    lines = golden / "minilm" / "lines.txt"
    out = tmp_path / "cli16.npy"
    subprocess.run([embed_cli, "--model", str(minilm_dir), "--input", str(lines),
                    "--max-length", "16", "--output", str(out)], check=True, capture_output=True)
    minilm.max_seq_length = 16
    try:
        got = minilm.encode(read_lines(lines))
        assert minilm.tokenize(read_lines(lines))["input_ids"].shape[1] <= 16
    finally:
        minilm.max_seq_length = 256
    assert got.tobytes() == np.load(out).tobytes()
