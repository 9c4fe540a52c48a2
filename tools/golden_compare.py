#!/usr/bin/env python3
"""Compares a generator's fresh output with the committed golden files (tools/check-generators.sh).

usage: golden_compare.py NEW_DIR COMMITTED_DIR [--abs TOL] [--rel TOL] [--only PATH ...]
           [--skip NAME ...] [--ignore-key KEY ...]

Every file under NEW_DIR (or only the paths given with --only, relative to NEW_DIR; but files
named as one of --skip's names: bookkeeping that a package writes its own way, which the
library does not read) must exist at the same path under COMMITTED_DIR and hold the same
content:
  .npy          the same dtype and shape; integers and booleans equal; floats equal or, with
                --abs/--rel, within abs + rel·|committed| of each other
  .json, .json.gz  the same JSON but for the versions the generators record (string values of
                keys named *version*, "torch", "transformers", "tokenizers", "pytorch",
                "sentence_transformers", "numpy"; transformers' config.json key "torch_dtype",
                written "dtype" since transformers 4.56; tokenizer.json's merges, written
                ["a", "b"] since tokenizers 0.20, as "a b"; and the keys given with
                --ignore-key: facts about the run, such as a check it could not make here):
                objects with the same
                keys, lists of the same length, integers, strings and booleans equal, other
                numbers as floats above
  anything else the same bytes (.gz: once decompressed)
Prints one line per difference (the first 20 per file) and exits 1 if there is any, 0 if none.
Needs numpy (the golden venv's).
"""
import argparse
import gzip
import json
import math
import os
import sys

import numpy as np

VERSION_KEYS = {"torch", "transformers", "tokenizers", "pytorch", "sentence_transformers",
                "numpy"}
ALIASES = {"torch_dtype": "dtype"}  # transformers 4.56 renamed config.json's key


def read_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if path.endswith(".gz") else data


def is_version(key, value):
    return isinstance(value, str) and ("version" in key.lower() or key in VERSION_KEYS)


def merge_pair(merge):
    """A BPE merge of tokenizer.json as "a b": tokenizers 0.20 and later write ["a", "b"]."""
    if isinstance(merge, list) and len(merge) == 2 and all(isinstance(t, str) for t in merge):
        return " ".join(merge)
    return merge


def normalised(obj, ignored):
    """obj without version strings and ignored keys, with aliased keys renamed and merges as
    "a b"."""
    if isinstance(obj, dict):
        if isinstance(obj.get("merges"), list):
            obj = dict(obj, merges=[merge_pair(m) for m in obj["merges"]])
        return {ALIASES.get(k, k): normalised(v, ignored) for k, v in obj.items()
                if not is_version(k, v) and k not in ignored}
    if isinstance(obj, list):
        return [normalised(v, ignored) for v in obj]
    return obj


class Comparison:
    def __init__(self, abs_tol, rel_tol, ignored):
        self.abs_tol, self.rel_tol, self.ignored = abs_tol, rel_tol, set(ignored)
        self.problems = []
        self.worst = 0.0  # the largest float difference accepted

    def close(self, new, old):
        diff = abs(new - old)
        if math.isnan(new) and math.isnan(old):
            return True
        if diff <= self.abs_tol + self.rel_tol * abs(old):
            self.worst = max(self.worst, diff)
            return True
        return False

    def json_values(self, new, old, where, out):
        if len(out) >= 20:
            return
        if isinstance(new, bool) or isinstance(old, bool) or isinstance(new, str) or \
                new is None or old is None:
            if new != old or type(new) is not type(old):
                out.append("%s: %r, committed %r" % (where, str(new)[:60], str(old)[:60]))
        elif isinstance(new, (int, float)) and isinstance(old, (int, float)):
            if isinstance(new, int) and isinstance(old, int):
                if new != old:
                    out.append("%s: %d, committed %d" % (where, new, old))
            elif not self.close(float(new), float(old)):
                out.append("%s: %r, committed %r" % (where, new, old))
        elif isinstance(new, dict) and isinstance(old, dict):
            if set(new) != set(old):
                out.append("%s: keys %s only in the new file, %s only in the committed one" % (
                    where or "/", sorted(set(new) - set(old)), sorted(set(old) - set(new))))
            for k in new:
                if k in old:
                    self.json_values(new[k], old[k], "%s/%s" % (where, k), out)
        elif isinstance(new, list) and isinstance(old, list):
            if len(new) != len(old):
                out.append("%s: %d items, committed %d" % (where, len(new), len(old)))
                return
            for i, (a, b) in enumerate(zip(new, old)):
                self.json_values(a, b, "%s[%d]" % (where, i), out)
        else:
            out.append("%s: %s, committed %s" % (where, type(new).__name__, type(old).__name__))

    def npy(self, new_path, old_path, out):
        if read_bytes(new_path) == read_bytes(old_path):
            return
        self.arrays(np.load(new_path), np.load(old_path), out)

    def npz(self, new_path, old_path, out):
        """Each array of an .npz archive as an .npy file's (the archive's bytes also hold
        timestamps and compression that say nothing of the values)."""
        if read_bytes(new_path) == read_bytes(old_path):
            return
        with np.load(new_path) as new, np.load(old_path) as old:
            if sorted(new.files) != sorted(old.files):
                out.append("arrays %s, committed %s" % (sorted(new.files), sorted(old.files)))
                return
            for name in sorted(new.files):
                problems = []
                self.arrays(new[name], old[name], problems)
                out += ["%s: %s" % (name, p) for p in problems]

    def tsv(self, new_path, old_path, out):
        """Tab-separated text: the same lines and fields, numbers within the tolerance."""
        new = read_bytes(new_path).decode("utf-8").splitlines()
        old = read_bytes(old_path).decode("utf-8").splitlines()
        if len(new) != len(old):
            out.append("%d lines, committed %d" % (len(new), len(old)))
            return
        for n, (a, b) in enumerate(zip(new, old), 1):
            fa, fb = a.split("\t"), b.split("\t")
            if len(fa) != len(fb):
                out.append("line %d: %d fields, committed %d" % (n, len(fa), len(fb)))
                continue
            for x, y in zip(fa, fb):
                if x == y:
                    continue
                try:
                    close = self.close(float(x), float(y))
                except ValueError:
                    close = False
                if not close:
                    out.append("line %d: %r, committed %r" % (n, x[:60], y[:60]))
                    break
            if len(out) >= 20:
                return

    def arrays(self, new, old, out):
        if new.dtype != old.dtype or new.shape != old.shape:
            out.append("%s %s, committed %s %s" % (new.dtype, new.shape, old.dtype, old.shape))
        elif new.dtype.kind in "fc":
            if new.dtype.kind == "c":
                new, old = new.view(new.real.dtype), old.view(old.real.dtype)
            a, b = new.astype(np.float64), old.astype(np.float64)
            same = (a == b) | (np.isnan(a) & np.isnan(b))
            with np.errstate(invalid="ignore"):
                diff = np.where(same, 0.0, np.abs(a - b))
            with np.errstate(invalid="ignore"):  # 0 · inf: equal infinities are `same`
                bad = ~(same | (diff <= self.abs_tol + self.rel_tol * np.abs(b)))
            if bad.any():
                i = np.unravel_index(np.argmax(np.where(bad, diff, -1)), diff.shape)
                out.append("%d values differ beyond the tolerance, the most at %s: %r, "
                           "committed %r" % (bad.sum(), tuple(int(j) for j in i), new[i], old[i]))
            elif diff.size:
                self.worst = max(self.worst, float(diff.max()))
        elif not np.array_equal(new, old):
            out.append("%d values differ" % int((new != old).sum()))

    def file(self, rel, new_dir, old_dir):
        new_path, old_path = os.path.join(new_dir, rel), os.path.join(old_dir, rel)
        out = []
        if not os.path.isfile(old_path):
            out.append("not among the committed files")
        elif rel.endswith(".npy"):
            self.npy(new_path, old_path, out)
        elif rel.endswith(".npz"):
            self.npz(new_path, old_path, out)
        elif rel.endswith(".tsv"):
            self.tsv(new_path, old_path, out)
        elif rel.endswith((".json", ".json.gz")):
            new, old = (normalised(json.loads(read_bytes(p).decode("utf-8")), self.ignored)
                        for p in (new_path, old_path))
            self.json_values(new, old, "", out)
        elif read_bytes(new_path) != read_bytes(old_path):
            out.append("the bytes differ")
        self.problems += ["%s: %s" % (rel, o) for o in out]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("new")
    ap.add_argument("committed")
    ap.add_argument("--abs", type=float, default=0.0)
    ap.add_argument("--rel", type=float, default=0.0)
    ap.add_argument("--only", nargs="+", action="extend")
    ap.add_argument("--skip", nargs="+", action="extend", default=[])
    ap.add_argument("--ignore-key", nargs="+", action="extend", default=[])
    a = ap.parse_args()
    files = a.only or sorted(os.path.relpath(os.path.join(d, f), a.new)
                             for d, _, names in os.walk(a.new) for f in names
                             if f not in a.skip)
    if not files:
        sys.exit("golden_compare: %s holds no file" % a.new)
    c = Comparison(a.abs, a.rel, a.ignore_key)
    for rel in files:
        c.file(rel, a.new, a.committed)
    for p in c.problems:
        print("  differs: %s" % p)
    print("  %d files against %s: %s%s" % (
        len(files), os.path.relpath(a.committed), "DIFFERENT" if c.problems else "the same",
        "" if c.problems or not c.worst else " (floats within %.2g)" % c.worst))
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
