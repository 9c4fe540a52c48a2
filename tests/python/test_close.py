"""close() from another thread while a call runs: it waits for the call, which finishes whole,
and every later call raises clattn.Error (before the fix, encode and predict died of SIGSEGV
and tokenize read freed memory).

The races run in a child process, so that a crash fails its test (with the signal) instead of
killing pytest; the waiting itself is also checked in-process, without timing."""

import subprocess
import sys
import threading

import numpy as np
import pytest

import clattn

# argv: kind (encode, predict or tokenize), model folder. Prints "ok" when the call in flight
# gave the same result as before, close() waited for it, and a later call raised clattn.Error.
RACE = r"""
import sys, threading, time
import numpy as np
import clattn
from clattn._api import lib

kind, folder = sys.argv[1], sys.argv[2]
if kind == "predict":
    model = clattn.CrossEncoder(folder)
    pairs = [("what is the capital of france?", f"text number {i} is here") for i in range(600)]
    call = lambda: model.predict(pairs, batch_size=8)
    c_function = "clattn_cross_encoder_score"
elif kind == "encode":
    model = clattn.SentenceModel(folder)
    texts = [f"text number {i} is here and there" for i in range(600)]
    call = lambda: model.encode(texts, batch_size=8)
    c_function = "clattn_sentence_model_embed"
else:
    model = clattn.SentenceModel(folder)
    texts = [f"text number {i} is here and there" for i in range(20000)]
    call = lambda: model.tokenize(texts)["input_ids"]
    c_function = "clattn_sentence_model_encode"  # once per text

# The call is in flight once the package has called the C function (the 100th time for
# tokenize's, so that thousands of calls remain).
real = getattr(lib, c_function)
calls = [0]
in_flight = threading.Event()

def counted(*args):
    calls[0] += 1
    if calls[0] >= (100 if kind == "tokenize" else 1):
        in_flight.set()
    return real(*args)

want = call()
result = {}

def run():
    try:
        result["got"] = call()
    except clattn.Error as err:
        result["error"] = err

setattr(lib, c_function, counted)
thread = threading.Thread(target=run)
thread.start()
assert in_flight.wait(60), "the call never reached the library"
model.close()
thread.join()
assert "got" in result, f"the call in flight failed: {result.get('error')!r}"
assert result["got"].tobytes() == want.tobytes(), "the call in flight gave another result"
try:
    call()
except clattn.Error as err:
    assert "closed" in str(err), err
else:
    raise AssertionError("a call after close() did not raise")
print("ok")
"""


@pytest.mark.parametrize("kind", ["encode", "predict", "tokenize"])
def test_close_during_a_call(kind, tiny_model, golden):
    folder = golden / "crossenc" / "one_label" if kind == "predict" else tiny_model
    child = subprocess.run([sys.executable, "-c", RACE, kind, str(folder)],
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, (
        f"exit status {child.returncode} (a negative status is the signal that killed it)\n"
        f"{child.stderr[-3000:]}")
    assert child.stdout.strip() == "ok"


def _closes_only_after(model, hold) -> None:
    """close() in another thread does not return while `hold` (a call in flight) is held."""
    closer = threading.Thread(target=model.close)
    with hold():
        closer.start()
        closer.join(0.3)
        assert closer.is_alive(), "close() did not wait for the call in flight"
    closer.join(10)
    assert not closer.is_alive()


def test_close_waits_for_tokenize_and_encode(tiny_model):
    """tokenize runs beside encode and other tokenize calls (no lock), yet close() waits for
    it; and close() waits for the lock that encode holds."""
    model = clattn.SentenceModel(tiny_model)
    with model._context.shared():
        with model._context.exclusive():  # encode's lock is free while tokenize runs
            assert model.tokenize(["beside"])["input_ids"].shape[0] == 1
    _closes_only_after(model, model._context.shared)
    model = clattn.SentenceModel(tiny_model)
    _closes_only_after(model, model._context.exclusive)


def test_calls_after_close(tiny_model, golden):
    model = clattn.SentenceModel(tiny_model)
    model.close()
    model.close()  # a second close does nothing
    for call in (lambda: model.encode(["a"]), lambda: model.encode([]),
                 lambda: model.tokenize(["a"]), lambda: model.tokenize([]),
                 lambda: model.device):
        with pytest.raises(clattn.Error, match="SentenceModel is closed") as info:
            call()
        assert info.value.status_name == "CLATTN_ERROR_INVALID_ARGUMENT"
    with clattn.SentenceModel(tiny_model) as model:
        pass
    with pytest.raises(clattn.Error, match="closed"):
        model.encode("a")
    cross = clattn.CrossEncoder(golden / "crossenc" / "one_label")
    cross.close()
    for pairs in ([("q", "d")], []):
        with pytest.raises(clattn.Error, match="CrossEncoder is closed"):
            cross.predict(pairs)
    layer = clattn.MultiheadAttention(8, 2)
    layer.close()
    with pytest.raises(clattn.Error, match="MultiheadAttention is closed"):
        layer(np.zeros((1, 2, 8), np.float32))
    with pytest.raises(clattn.Error, match="MultiheadAttention is closed"):
        layer.load_state_dict({"out_proj.bias": np.zeros(8, np.float32)})
    encoder = clattn.Encoder.from_file(golden / "enc_post_ln_relu" / "model.safetensors")
    encoder.close()
    with pytest.raises(clattn.Error, match="Encoder is closed"):
        encoder(np.zeros((1, 2, encoder.d_model), np.float32))


# close() on the thread that is inside the call: from a signal handler (argv: "signal") or from
# the progress callback, through sys.stderr (argv: "progress"); kind "encode", "predict" or
# "tokenize" (signal only). It
# must not wait for the call (which could never end: before the fix, close() waited for the
# lock that the same thread held, and the process hung). The call goes on to its normal result,
# then frees; a later call raises clattn.Error. A call made from the progress callback into the
# same model raises clattn.Error rather than wait for the lock. Prints "ok".
REENTRANT = r"""
import os, signal, sys, threading
import clattn
from clattn._api import lib

how, kind, folder = sys.argv[1:4]
if kind == "predict":
    model = clattn.CrossEncoder(folder)
    items = [("what is the capital of france?", f"text number {i} is here") for i in range(200)]
    call = lambda **kw: model.predict(items, batch_size=8, **kw)
    again = lambda: model.predict([("q", "d")])
    c_function = "clattn_cross_encoder_score"
elif kind == "encode":
    model = clattn.SentenceModel(folder)
    items = [f"text number {i} is here and there" for i in range(600)]
    call = lambda **kw: model.encode(items, batch_size=8, **kw)
    again = lambda: model.encode(["again"])
    c_function = "clattn_sentence_model_embed"
else:  # tokenize (a shared call, without the lock): from a signal handler only
    model = clattn.SentenceModel(folder)
    items = [f"text number {i} is here and there" for i in range(600)]
    call = lambda: model.tokenize(items)["input_ids"]
    c_function = "clattn_sentence_model_encode"  # once per text
want = call()
seen = []

if how == "signal":
    # A timer thread signals this process while the C call runs; the handler runs on the main
    # thread before the call's Python frame returns (at the latest in sent.wait below).
    real = getattr(lib, c_function)
    in_flight, sent = threading.Event(), threading.Event()

    def counted(*args):
        in_flight.set()
        status = real(*args)
        assert sent.wait(60), "the timer thread did not signal"
        return status

    def timer():
        assert in_flight.wait(60)
        os.kill(os.getpid(), signal.SIGUSR1)
        sent.set()

    def handler(signum, frame):
        model.close()
        seen.append("closed")

    signal.signal(signal.SIGUSR1, handler)
    setattr(lib, c_function, counted)
    threading.Thread(target=timer, daemon=True).start()
    got = call()
else:
    class Closing:
        # sys.stderr: the progress bar's first write tries a call into the model (refused),
        # then closes it.
        def write(self, text):
            if not seen:
                try:
                    again()
                except clattn.Error as err:
                    seen.append(f"refused: {err}")
                model.close()
                seen.append("closed")
            return len(text)

        def flush(self):
            pass

    real_stderr, sys.stderr = sys.stderr, Closing()
    try:
        got = call(show_progress_bar=True)
    finally:
        sys.stderr = real_stderr
    assert seen[0].startswith("refused: ") and "already in a call" in seen[0], seen

assert seen[-1] == "closed", seen
assert got.tobytes() == want.tobytes(), "the call in flight gave another result"
try:
    call()
except clattn.Error as err:
    assert "closed" in str(err), err
else:
    raise AssertionError("a call after close() did not raise")
print("ok")
"""


@pytest.mark.parametrize("how, kind", [("signal", "encode"), ("signal", "predict"),
                                       ("signal", "tokenize"), ("progress", "encode"),
                                       ("progress", "predict")])
def test_close_inside_the_call(how, kind, tiny_model, golden):
    """SIGTERM handlers that close the model, progress bars that close it: the call they
    interrupt finishes, the model is closed, nothing hangs (in a child with a timeout)."""
    folder = golden / "crossenc" / "one_label" if kind == "predict" else tiny_model
    try:
        child = subprocess.run([sys.executable, "-c", REENTRANT, how, kind, str(folder)],
                               capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        child = None  # (pytest.fail outside the except: no chained TimeoutExpired)
    if child is None:
        pytest.fail(f"close() from the {how} during {kind} hung (the child was killed after "
                    "60 s)")
    assert child.returncode == 0, (
        f"exit status {child.returncode} (a negative status is the signal that killed it)\n"
        f"{child.stderr[-3000:]}")
    assert child.stdout.strip() == "ok"


def test_close_when_collected_never_waits(tiny_model):
    """__del__ (the garbage collector's close) neither waits for a call in flight nor frees
    under it: the last call frees. Here the call is held open by hand."""
    model = clattn.SentenceModel(tiny_model)
    context = model._context
    done = threading.Event()
    with context.exclusive():
        collector = threading.Thread(target=lambda: (model.__del__(), done.set()))
        collector.start()
        assert done.wait(10), "__del__ waited for the call in flight"
        assert context.closed and context.handle.value  # closed, not yet freed
    assert not context.handle.value  # freed when the call returned
    with pytest.raises(clattn.Error, match="closed"):
        model.encode("a")
