#!/usr/bin/env python3
"""Checks for tests/test_serve_rerank.sh: compares clattn-serve's /rerank and /predict answers
(TEI's shapes) with clattn-rerank's output (the C API: the same float32 bytes) and with the
golden file of tools/gen_crossenc_golden.py (sentence-transformers / transformers: 1e-5).

usage: serve_rerank_check.py rerank ANSWER.json CLI.json [GOLDEN_RANKED_JSON_PATH]
       serve_rerank_check.py predict ANSWER.json GOLDEN.json KEY [LABEL ...]
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


if __name__ == "__main__":
    if sys.argv[1] == "rerank":
        rerank(*sys.argv[2:])
    else:
        predict(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
