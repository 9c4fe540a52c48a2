"""ctypes declarations of the public C API (include/clattn/*.h) that the package calls.

Each Structure mirrors its C struct field for field, in order (the C headers are the reference:
a field added there must be added here at the same place, reserved bytes included). Each
function gets its argument and result types so that ctypes converts and checks them.
"""

import ctypes
from ctypes import (POINTER, c_char, c_char_p, c_float, c_int, c_size_t, c_uint, c_uint8,
                    c_uint64, c_void_p, c_int32, c_int64)

from . import _lib

lib = _lib.load()

c_status = c_int
c_enum = c_int  # C enums are ints on every ABI the library builds for

DEVICE_STRING_SIZE = 256
MAX_DIMS = 4

# clattn_status codes (clattn/common.h)
OK = 0
ERROR_INVALID_ARGUMENT = -1
ERROR_IO = -11

# clattn_mask_kind (clattn/attention.h)
MASK_BOOL = 0       # nonzero = ignore
MASK_ADDITIVE = 1   # added to the scores

# clattn_score_activation (clattn/cross_encoder.h)
SCORES_DEFAULT = 0
SCORES_RAW = 1
SCORES_SIGMOID = 2
SCORES_SOFTMAX = 3

POOLING_NAMES = {0: "mean", 1: "cls"}

progress_callback = ctypes.CFUNCTYPE(None, c_void_p, c_size_t, c_size_t)
log_callback = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class DeviceInfo(ctypes.Structure):  # clattn_device_info
    _fields_ = [
        ("platform_index", c_uint),
        ("device_index", c_uint),
        ("platform_name", c_char * DEVICE_STRING_SIZE),
        ("name", c_char * DEVICE_STRING_SIZE),
        ("vendor", c_char * DEVICE_STRING_SIZE),
        ("driver_version", c_char * DEVICE_STRING_SIZE),
        ("opencl_version", c_char * DEVICE_STRING_SIZE),
        ("type", c_enum),
        ("compute_units", c_uint),
        ("max_clock_mhz", c_uint),
        ("global_mem_bytes", c_uint64),
        ("local_mem_bytes", c_uint64),
        ("local_mem_is_global", c_int),
        ("max_alloc_bytes", c_uint64),
        ("max_work_group_size", c_size_t),
        ("fp16", c_int),
        ("fp64", c_int),
    ]


# clattn_precision, by the names --precision takes.
PRECISIONS = {"fp32": 0, "bf16": 1, "int8": 2}


class ContextParams(ctypes.Structure):  # clattn_context_params
    _fields_ = [
        ("device", c_char_p),
        ("log_callback", log_callback),
        ("log_user_data", c_void_p),
        ("log_level", c_enum),
        ("profiling", c_int),
        ("workspace_limit_bytes", c_uint64),
        ("precision", c_enum),
        ("reserved", c_uint8 * 60),
    ]


class SentenceModelInfo(ctypes.Structure):  # clattn_sentence_model_info
    _fields_ = [
        ("hidden_size", c_size_t),
        ("max_length", c_size_t),
        ("num_layers", c_size_t),
        ("vocab_size", c_size_t),
        ("pooling", c_enum),
        ("normalize", c_int),
        ("default_prompt_name", c_char_p),
        ("reserved", c_uint8 * 56),
    ]


class EmbedParams(ctypes.Structure):  # clattn_embed_params
    _fields_ = [
        ("max_length", c_size_t),
        ("batch_size", c_size_t),
        ("max_batch_tokens", c_size_t),
        ("pooling", c_int),
        ("normalize", c_int),
        ("progress", progress_callback),
        ("progress_user_data", c_void_p),
        ("prompt", c_char_p),
        ("prompt_name", c_char_p),
        ("reserved", c_uint8 * 48),
    ]


class TokenizerSpecial(ctypes.Structure):  # clattn_tokenizer_special
    _fields_ = [("cls", c_int32), ("sep", c_int32), ("pad", c_int32), ("unk", c_int32),
                ("mask", c_int32)]


class CrossEncoderInfo(ctypes.Structure):  # clattn_cross_encoder_info
    _fields_ = [
        ("num_labels", c_size_t),
        ("labels", POINTER(c_char_p)),
        ("max_length", c_size_t),
        ("hidden_size", c_size_t),
        ("num_layers", c_size_t),
        ("vocab_size", c_size_t),
        ("type_vocab_size", c_size_t),
        ("model_type", c_char_p),
        ("architecture", c_char_p),
        ("default_activation", c_enum),
        ("reserved", c_uint8 * 60),
    ]


class CrossEncoderParams(ctypes.Structure):  # clattn_cross_encoder_params
    _fields_ = [
        ("max_length", c_size_t),
        ("truncate", c_int),
        ("batch_size", c_size_t),
        ("max_batch_tokens", c_size_t),
        ("activation", c_enum),
        ("progress", progress_callback),
        ("progress_user_data", c_void_p),
        ("reserved", c_uint8 * 64),
    ]


class SdpaParams(ctypes.Structure):  # clattn_sdpa_params
    _fields_ = [
        ("scale", c_float),
        ("causal", c_int),
        ("attn_mask", c_void_p),
        ("attn_mask_kind", c_enum),
        ("key_padding_mask", c_void_p),
        ("key_padding_mask_kind", c_enum),
        ("attn_weights", c_void_p),
        ("path", c_enum),
        ("enable_gqa", c_int),
        ("alibi_slopes", c_void_p),
        ("relative_bias", c_void_p),
        ("relative_max_distance", c_size_t),
        ("window", c_size_t),
        ("softcap", c_float),
        ("rope", c_void_p),
        ("reserved", c_uint8 * 16),
    ]


class MhaConfig(ctypes.Structure):  # clattn_mha_config
    _fields_ = [
        ("embed_dim", c_size_t),
        ("num_heads", c_size_t),
        ("head_dim_qk", c_size_t),
        ("head_dim_v", c_size_t),
        ("kdim", c_size_t),
        ("vdim", c_size_t),
        ("in_proj_bias", c_int),
        ("out_proj", c_int),
        ("out_proj_bias", c_int),
        ("num_kv_heads", c_size_t),
        ("reserved", c_uint8 * 56),
    ]


class HostTensor(ctypes.Structure):  # clattn_host_tensor
    _fields_ = [("data", POINTER(c_float)), ("ndim", c_int), ("shape", c_size_t * MAX_DIMS)]


class MhaWeights(ctypes.Structure):  # clattn_mha_weights
    _fields_ = [(name, HostTensor) for name in (
        "in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight", "in_proj_bias",
        "out_proj_weight", "out_proj_bias")]


class MhaForwardParams(ctypes.Structure):  # clattn_mha_forward_params
    _fields_ = [
        ("key_padding_mask", c_void_p),
        ("key_padding_mask_kind", c_enum),
        ("attn_mask", c_void_p),
        ("attn_mask_kind", c_enum),
        ("causal", c_int),
        ("attn_weights", c_void_p),
        ("average_attn_weights", c_int),
        ("path", c_enum),
        ("alibi_slopes", c_void_p),
        ("relative_bias", c_void_p),
        ("relative_max_distance", c_size_t),
        ("window", c_size_t),
        ("softcap", c_float),
        ("rope", c_void_p),
        ("reserved", c_uint8 * 16),
    ]


class EncoderConfig(ctypes.Structure):  # clattn_encoder_config
    _fields_ = [
        ("d_model", c_size_t),
        ("nhead", c_size_t),
        ("num_layers", c_size_t),
        ("dim_feedforward", c_size_t),
        ("head_dim_qk", c_size_t),
        ("head_dim_v", c_size_t),
        ("activation", c_enum),
        ("norm_first", c_int),
        ("layer_norm_eps", c_float),
        ("final_norm", c_int),
        ("positional", c_enum),
        ("vocab_size", c_size_t),
        ("max_positions", c_size_t),
        ("type_vocab_size", c_size_t),
        ("embedding_norm", c_int),
        ("embedding_scale", c_float),
        ("padding_idx", c_int32),
        ("relative_attention_buckets", ctypes.c_uint32),
        ("relative_attention_max_distance", ctypes.c_uint32),
        ("ffn_gated", c_uint8),
        ("linear_no_bias", c_uint8),
        ("norm_no_bias", c_uint8),
        ("alibi", c_uint8),
        ("rope_theta", c_float),
        ("rotary_dim", ctypes.c_uint32),
        ("rope_interleaved", c_uint8),
        ("first_norm1_identity", c_uint8),
        ("global_every", ctypes.c_uint16),
        ("local_window", ctypes.c_uint32),
        ("local_rope_theta", c_float),
        ("reserved", c_uint8 * 4),
    ]


class EncoderForwardParams(ctypes.Structure):  # clattn_encoder_forward_params
    _fields_ = [
        ("key_padding_mask", c_void_p),
        ("key_padding_mask_kind", c_enum),
        ("causal", c_int),
        ("position_offset", c_size_t),
        ("path", c_enum),
        ("token_type_ids", POINTER(c_int64)),
        ("attn_mask", c_void_p),
        ("attn_mask_kind", c_enum),
        ("reserved", c_uint8 * 44),
    ]


class LlmInfo(ctypes.Structure):  # clattn_llm_info (llm.h)
    _fields_ = [
        ("architecture", c_char_p),
        ("vocab_size", c_size_t),
        ("context_length", c_size_t),
        ("num_layers", c_size_t),
        ("d_model", c_size_t),
        ("d_ff", c_size_t),
        ("num_heads", c_size_t),
        ("num_kv_heads", c_size_t),
        ("head_dim", c_size_t),
        ("tied_embeddings", c_int),
    ]


class LlmSampling(ctypes.Structure):  # clattn_llm_sampling (llm_text.h)
    _fields_ = [
        ("temperature", ctypes.c_double),
        ("top_k", c_int32),
        ("top_p", ctypes.c_double),
        ("min_p", ctypes.c_double),
        ("repetition_penalty", ctypes.c_double),
        ("presence_penalty", ctypes.c_double),
        ("frequency_penalty", ctypes.c_double),
        ("seed", c_uint64),
    ]


class LlmGenerateOptions(ctypes.Structure):  # clattn_llm_generate_options (llm_text.h)
    _fields_ = [
        ("sampling", LlmSampling),
        ("max_new_tokens", c_size_t),
        ("stop", POINTER(c_char_p)),
        ("stop_count", c_size_t),
        ("special", c_int),
    ]


class LlmGeneration(ctypes.Structure):  # clattn_llm_generation (llm_text.h)
    _fields_ = [
        ("tokens", POINTER(c_int32)),
        ("token_count", c_size_t),
        ("text", POINTER(c_char)),
        ("text_length", c_size_t),
        ("finish", c_int),
        ("prompt_tokens", c_size_t),
        ("prompt_seconds", ctypes.c_double),
        ("decode_tokens", c_size_t),
        ("decode_seconds", ctypes.c_double),
    ]


# clattn_llm_token_callback: (piece, length, token, logits, user_data) -> nonzero to stop
llm_token_callback = ctypes.CFUNCTYPE(c_int, POINTER(c_char), c_size_t, c_int32,
                                      POINTER(c_float), c_void_p)
# clattn_llm_batch_callback: (sequence, piece, length, token, logits, user_data)
llm_batch_callback = ctypes.CFUNCTYPE(c_int, c_size_t, POINTER(c_char), c_size_t, c_int32,
                                      POINTER(c_float), c_void_p)


def _declare(name, restype, *argtypes):
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)


p_float = POINTER(c_float)
p_size = POINTER(c_size_t)

# common.h, context.h
_declare("clattn_strerror", c_char_p, c_status)
_declare("clattn_status_name", c_char_p, c_status)
_declare("clattn_version_string", c_char_p)
_declare("clattn_list_devices", c_status, POINTER(DeviceInfo), c_size_t, p_size)
_declare("clattn_device_type_name", c_char_p, c_enum)
_declare("clattn_context_params_default", None, POINTER(ContextParams))
_declare("clattn_context_create", c_status, POINTER(c_void_p), POINTER(ContextParams))
_declare("clattn_context_destroy", None, POINTER(c_void_p))
_declare("clattn_context_device_info", c_status, c_void_p, POINTER(DeviceInfo))
_declare("clattn_context_finish", c_status, c_void_p)
_declare("clattn_last_error", c_char_p, c_void_p)

# tensor.h
_declare("clattn_tensor_create", c_status, c_void_p, POINTER(c_void_p), c_int, p_size)
_declare("clattn_tensor_destroy", None, POINTER(c_void_p))
_declare("clattn_tensor_write", c_status, c_void_p, p_float, c_size_t)
_declare("clattn_tensor_read", c_status, c_void_p, p_float, c_size_t)

# attention.h
_declare("clattn_sdpa_params_default", None, POINTER(SdpaParams))
_declare("clattn_sdpa", c_status, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
         POINTER(SdpaParams))
_declare("clattn_mha_config_default", None, POINTER(MhaConfig), c_size_t, c_size_t)
_declare("clattn_mha_create", c_status, c_void_p, POINTER(c_void_p), POINTER(MhaConfig))
_declare("clattn_mha_destroy", None, POINTER(c_void_p))
_declare("clattn_mha_load_weights", c_status, c_void_p, POINTER(MhaWeights))
_declare("clattn_mha_forward_params_default", None, POINTER(MhaForwardParams))
_declare("clattn_mha_forward", c_status, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
         POINTER(MhaForwardParams))
_declare("clattn_mha_get_config", c_status, c_void_p, POINTER(MhaConfig))

# encoder.h
_declare("clattn_encoder_load_file", c_status, c_void_p, POINTER(c_void_p), c_char_p)
_declare("clattn_encoder_destroy", None, POINTER(c_void_p))
_declare("clattn_encoder_get_config", c_status, c_void_p, POINTER(EncoderConfig))
_declare("clattn_encoder_forward_params_default", None, POINTER(EncoderForwardParams))
_declare("clattn_encoder_forward", c_status, c_void_p, c_void_p, c_void_p,
         POINTER(EncoderForwardParams))
_declare("clattn_encoder_forward_tokens", c_status, c_void_p, POINTER(c_int64), c_size_t,
         c_size_t, c_void_p, POINTER(EncoderForwardParams))

# pretrained.h
_declare("clattn_sentence_model_load", c_status, c_void_p, POINTER(c_void_p), c_char_p)
_declare("clattn_sentence_model_destroy", None, POINTER(c_void_p))
_declare("clattn_sentence_model_get_info", c_status, c_void_p, POINTER(SentenceModelInfo))
_declare("clattn_sentence_model_prompt", c_char_p, c_void_p, c_char_p)
_declare("clattn_sentence_model_prompt_name", c_char_p, c_void_p, c_size_t)
_declare("clattn_sentence_model_tokenizer", c_void_p, c_void_p)
_declare("clattn_sentence_model_encode", c_status, c_void_p, c_char_p, c_size_t, c_size_t,
         POINTER(c_int32), c_size_t, p_size)
_declare("clattn_embed_params_default", None, POINTER(EmbedParams))
_declare("clattn_sentence_model_embed", c_status, c_void_p, POINTER(c_char_p), p_size, c_size_t,
         p_float, POINTER(EmbedParams), p_size)

# tokenizer.h
_declare("clattn_tokenizer_special_ids", TokenizerSpecial, c_void_p)

# cross_encoder.h
_declare("clattn_cross_encoder_load", c_status, c_void_p, POINTER(c_void_p), c_char_p)
_declare("clattn_cross_encoder_destroy", None, POINTER(c_void_p))
_declare("clattn_cross_encoder_get_info", c_status, c_void_p, POINTER(CrossEncoderInfo))
_declare("clattn_cross_encoder_params_default", None, POINTER(CrossEncoderParams))
_declare("clattn_cross_encoder_score", c_status, c_void_p, POINTER(c_char_p), p_size,
         POINTER(c_char_p), p_size, c_size_t, p_float, POINTER(CrossEncoderParams), p_size)

# llm.h
_declare("clattn_llm_load", c_status, c_void_p, c_char_p, POINTER(c_void_p))
_declare("clattn_llm_destroy", None, POINTER(c_void_p))
_declare("clattn_llm_get_info", c_status, c_void_p, POINTER(LlmInfo))
_declare("clattn_llm_set_precision", c_status, c_void_p, c_enum)
_declare("clattn_llm_logits", c_status, c_void_p, POINTER(c_int32), c_size_t, p_float)

# llm_text.h
_declare("clattn_llm_text_load", c_status, c_char_p, POINTER(c_void_p))
_declare("clattn_llm_text_from_model", c_status, c_void_p, POINTER(c_void_p))
_declare("clattn_llm_text_destroy", None, POINTER(c_void_p))
_declare("clattn_llm_free", None, c_void_p)
_declare("clattn_llm_text_vocab_size", c_size_t, c_void_p)
_declare("clattn_llm_bos_id", c_int32, c_void_p)
_declare("clattn_llm_eos_id", c_int32, c_void_p)
_declare("clattn_llm_token_text", c_char_p, c_void_p, c_int32)
_declare("clattn_llm_is_end_of_generation", c_int, c_void_p, c_int32)
_declare("clattn_llm_tokenize", c_status, c_void_p, c_char_p, c_size_t, c_int, c_int,
         POINTER(POINTER(c_int32)), p_size)
_declare("clattn_llm_detokenize", c_status, c_void_p, POINTER(c_int32), c_size_t, c_int,
         POINTER(POINTER(c_char)), p_size)
_declare("clattn_llm_chat_template", c_char_p, c_void_p)
_declare("clattn_llm_apply_chat_template", c_status, c_void_p, c_char_p, c_char_p, c_int,
         POINTER(POINTER(c_char)), p_size)
_declare("clattn_llm_generate_options_default", None, POINTER(LlmGenerateOptions))
_declare("clattn_llm_generation_clear", None, POINTER(LlmGeneration))
_declare("clattn_llm_generate", c_status, c_void_p, c_void_p, c_void_p, c_size_t,
         POINTER(c_int32), c_size_t, POINTER(LlmGenerateOptions), llm_token_callback, c_void_p,
         POINTER(LlmGeneration))
_declare("clattn_llm_generate_batch", c_status, c_void_p, c_void_p, c_size_t,
         POINTER(POINTER(c_int32)), p_size, POINTER(LlmGenerateOptions), llm_batch_callback,
         c_void_p, POINTER(LlmGeneration))
