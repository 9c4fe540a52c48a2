"""What the Hugging Face golden generators (tools/gen_*_golden.py) share: the mean pooling of
their references, the float64 softmax of transformers' eager attention, and the
sentence-transformers folders' JSON files. Nothing but the standard library is imported at the
top: numpy where it is used, torch passed in. The generators run from the venv of
tools/make-golden-venv.sh (tests/golden/README.md)."""
import contextlib
import json
import os


def pooled(h, mask):
    """Mean pooling of hidden states h [B, N, d] under attention mask [B, N] in float64, and its
    L2-normalised rows (sentence-transformers' Pooling and Normalize)."""
    import numpy as np
    m = mask[:, :, None].astype(np.float64)
    mean = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    norm = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
    return mean, norm


@contextlib.contextmanager
def float64_softmax(torch):
    """transformers' eager_attention_forward (ModernBERT's among them) takes its softmax with
    dtype=torch.float32: in a float64 run that rounds the probabilities to float32, and
    finfo(float64).min to -inf, so that a padded query whose window holds only masked keys gets
    NaN, which the next layer's zero weights spread (0 · NaN). While this is active a float64
    input keeps a float64 softmax."""
    original = torch.nn.functional.softmax

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        if input.dtype == torch.float64:
            dtype = None
        return original(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
    torch.nn.functional.softmax = softmax
    try:
        yield
    finally:
        torch.nn.functional.softmax = original


def write_json_files(folder, files):
    """Each of files' {name: value} as folder/name, indented by 2 with a final newline (as
    sentence-transformers and transformers write theirs)."""
    for path, content in files.items():
        with open(os.path.join(folder, path), "w") as f:
            json.dump(content, f, indent=2)
            f.write("\n")
