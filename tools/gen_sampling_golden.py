#!/usr/bin/env python3
"""Golden files for sampling (src/llm/sampling.h): the distribution transformers' generate()
draws from, given logits and a token history, for each sampling setting alone and combined.

usage: ~/.cache/clattn/golden-venv/bin/python tools/gen_sampling_golden.py [--out DIR]
(the venv of tools/make-golden-venv.sh, from which every generator runs: tests/golden/README.md)

The processors are transformers' own, in the order its GenerationMixin._get_logits_processor
builds them for a tiny random LlamaForCausalLM (do_sample=True; greedy: do_sample=False and
torch.argmax): RepetitionPenaltyLogitsProcessor, then OpenAI's presence and frequency penalties
(not in transformers: a LogitsProcessor written here, score -= presence·[c > 0] + frequency·c
with c the count among the generated tokens, history[prompt_count:]; passed to
_get_logits_processor, which puts custom processors before the warpers), then
TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper. The scores are
float64 copies of float32 logits; the result is softmax of the processed scores (-inf gives 0),
float64. Each case is also computed with torch.sort made stable: a case whose result depends on
how torch.sort orders ties (top-p's boundary through equal logits above 16 values) is refused,
so every committed distribution is transformers' whatever the sort's order.

Writes DIR (default tests/golden/sampling), rewriting it: one folder per vocabulary size,
V<n>/, with logits.npy [R, V] float32, history.npy [R, L] int64 (the same history for every
row: prompt and generated tokens), meta.json {"transformers_version", "torch_version",
"vocab_size", "rows", "prompt_count", "processors" {setting: [class names in order]},
"settings" [{"name", "temperature" (0: greedy), "top_k", "top_p", "min_p",
"repetition_penalty", "presence_penalty", "frequency_penalty"}]}, and per setting
probs_<name>.npy [R, V] float64 (greedy: one-hot at the argmax) and kept_<name>.npy [R, V]
uint8 (1 where the probability is not zero). Deterministic (numpy's default_rng per size).
"""
import argparse
import json
import os
import shutil

import numpy as np
import torch
import transformers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, LogitsProcessor
from transformers import LogitsProcessorList

# Parameters are binary fractions, exact in float32 and float64 alike.
SETTINGS = [
    dict(name="greedy", temperature=0.0),
    dict(name="greedy_repetition", temperature=0.0, repetition_penalty=1.25),
    dict(name="plain", temperature=1.0),
    dict(name="repetition", temperature=1.0, repetition_penalty=1.25),
    dict(name="repetition_reward", temperature=1.0, repetition_penalty=0.75),
    dict(name="presence_frequency", temperature=1.0, presence_penalty=0.5,
         frequency_penalty=0.25),
    dict(name="temperature_low", temperature=0.75),
    dict(name="temperature_high", temperature=1.5),
    dict(name="top_k1", temperature=1.0, top_k=1),
    dict(name="top_k3", temperature=1.0, top_k=3),
    dict(name="top_k10", temperature=1.0, top_k=10),
    dict(name="top_p0", temperature=1.0, top_p=0.0),
    dict(name="top_p25", temperature=1.0, top_p=0.25),
    dict(name="top_p50", temperature=1.0, top_p=0.5),
    dict(name="top_p75", temperature=1.0, top_p=0.75),
    dict(name="top_p875", temperature=1.0, top_p=0.875),
    dict(name="min_p0625", temperature=1.0, min_p=0.0625),
    dict(name="min_p25", temperature=1.0, min_p=0.25),
    dict(name="combined", temperature=0.75, top_k=10, top_p=0.875, min_p=0.0625,
         repetition_penalty=1.25, presence_penalty=0.5, frequency_penalty=0.25),
    dict(name="combined_hot", temperature=1.5, top_k=40, top_p=0.75, min_p=0.125,
         repetition_penalty=1.125, presence_penalty=0.25, frequency_penalty=0.5),
]
DEFAULTS = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
                presence_penalty=0.0, frequency_penalty=0.0)
PROMPT_COUNT = 5
HISTORY_LENGTH = 9


class PresenceFrequencyPenalty(LogitsProcessor):
    """OpenAI's presence and frequency penalties over the generated tokens."""

    def __init__(self, presence, frequency, prompt_count):
        self.presence, self.frequency, self.prompt_count = presence, frequency, prompt_count

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        for b in range(input_ids.shape[0]):
            counts = torch.bincount(input_ids[b, self.prompt_count:], minlength=scores.shape[1])
            counts = counts.to(scores.dtype)
            scores[b] -= self.presence * (counts > 0).to(scores.dtype) + self.frequency * counts
        return scores


def processors_for(model, s, seq_length):
    """transformers' own list for the setting, as generate() builds it."""
    greedy = s["temperature"] == 0.0
    config = GenerationConfig(
        do_sample=not greedy,
        temperature=1.0 if greedy else s["temperature"],
        top_k=None if greedy else s["top_k"],
        top_p=1.0 if greedy else s["top_p"],
        min_p=None if greedy or s["min_p"] == 0.0 else s["min_p"],
        repetition_penalty=s["repetition_penalty"],
    )
    custom = LogitsProcessorList()
    if s["presence_penalty"] != 0.0 or s["frequency_penalty"] != 0.0:
        custom.append(PresenceFrequencyPenalty(s["presence_penalty"], s["frequency_penalty"],
                                               PROMPT_COUNT))
    return model._get_logits_processor(
        generation_config=config, input_ids_seq_length=seq_length, encoder_input_ids=None,
        prefix_allowed_tokens_fn=None, logits_processor=custom, device="cpu", model_kwargs={})


def distribution(processors, history, logits, greedy):
    scores = processors(history, torch.from_numpy(logits.astype(np.float64)))
    if greedy:
        probs = torch.zeros_like(scores)
        probs.scatter_(1, torch.argmax(scores, dim=-1, keepdim=True), 1.0)
        return probs.numpy()
    return torch.softmax(scores, dim=-1).numpy()


def stable_distribution(processors, history, logits, greedy):
    original = torch.sort

    def stable_sort(x, *args, **kwargs):
        kwargs["stable"] = True
        return original(x, *args, **kwargs)

    torch.sort = stable_sort
    try:
        return distribution(processors, history, logits, greedy)
    finally:
        torch.sort = original


def logits_rows(rng, vocab):
    """Rows: random; with ties (up to 16 values: rounded to halves; above: at the maximum
    and at top-k's boundaries); with -inf (and, up to 16 values, a tied maximum); up to 16
    values also hand-made exact boundaries (four equal probabilities: top-p's cumulative sums
    hit 1 - p exactly) and all equal."""
    rows = [rng.normal(0.0, 3.0, vocab)]
    if vocab <= 16:
        tied = np.round(rng.normal(0.0, 1.5, vocab) * 2.0) / 2.0
    else:
        # Above 16 values torch.sort's order of ties is unspecified: ties where top-k's k-th
        # value falls (ranks 3 and 4, 10 and 11) and at the maximum, not where top-p cuts.
        tied = rng.normal(0.0, 2.0, vocab)
        order = np.argsort(-tied, kind="stable")
        tied[order[1]] = tied[order[0]]
        tied[order[3]] = tied[order[2]]
        tied[order[10]] = tied[order[9]]
    rows.append(tied)
    special = rng.normal(0.0, 2.0, vocab)
    special[rng.choice(vocab, max(1, vocab // 5), replace=False)] = -np.inf
    top = np.nanmax(special[np.isfinite(special)])
    finite = np.flatnonzero(np.isfinite(special))
    if vocab <= 16:
        special[finite[: 3]] = top + 1.0  # a tied maximum, lowest ids
    rows.append(special)
    if vocab <= 16:
        quarter = np.full(vocab, -np.inf)
        quarter[[0, 1, 3, vocab - 1]] = 2.0
        rows.append(quarter)
        rows.append(np.full(vocab, 0.5))
    return np.stack(rows).astype(np.float32)


def write_size(out, vocab, model):
    rng = np.random.default_rng(1000 + vocab)
    logits = logits_rows(rng, vocab)
    history = rng.integers(0, min(vocab, 12), HISTORY_LENGTH)
    history[PROMPT_COUNT + 1] = history[PROMPT_COUNT]  # a generated token twice
    history[-1] = history[0]                           # a prompt token generated again
    folder = os.path.join(out, f"V{vocab}")
    os.makedirs(folder)
    np.save(os.path.join(folder, "logits.npy"), logits)
    np.save(os.path.join(folder, "history.npy"),
            np.tile(history.astype(np.int64), (len(logits), 1)))
    settings, names = [], {}
    for s in SETTINGS:
        s = {**DEFAULTS, **s}
        settings.append(s)
        processors = processors_for(model, s, HISTORY_LENGTH)
        names[s["name"]] = [type(p).__name__ for p in processors]
        greedy = s["temperature"] == 0.0
        probs = np.zeros(logits.shape, dtype=np.float64)
        for r in range(len(logits)):
            ids = torch.from_numpy(history.astype(np.int64))[None, :]
            p = distribution(processors, ids, logits[r:r + 1], greedy)[0]
            q = stable_distribution(processors, ids, logits[r:r + 1], greedy)[0]
            if not np.array_equal(p > 0, q > 0) or np.max(np.abs(p - q)) > 1e-12:
                raise SystemExit(f"V{vocab} row {r} {s['name']}: depends on torch.sort's order "
                                 "of ties; change the case")
            probs[r] = p
        np.save(os.path.join(folder, f"probs_{s['name']}.npy"), probs)
        np.save(os.path.join(folder, f"kept_{s['name']}.npy"), (probs > 0).astype(np.uint8))
    meta = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "vocab_size": vocab,
        "rows": len(logits),
        "prompt_count": PROMPT_COUNT,
        "processors": names,
        "settings": settings,
    }
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                      "golden", "sampling"))
    args = parser.parse_args()
    torch.manual_seed(0)
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    for vocab in (5, 16, 64, 256):
        config = LlamaConfig(vocab_size=vocab, hidden_size=8, intermediate_size=16,
                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
        model = LlamaForCausalLM(config)
        write_size(args.out, vocab, model)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
