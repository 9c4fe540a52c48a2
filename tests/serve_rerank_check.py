#!/usr/bin/env python3
"""Checks for tests/test_serve_rerank.sh: compares clattn-serve's /rerank and /predict answers
(TEI's shapes) with clattn-rerank's output (the C API: the same float32 bytes) and with the
golden file of tools/gen_crossenc_golden.py (sentence-transformers / transformers: 1e-5).

usage: serve_rerank_check.py rerank ANSWER.json CLI.json [GOLDEN.json KEY]
       serve_rerank_check.py predict ANSWER.json GOLDEN.json KEY [LABEL ...]
       serve_rerank_check.py embed ANSWER.json GOLDEN.npy
         (/embed's rows against sentence-transformers' embeddings, 1e-5: the other families'
         embedders, which the same tests serve)
Exit status 0 when they agree, 1 (printing why) when not."""
import json
import struct
import sys


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def rerank(answer_path, cli_path, golden_path=None, golden_key=None):
    answer = json.load(open(answer_path, encoding="utf-8"))
    cli = json.load(open(cli_path, encoding="utf-8"))
    if not isinstance(answer, list) or len(answer) != len(cli):
        fail("/rerank gave %r, clattn-rerank %d ranks" % (answer, len(cli)))
    for r, (a, c) in enumerate(zip(answer, cli)):
        if a["index"] != c["index"] or f32(a["score"]) != f32(c["score"]):
            fail("rank %d: /rerank %r, clattn-rerank %r" % (r, a, c))
        if "text" in c and a.get("text", c["text"]) != c["text"]:
            fail("rank %d: text %r, expected %r" % (r, a.get("text"), c["text"]))
    if golden_path:
        golden = json.load(open(golden_path, encoding="utf-8"))["rerank"][golden_key]
        for r, (a, (index, score)) in enumerate(zip(answer, golden)):
            if a["index"] != index or abs(a["score"] - score) > 1e-5:
                fail("rank %d: /rerank %r, sentence-transformers (%d, %.9g)"
                     % (r, a, index, score))
    print("ok:   %d ranks: clattn-rerank's order and bytes%s" %
          (len(answer), ", the golden's within 1e-5" if golden_path else ""))


def predict(answer_path, golden_path, key, labels):
    answer = json.load(open(answer_path, encoding="utf-8"))
    golden = json.load(open(golden_path, encoding="utf-8"))[key]
    if len(answer) != len(golden):
        fail("/predict gave %d answers, expected %d" % (len(answer), len(golden)))
    worst = 0.0
    for i, (predictions, want) in enumerate(zip(answer, golden)):
        want = want if isinstance(want, list) else [want]
        scores = [p["score"] for p in predictions]
        if scores != sorted(scores, reverse=True):
            fail("answer %d is not best first: %r" % (i, predictions))
        by_label = {p["label"]: p["score"] for p in predictions}
        names = labels or ["LABEL_%d" % k for k in range(len(want))]
        if sorted(by_label) != sorted(names):
            fail("answer %d has labels %r, expected %r" % (i, sorted(by_label), names))
        for name, w in zip(names, want):
            worst = max(worst, abs(by_label[name] - w))
    if worst > 1e-5:
        fail("/predict differs from the golden %s by %.3g" % (key, worst))
    print("ok:   /predict: %d answers, the golden %s within %.2g" % (len(answer), key, worst))


def read_npy_f32(path):
    """A float32 .npy file (C order) as (shape, values), without numpy."""
    import ast
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        fail("%s is not a .npy file" % path)
    major = data[6]
    size_bytes = 2 if major == 1 else 4
    header_len = int.from_bytes(data[8:8 + size_bytes], "little")
    start = 8 + size_bytes + header_len
    header = ast.literal_eval(data[8 + size_bytes:start].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        fail("%s is not little-endian float32 in C order" % path)
    count = (len(data) - start) // 4
    return tuple(header["shape"]), struct.unpack("<%df" % count, data[start:start + 4 * count])


def embed(answer_path, golden_path):
    answer = json.load(open(answer_path, encoding="utf-8"))
    shape, golden = read_npy_f32(golden_path)
    if len(shape) != 2 or len(answer) != shape[0] or any(len(r) != shape[1] for r in answer):
        fail("/embed gave %d rows, the golden is %s" % (len(answer), shape))
    worst = max(abs(a - golden[i * shape[1] + k])
                for i, row in enumerate(answer) for k, a in enumerate(row))
    if worst > 1e-5:
        fail("/embed differs from %s by %.3g" % (golden_path, worst))
    print("ok:   /embed: %d rows, %s within %.2g" % (len(answer), golden_path, worst))


if __name__ == "__main__":
    if sys.argv[1] == "rerank":
        rerank(*sys.argv[2:])
    elif sys.argv[1] == "embed":
        embed(*sys.argv[2:])
    else:
        predict(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
