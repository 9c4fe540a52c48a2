#!/usr/bin/env python3
"""Checks clattn-serve's responses for tests/test_serve.sh (the Python standard library only).

  serve_check.py vectors RESPONSE NPY [--rows I,J,...] [--dims D] [--renormalize]
      RESPONSE (an OpenAI /v1/embeddings body, embeddings as floats or base64, or a TEI /embed
      body [[...], ...]) holds exactly the rows of NPY (all, or the rows listed), byte for byte
      as float32. With --dims D the reference rows are cut to D values (and with --renormalize
      divided by their L2 norm) and compared to 1e-6: the server's own arithmetic does that step.
  serve_check.py usage RESPONSE TOKENS
      the OpenAI body's usage: prompt_tokens == total_tokens == TOKENS.
  serve_check.py error RESPONSE openai|tei NEEDLE
      the body is the route's error shape (OpenAI {"error": {"message", "type", "param",
      "code"}}; TEI {"error", "error_type"}) and its message contains NEEDLE (case-insensitively).
  serve_check.py tokens RESPONSE
      prints the ids of a TEI /tokenize body ([[{"id", "text", "special", ...}, ...], ...]), one
      JSON array per text, as `embed --tokenize` does.
  serve_check.py json-lines FILE
      prints the lines of FILE (UTF-8, one text a line) as a JSON array of strings.
  serve_check.py same RESPONSE_A RESPONSE_B
      the two bodies (OpenAI or TEI, as for vectors) hold the same embeddings, byte for byte.
  serve_check.py model-not-found RESPONSE NAME
      the body is exactly OpenAI's answer to an unknown model: {"error": {"message": "The model
      `NAME` does not exist or you do not have access to it.<more>", "type":
      "invalid_request_error", "param": null, "code": "model_not_found"}} and nothing else.

Exit status 0 when the check holds, 1 with the reason on stdout otherwise.
"""
import ast
import base64
import json
import math
import struct
import sys


def fail(message):
    print("serve_check: " + message)
    sys.exit(1)


def load_json(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data)
    except ValueError as e:
        fail("%s is not JSON (%s): %r" % (path, e, data[:200]))


def read_npy(path):
    """Returns (rows, columns, [row bytes]) of a little-endian float32 2-D .npy file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        fail(path + " is not a .npy file")
    major = data[6]
    if major == 1:
        (header_len,) = struct.unpack_from("<H", data, 8)
        start = 10
    else:
        (header_len,) = struct.unpack_from("<I", data, 8)
        start = 12
    header = ast.literal_eval(data[start:start + header_len].decode("latin-1"))
    if header["descr"] != "<f4" or header["fortran_order"] or len(header["shape"]) != 2:
        fail("%s: expected a C-order float32 matrix, got %r" % (path, header))
    rows, cols = header["shape"]
    body = data[start + header_len:]
    if len(body) != rows * cols * 4:
        fail("%s: %d data bytes for shape %r" % (path, len(body), header["shape"]))
    return rows, cols, [body[r * cols * 4:(r + 1) * cols * 4] for r in range(rows)]


def vector_bytes(embedding, where):
    """float32 bytes of one embedding: a base64 string or a JSON array of numbers."""
    if isinstance(embedding, str):
        try:
            raw = base64.b64decode(embedding, validate=True)
        except ValueError as e:
            fail("%s: not base64: %s" % (where, e))
        if len(raw) % 4:
            fail("%s: %d base64 bytes, not a multiple of 4" % (where, len(raw)))
        return raw
    if not isinstance(embedding, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in embedding):
        fail("%s: not an array of numbers: %.200r" % (where, embedding))
    # A float32 printed with 9 significant digits parses back to itself.
    return struct.pack("<%df" % len(embedding), *embedding)


def response_vectors(body):
    """The embeddings of an OpenAI or TEI body, in order, as float32 bytes."""
    if isinstance(body, list):  # TEI: [[...], ...]
        return [vector_bytes(v, "embedding %d" % i) for i, v in enumerate(body)]
    if not isinstance(body, dict) or body.get("object") != "list":
        fail('not an OpenAI list ({"object": "list", ...}) nor a TEI array: %.300r' % (body,))
    data = body.get("data")
    if not isinstance(data, list) or not data:
        fail("data is not a non-empty array: %.300r" % (body,))
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or item.get("object") != "embedding" or item.get("index") != i:
            fail('data[%d] is not {"object": "embedding", "index": %d, ...}: %.200r' % (i, i, item))
        out.append(vector_bytes(item.get("embedding"), "data[%d].embedding" % i))
    if not isinstance(body.get("model"), str):
        fail("no model name in the response")
    return out


def floats(raw):
    return struct.unpack("<%df" % (len(raw) // 4), raw)


def check_vectors(args):
    response, npy = args[0], args[1]
    rows_arg, dims, renormalize = None, None, False
    rest = args[2:]
    while rest:
        if rest[0] == "--rows":
            rows_arg = [int(x) for x in rest[1].split(",")]
            rest = rest[2:]
        elif rest[0] == "--dims":
            dims = int(rest[1])
            rest = rest[2:]
        elif rest[0] == "--renormalize":
            renormalize = True
            rest = rest[1:]
        else:
            fail("unknown argument " + rest[0])
    got = response_vectors(load_json(response))
    _, cols, ref = read_npy(npy)
    if rows_arg is not None:
        ref = [ref[r] for r in rows_arg]
    if len(got) != len(ref):
        fail("%d embeddings, expected %d" % (len(got), len(ref)))
    for i, (g, r) in enumerate(zip(got, ref)):
        if dims is None:
            if len(g) != len(r):
                fail("embedding %d has %d values, expected %d" % (i, len(g) // 4, cols))
            if g != r:
                diff = max(abs(a - b) for a, b in zip(floats(g), floats(r)))
                fail("embedding %d differs from embed's (max abs difference %.3g)" % (i, diff))
            continue
        want = list(floats(r))[:dims]
        if renormalize:
            norm = math.sqrt(sum(x * x for x in want))
            want = [x / max(norm, 1e-12) for x in want]
        g = floats(g)
        if len(g) != dims:
            fail("embedding %d has %d values, expected dimensions %d" % (i, len(g), dims))
        diff = max(abs(a - b) for a, b in zip(g, want))
        if diff > 1e-6:
            fail("embedding %d differs from embed's cut to %d by %.3g" % (i, dims, diff))
    print("%d embeddings equal to embed's%s" % (len(got), "" if dims is None else " cut to %d" % dims))


def check_usage(args):
    body, tokens = load_json(args[0]), int(args[1])
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict) or usage.get("prompt_tokens") != tokens or \
            usage.get("total_tokens") != tokens:
        fail("usage %r, expected prompt_tokens = total_tokens = %d" % (usage, tokens))
    print("usage: %d tokens" % tokens)


def check_error(args):
    body, route, needle = load_json(args[0]), args[1], args[2].lower()
    if route == "openai":
        err = body.get("error") if isinstance(body, dict) else None
        if not isinstance(err, dict) or not all(k in err for k in ("message", "type", "param", "code")):
            fail('not an OpenAI error {"error": {"message", "type", "param", "code"}}: %.300r' % (body,))
        message = err["message"]
    else:
        if not isinstance(body, dict) or not isinstance(body.get("error_type"), str):
            fail('not a TEI error {"error", "error_type"}: %.300r' % (body,))
        message = body.get("error")
    if not isinstance(message, str) or not message:
        fail("the error has no message: %.300r" % (body,))
    if needle not in message.lower():
        fail("the message %r does not mention %r" % (message, needle))
    print("error: " + message)


def print_tokens(args):
    body = load_json(args[0])
    if not isinstance(body, list) or not all(isinstance(t, list) for t in body):
        fail("not a TEI /tokenize body [[...], ...]: %.300r" % (body,))
    for text in body:
        if not all(isinstance(t, dict) and isinstance(t.get("id"), int) and "text" in t
                   and isinstance(t.get("special"), bool) for t in text):
            fail('not TEI tokens {"id", "text", "special", ...}: %.300r' % (text,))
        print("[" + ", ".join(str(t["id"]) for t in text) + "]")


def print_json_lines(args):
    with open(args[0], encoding="utf-8", newline="\n") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    print(json.dumps(lines))


def check_same(args):
    a, b = response_vectors(load_json(args[0])), response_vectors(load_json(args[1]))
    if len(a) != len(b):
        fail("%d embeddings against %d" % (len(a), len(b)))
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            n = min(len(x), len(y)) // 4
            diff = max(abs(p - q) for p, q in zip(floats(x[:4 * n]), floats(y[:4 * n])))
            fail("embedding %d differs (%d and %d values, max abs difference %.3g)"
                 % (i, len(x) // 4, len(y) // 4, diff))
    print("%d embeddings, the same bytes" % len(a))


def check_model_not_found(args):
    body, name = load_json(args[0]), args[1]
    err = body.get("error") if isinstance(body, dict) and list(body) == ["error"] else None
    if not isinstance(err, dict) or sorted(err) != ["code", "message", "param", "type"]:
        fail('not OpenAI\'s {"error": {"message", "type", "param", "code"}}: %.300r' % (body,))
    want = "The model `%s` does not exist or you do not have access to it." % name
    if not isinstance(err["message"], str) or not err["message"].startswith(want):
        fail("the message %r does not begin %r" % (err["message"], want))
    if (err["type"], err["param"], err["code"]) != ("invalid_request_error", None,
                                                    "model_not_found"):
        fail("type, param, code are %r, expected invalid_request_error, null, model_not_found"
             % ((err["type"], err["param"], err["code"]),))
    print("model_not_found: " + err["message"])


def main():
    commands = {"vectors": (check_vectors, 2), "usage": (check_usage, 2),
                "error": (check_error, 3), "tokens": (print_tokens, 1),
                "json-lines": (print_json_lines, 1), "same": (check_same, 2),
                "model-not-found": (check_model_not_found, 2)}
    if len(sys.argv) < 2 or sys.argv[1] not in commands or len(sys.argv) - 2 < commands[sys.argv[1]][1]:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    commands[sys.argv[1]][0](sys.argv[2:])


if __name__ == "__main__":
    main()
