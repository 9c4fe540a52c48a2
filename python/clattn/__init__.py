"""libclattn from Python: sentence embeddings, cross-encoders, LLMs and attention on OpenCL
devices.

    import clattn
    model = clattn.SentenceModel("all-MiniLM-L6-v2")     # a sentence-transformers folder, or
    embeddings = model.encode(["a text", "another"])     # a name in ~/.cache/clattn: [2, 384]

Names and defaults follow sentence-transformers (SentenceModel is also SentenceTransformer) and
PyTorch (sdpa is scaled_dot_product_attention, MultiheadAttention nn.MultiheadAttention).
Errors of the library are clattn.Error (a RuntimeError) with its message; a model folder or file
that does not exist is clattn.ModelNotFoundError, also a FileNotFoundError. The package calls the
public C API (include/clattn/*.h) through ctypes, which releases the GIL during each call.
"""

from ._context import Error, ModelNotFoundError, devices, version
from .attention import MultiheadAttention, sdpa
from .cross_encoder import CrossEncoder
from .encoder import Encoder
from .llm import LLM, Generation
from .sentence import SentenceModel, SentenceTransformer

__version__ = version()

# The public names print as clattn.X (clattn.Error, not clattn._context.Error).
for _public in (Error, ModelNotFoundError, devices, version, sdpa, MultiheadAttention,
                CrossEncoder, Encoder, SentenceModel, LLM, Generation):
    _public.__module__ = __name__
del _public

__all__ = ["Error", "ModelNotFoundError", "devices", "version", "sdpa", "MultiheadAttention",
           "CrossEncoder", "Encoder", "SentenceModel", "SentenceTransformer", "LLM", "Generation",
           "__version__"]
