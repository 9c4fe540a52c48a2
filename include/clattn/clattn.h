/*
 * libclattn — Transformer attention on any OpenCL 1.2 device.
 *
 * Include this header; it includes the others:
 *   clattn/common.h     status codes, logging, version
 *   clattn/context.h    devices, the context, errors, statistics
 *   clattn/tensor.h     float32 device tensors
 *   clattn/attention.h  scaled dot-product attention, multi-head attention layer
 *   clattn/encoder.h    Transformer encoder, positional encoding, presets, model files
 *   clattn/decoder.h    Transformer decoder (nn.TransformerDecoder), incremental decoding
 *   clattn/transformer.h  the encoder–decoder model, teacher-forced logits, generation
 *   clattn/npy.h        reading and writing NumPy .npy files
 *   clattn/safetensors.h  reading and writing safetensors files
 *   clattn/tokenizer.h  BERT's WordPiece tokenizer (Hugging Face's fast tokenizer)
 *   clattn/pretrained.h Hugging Face BERT folders, pooling, sentence embeddings
 *   clattn/cross_encoder.h  cross-encoders (rerankers): scoring (query, document) pairs
 *   clattn/llm.h        decoder-only LLMs from GGUF files: logits, prompts, decode steps
 *   clattn/llm_text.h   an LLM's tokenizer and chat template, sampling, generation
 *
 * Conventions everywhere: every fallible call returns clattn_status (0 = CLATTN_OK); handles are
 * created by *_create(&handle, ...) and released by *_destroy(&handle), which accepts NULL and
 * clears the pointer; params structs have a *_default() initialiser and need only live for the
 * call. Shapes are written outermost first: [batch, seq, features].
 */
#ifndef CLATTN_H
#define CLATTN_H

#include "clattn/common.h"
#include "clattn/context.h"
#include "clattn/tensor.h"
#include "clattn/attention.h"
#include "clattn/encoder.h"
#include "clattn/decoder.h"
#include "clattn/transformer.h"
#include "clattn/npy.h"
#include "clattn/safetensors.h"
#include "clattn/tokenizer.h"
#include "clattn/pretrained.h"
#include "clattn/cross_encoder.h"
#include "clattn/llm.h"
#include "clattn/llm_text.h"

#endif /* CLATTN_H */
