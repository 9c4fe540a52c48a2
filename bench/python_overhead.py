#!/usr/bin/env python3
"""The Python binding's overhead: clattn.SentenceModel.encode against the command-line embed on
the same texts at the same batch size (not a test).

Both run the same C call (clattn_sentence_model_embed) on the same device; the figure compared
is the time of the embedding alone: embed's own "seconds" (--json: after the model is loaded,
without the start-up) and the wall time of model.encode (after the model is loaded, the
conversion of the texts to UTF-8 and the output array included). Runs alternate (CLI, Python,
CLI, ...) so that a busy machine slows both alike; the medians are compared.

    CLATTN_EMBED=build/examples/embed python3 bench/python_overhead.py \\
        [--model DIR] [--texts FILE] [--repeat-texts 10] [--runs 5] [--batch-size 32]

The package must be importable (pip install ., or CLATTN_LIBRARY=build/src/libclattn.so
PYTHONPATH=python). Prints one JSON object.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import clattn

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.path.expanduser("~/.cache/clattn/all-MiniLM-L6-v2"))
    parser.add_argument("--texts", default=str(ROOT / "tests" / "golden" / "minilm" / "lines.txt"))
    parser.add_argument("--repeat-texts", type=int, default=10,
                        help="the file's lines this many times over (default 10)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--embed", default=os.environ.get("CLATTN_EMBED",
                                                          str(ROOT / "build/examples/embed")))
    args = parser.parse_args()

    # one text per line, as embed reads them (only "\n" ends a line; a final one ends no text)
    lines = pathlib.Path(args.texts).read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    texts = lines * args.repeat_texts
    with tempfile.TemporaryDirectory() as tmp:
        corpus = pathlib.Path(tmp) / "texts.txt"
        corpus.write_text("\n".join(texts) + "\n", encoding="utf-8")
        out = pathlib.Path(tmp) / "cli.npy"
        model = clattn.SentenceModel(args.model)
        model.encode(texts[:args.batch_size], batch_size=args.batch_size)  # warm-up
        cli_seconds, python_seconds = [], []
        for _ in range(args.runs):
            with open(corpus, "rb") as stdin:
                result = subprocess.run(
                    [args.embed, "--model", args.model, "--input", "-", "--batch-size",
                     str(args.batch_size), "--output", str(out), "--json"],
                    stdin=stdin, check=True, capture_output=True, text=True)
            cli_seconds.append(float(json.loads(result.stdout)["seconds"]))
            start = time.perf_counter()
            embeddings = model.encode(texts, batch_size=args.batch_size)
            python_seconds.append(time.perf_counter() - start)
        identical = embeddings.tobytes() == np.load(out).tobytes()

    cli, python = statistics.median(cli_seconds), statistics.median(python_seconds)
    print(json.dumps({
        "texts": len(texts), "batch_size": args.batch_size, "runs": args.runs,
        "device": model.device, "loadavg": os.getloadavg()[0],
        "cli_seconds": cli_seconds, "python_seconds": [round(s, 4) for s in python_seconds],
        "cli_texts_per_s": round(len(texts) / cli, 1),
        "python_texts_per_s": round(len(texts) / python, 1),
        "overhead_percent": round(100 * (python / cli - 1), 2),
        "identical_bytes": identical,
    }, indent=1))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
