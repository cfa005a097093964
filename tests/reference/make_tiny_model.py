#!/usr/bin/env python3
"""Write a tiny, seeded, random-weight GGUF model of a given architecture.

  python3 tests/reference/make_tiny_model.py ARCH OUT.gguf [--type TYPE]
         [--output-type TYPE] [--seed N] [--n-layer N] [--tokenizer gpt2|llama]
         [--arch-name NAME] [--sliding-window N] [--softcap] [--plain] [--wide]

ARCH: llama | mistral | mixtral | qwen2 | qwen2moe | qwen3 | qwen3moe | smollm3 | phi3 | gemma2 |
      gemma3 | granite | granitemoe
TYPE: f32 (default) f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 (via gguf.quants.quantize)
      q2_k q3_k q4_k q5_k q6_k (via kquants.py; these need rows that are a
      multiple of 256, so the model is widened to n_embd 256 / n_ff 512, as
      --wide does for any type).
Only 2-D weight matrices are quantized (token_embd and output included, unless
--output-type overrides them); norms, biases and rope factor vectors stay F32,
as in llama.cpp's files.  The same seed and width give the same float weights
for every --type, so e.g. `llama --type f32` and `llama --type q8_0` (or
`--wide --type f32` and `--type q4_k`) are the same model up to quantization
error.

Default shapes: n_embd 64, n_head 4, n_head_kv 2 (GQA), head_dim 16, n_ff 128,
2 layers (gemma3: 6 layers so that layer 5 is a global layer), context 512.
Vocabulary (gpt2, default): ids 0..255 are the 256 byte tokens in byte order
(GPT-2 byte-to-unicode spelling, so id == byte value), then 10 merge results
(Ġt he Ġthe in er Ġa on re Ġs at), then <|endoftext|> (bos), <|im_start|>,
<|im_end|> (eos) as control tokens: 269 tokens, tokenizer.ggml.pre "gpt-2",
add_bos_token false, a ChatML chat template.
--tokenizer llama writes a SentencePiece-style vocabulary instead: <unk> <s>
</s>, <0x00>..<0xFF> byte tokens, a few ▁-pieces with scores, ChatML control
tokens; add_bos_token true.

Per-architecture features exercised (disable the optional ones with --plain):
  llama   separate output.weight; rope_freqs.weight (Llama-3 style frequency
          factors, 1..8); freq_base 10000; normal (interleaved) rope.
  mistral written as general.architecture "llama" (that is what real Mistral
          GGUFs use; override with --arch-name mistral) with
          llama.attention.sliding_window 8 and linear rope scaling factor 2.
  qwen2   q/k/v biases; tied output (no output.weight); freq_base 1e6; neox.
  qwen3   per-head q/k RMSNorms, head_dim 2 n_embd / n_head (as Qwen3 0.6B:
          128 against 1024 / 16); tied output; freq_base 1e6; neox.
  mixtral written as "llama" with llama.expert_count 4, expert_used_count 2:
          the FFN a router (ffn_gate_inp) and 3-D ffn_{gate,up,down}_exps.
  qwen3moe qwen3 with 8 experts of expert_feed_forward_length n_ff / 2, 3 used.
  qwen2moe qwen2 with 8 experts of n_ff / 2, 2 used, weights not renormalised,
          and a shared expert of expert_shared_feed_forward_length 96 (K-quants: 256) behind
          a sigmoid gate (ffn_*_shexp, ffn_gate_inp_shexp); untied output.
  smollm3 4 layers, the last without rope (NoPE every 4th); tied output.
  granite llama with IBM's multipliers: embedding_scale 12, residual_scale
          0.22, attention.scale 0.5 (not 1/sqrt(16)), logit_scale 8.
  granitemoe granite with 4 experts, 2 used (as mixtral); tied output.
  phi3    fused attn_qkv and fused ffn_up (gate|up); partial rotary
          (rope.dimension_count = 3/4 head_dim); longrope factors
          rope_factors_short/long.weight and rope.scaling.attn_factor; context
          512 with rope.scaling.original_context_length 256 (short factors
          unless the engine runs with n_ctx > 256: pass --n-ctx to the
          reference to match).
  gemma2  4 layers, sliding_window 4 on the even ones, head_dim 32, no q/k
          norms, post norms, GeGLU, tied output, freq_base 10000 for all;
          attn/final logit softcapping 50 / 30 as the real files have (small
          models' logits stay far below them, so --softcap-low writes 5 / 3).
  gemma3  6 layers, sliding_window 4 (layers 0-4 local, 5 global), head_dim 32
          (key_length != n_embd / n_head), q/k norms, post-attention and
          post-ffw norms, GeGLU, tied output, freq_base 1e6 with linear scaling
          factor 8 (global layers only), local base 10000 (llama.cpp default,
          not stored); norm weights around 1 (stored as llama.cpp stores them,
          i.e. already "1 + w"); --softcap adds attn/final logit softcapping
          (50 / 30) which real Gemma 3 files do not have.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType, RopeScalingType, TokenType
from gguf.quants import quantize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kquants  # noqa: E402

ARCHS = ("llama", "mistral", "mixtral", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "smollm3", "phi3", "gemma2",
         "gemma3", "granite", "granitemoe")

LEGACY_TYPES = {
    "f32": GGMLQuantizationType.F32, "f16": GGMLQuantizationType.F16,
    "bf16": GGMLQuantizationType.BF16, "q4_0": GGMLQuantizationType.Q4_0,
    "q4_1": GGMLQuantizationType.Q4_1, "q5_0": GGMLQuantizationType.Q5_0,
    "q5_1": GGMLQuantizationType.Q5_1, "q8_0": GGMLQuantizationType.Q8_0,
}
K_TYPES = {
    "q2_k": GGMLQuantizationType.Q2_K, "q3_k": GGMLQuantizationType.Q3_K,
    "q4_k": GGMLQuantizationType.Q4_K, "q5_k": GGMLQuantizationType.Q5_K,
    "q6_k": GGMLQuantizationType.Q6_K,
}
FILE_TYPES = {
    "f32": LlamaFileType.ALL_F32, "f16": LlamaFileType.MOSTLY_F16,
    "bf16": LlamaFileType.MOSTLY_BF16, "q4_0": LlamaFileType.MOSTLY_Q4_0,
    "q4_1": LlamaFileType.MOSTLY_Q4_1, "q5_0": LlamaFileType.MOSTLY_Q5_0,
    "q5_1": LlamaFileType.MOSTLY_Q5_1, "q8_0": LlamaFileType.MOSTLY_Q8_0,
    "q2_k": LlamaFileType.MOSTLY_Q2_K, "q3_k": LlamaFileType.MOSTLY_Q3_K_M,
    "q4_k": LlamaFileType.MOSTLY_Q4_K_M, "q5_k": LlamaFileType.MOSTLY_Q5_K_M,
    "q6_k": LlamaFileType.MOSTLY_Q6_K,
}

GPT2_MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"),
               ("Ġ", "a"), ("o", "n"), ("r", "e"), ("Ġ", "s"), ("a", "t")]
SPM_PIECES = ["▁", "▁t", "he", "▁the", "in", "er", "▁a", "on", "re", "▁s", "at"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def gpt2_byte_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def add_tokenizer(w: GGUFWriter, kind: str) -> int:
    """Writes the tokenizer keys; returns the vocabulary size."""
    if kind == "gpt2":
        b2u = gpt2_byte_to_unicode()
        tokens = [b2u[b] for b in range(256)]
        types = [TokenType.NORMAL] * 256
        for a, b in GPT2_MERGES:
            tokens.append(a + b)
            types.append(TokenType.NORMAL)
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        base = len(tokens)
        tokens += specials
        types += [TokenType.CONTROL] * len(specials)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("gpt-2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges([f"{a} {b}" for a, b in GPT2_MERGES])
        w.add_bos_token_id(base)
        w.add_eos_token_id(base + 2)
        w.add_pad_token_id(base)
        w.add_add_bos_token(False)
    elif kind == "llama":
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
        types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
        scores = [0.0] * len(tokens)
        for i, p in enumerate(SPM_PIECES):
            tokens.append(p)
            types.append(TokenType.NORMAL)
            scores.append(-float(i + 1))
        for s in ("<|im_start|>", "<|im_end|>"):
            tokens.append(s)
            types.append(TokenType.CONTROL)
            scores.append(0.0)
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_scores(scores)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(True)
    else:
        raise ValueError(kind)
    w.add_chat_template(CHATML_TEMPLATE)
    return len(tokens)


class TensorSink:
    """Collects float tensors (numpy layout: reversed GGUF dims) and writes them."""

    def __init__(self, writer: GGUFWriter, wtype: str, otype: str):
        self.w = writer
        self.wtype = wtype
        self.otype = otype

    def add(self, name: str, arr: np.ndarray, quantizable: bool = True) -> None:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if arr.ndim < 2 or not quantizable:
            self.w.add_tensor(name, arr)
            return
        t = self.otype if name in ("token_embd.weight", "output.weight") else self.wtype
        if t == "f32":
            self.w.add_tensor(name, arr)
        elif t == "f16":
            self.w.add_tensor(name, arr.astype(np.float16))
        elif t in LEGACY_TYPES:
            q = quantize(arr, LEGACY_TYPES[t])
            self.w.add_tensor(name, q, raw_dtype=LEGACY_TYPES[t])
        elif t in K_TYPES:
            q = kquants.ENCODERS[K_TYPES[t].name](arr)
            self.w.add_tensor(name, q, raw_dtype=K_TYPES[t])
        else:
            raise ValueError(f"unknown type {t}")


def build(args) -> None:
    arch = args.arch
    plain = args.plain
    rng = np.random.default_rng(args.seed)
    is_k = args.wide or args.type in K_TYPES or args.output_type in K_TYPES
    n_embd = 256 if is_k else 64
    n_ff = 512 if is_k else 128
    n_head, n_head_kv = 4, 2
    head_dim = n_embd // n_head
    if arch in ("gemma2", "gemma3", "qwen3", "qwen3moe"):
        head_dim = 2 * n_embd // n_head          # 32 (k: 128): q width != n_embd
    n_layer = args.n_layer or {"gemma3": 6, "gemma2": 4, "smollm3": 4}.get(arch, 2)
    n_ctx = 512
    file_arch = args.arch_name or ("llama" if arch in ("mistral", "mixtral") else arch)
    n_expert, n_used, n_ff_exp = {"mixtral": (4, 2, n_ff), "qwen3moe": (8, 3, n_ff // 2),
                                  "qwen2moe": (8, 2, n_ff // 2), "granitemoe": (4, 2, n_ff)}.get(arch, (0, 0, 0))
    n_ff_shexp = (256 if is_k else 96) if arch == "qwen2moe" else 0

    w = GGUFWriter(args.out, file_arch)
    w.add_name(f"tiny-{arch}-{args.type}")
    w.add_type("model")
    n_vocab = add_tokenizer(w, args.tokenizer)
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_layer_norm_rms_eps(1e-6 if arch in ("gemma2", "gemma3") else 1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(FILE_TYPES[args.type])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    n_rot = head_dim
    if arch == "phi3" and not plain:
        n_rot = (3 * head_dim // 4) // 2 * 2
    w.add_rope_dimension_count(n_rot)
    w.add_rope_freq_base(1e6 if arch in ("qwen2", "qwen2moe", "qwen3", "qwen3moe", "gemma3") else 10000.0)
    if n_expert:
        w.add_expert_count(n_expert)
        w.add_expert_used_count(n_used)
        if arch in ("qwen3moe", "qwen2moe"):
            w.add_expert_feed_forward_length(n_ff_exp)
        if n_ff_shexp:
            w.add_expert_shared_feed_forward_length(n_ff_shexp)
    if arch in ("qwen3", "qwen3moe"):
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if arch == "gemma3":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        if args.sliding_window != 0:
            w.add_sliding_window(args.sliding_window or 4)
        if not plain:
            w.add_rope_scaling_type(RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(8.0)
        if args.softcap:
            w.add_attn_logit_softcapping(50.0)
            w.add_final_logit_softcapping(30.0)
    if arch == "gemma2":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        if args.sliding_window != 0:
            w.add_sliding_window(args.sliding_window or 4)
        w.add_attn_logit_softcapping(5.0 if args.softcap_low else 50.0)
        w.add_final_logit_softcapping(3.0 if args.softcap_low else 30.0)
    if arch == "mistral":
        if args.sliding_window != 0:
            w.add_sliding_window(args.sliding_window or 8)
        if not plain:
            w.add_rope_scaling_type(RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(2.0)
    if arch in ("granite", "granitemoe"):
        w.add_float32(f"{file_arch}.embedding_scale", 12.0)
        w.add_float32(f"{file_arch}.residual_scale", 0.22)
        w.add_float32(f"{file_arch}.attention.scale", 0.5)
        w.add_float32(f"{file_arch}.logit_scale", 8.0)
    if arch == "phi3" and not plain:
        w.add_rope_scaling_attn_factors(1.19)
        w.add_rope_scaling_orig_ctx_len(256)

    if args.yarn:
        w.add_rope_scaling_type(RopeScalingType.YARN)
        w.add_rope_scaling_factor(args.yarn)
        w.add_rope_scaling_orig_ctx_len(256)
        if args.yarn_betas:
            w.add_float32(f"{file_arch}.rope.scaling.yarn_beta_fast", args.yarn_betas[0])
            w.add_float32(f"{file_arch}.rope.scaling.yarn_beta_slow", args.yarn_betas[1])

    sink = TensorSink(w, args.type, args.output_type or args.type)

    def mat(n_out: int, n_in: int, scale: float = 1.0) -> np.ndarray:
        # numpy (n_out, n_in) == GGUF dims [n_in, n_out]
        return rng.standard_normal((n_out, n_in)) * (scale / np.sqrt(n_in))

    def norm(n: int) -> np.ndarray:
        return 1.0 + 0.1 * rng.standard_normal(n)

    # tied-output archs get small embeddings so that logits stay O(1)
    embd_std = {"gemma2": 1.0, "gemma3": 1.0, "qwen2": 2.0, "qwen3": 2.0, "qwen3moe": 2.0, "smollm3": 2.0}.get(
        arch, np.sqrt(n_embd)) / np.sqrt(n_embd)
    sink.add("token_embd.weight", rng.standard_normal((n_vocab, n_embd)) * embd_std)
    sink.add("output_norm.weight", norm(n_embd))
    if arch not in ("qwen2", "qwen3", "qwen3moe", "smollm3", "gemma2", "gemma3", "granitemoe"):
        sink.add("output.weight", mat(n_vocab, n_embd, 2.0))
    if arch == "llama" and not plain:
        sink.add("rope_freqs.weight", np.geomspace(1.0, 8.0, n_rot // 2))
    if arch == "phi3" and not plain:
        sink.add("rope_factors_short.weight", 1.0 + 0.5 * rng.random(n_rot // 2))
        sink.add("rope_factors_long.weight", np.geomspace(1.0, 6.0, n_rot // 2))

    nq = n_head * head_dim
    nkv = n_head_kv * head_dim
    for il in range(n_layer):
        p = f"blk.{il}."
        sink.add(p + "attn_norm.weight", norm(n_embd))
        if arch == "phi3":
            sink.add(p + "attn_qkv.weight", np.concatenate(
                [mat(nq, n_embd), mat(nkv, n_embd), mat(nkv, n_embd)], axis=0))
        else:
            sink.add(p + "attn_q.weight", mat(nq, n_embd))
            sink.add(p + "attn_k.weight", mat(nkv, n_embd))
            sink.add(p + "attn_v.weight", mat(nkv, n_embd))
        if arch in ("qwen2", "qwen2moe"):
            sink.add(p + "attn_q.bias", 0.1 * rng.standard_normal(nq))
            sink.add(p + "attn_k.bias", 0.1 * rng.standard_normal(nkv))
            sink.add(p + "attn_v.bias", 0.1 * rng.standard_normal(nkv))
        if arch in ("gemma3", "qwen3", "qwen3moe"):
            sink.add(p + "attn_q_norm.weight", norm(head_dim))
            sink.add(p + "attn_k_norm.weight", norm(head_dim))
        sink.add(p + "attn_output.weight", mat(n_embd, nq))
        if arch in ("gemma2", "gemma3"):
            sink.add(p + "post_attention_norm.weight", norm(n_embd))
        sink.add(p + "ffn_norm.weight", norm(n_embd))
        if n_expert:
            # numpy (E, n_out, n_in) == GGUF [n_in, n_out, E]; a router with
            # clear preferences, so that the chosen experts are not a toss-up.
            sink.add(p + "ffn_gate_inp.weight", mat(n_expert, n_embd, 1.0), quantizable=False)
            sink.add(p + "ffn_gate_exps.weight", np.stack([mat(n_ff_exp, n_embd) for _ in range(n_expert)]))
            sink.add(p + "ffn_up_exps.weight", np.stack([mat(n_ff_exp, n_embd) for _ in range(n_expert)]))
            sink.add(p + "ffn_down_exps.weight", np.stack([mat(n_embd, n_ff_exp) for _ in range(n_expert)]))
            if n_ff_shexp:
                sink.add(p + "ffn_gate_inp_shexp.weight", 2.0 * rng.standard_normal(n_embd) / np.sqrt(n_embd),
                         quantizable=False)
                sink.add(p + "ffn_gate_shexp.weight", mat(n_ff_shexp, n_embd))
                sink.add(p + "ffn_up_shexp.weight", mat(n_ff_shexp, n_embd))
                sink.add(p + "ffn_down_shexp.weight", mat(n_embd, n_ff_shexp))
        elif arch == "phi3":
            sink.add(p + "ffn_up.weight", np.concatenate([mat(n_ff, n_embd), mat(n_ff, n_embd)], axis=0))
            sink.add(p + "ffn_down.weight", mat(n_embd, n_ff))
        else:
            sink.add(p + "ffn_gate.weight", mat(n_ff, n_embd))
            sink.add(p + "ffn_up.weight", mat(n_ff, n_embd))
            sink.add(p + "ffn_down.weight", mat(n_embd, n_ff))
        if arch in ("gemma2", "gemma3"):
            sink.add(p + "post_ffw_norm.weight", norm(n_embd))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="write a tiny random GGUF model")
    ap.add_argument("arch", choices=ARCHS)
    ap.add_argument("out")
    ap.add_argument("--type", default="f32", choices=sorted(list(LEGACY_TYPES) + list(K_TYPES)))
    ap.add_argument("--output-type", default=None, choices=sorted(list(LEGACY_TYPES) + list(K_TYPES)),
                    help="type of token_embd/output (default: --type)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--n-layer", type=int, default=0)
    ap.add_argument("--tokenizer", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--arch-name", default=None, help="override general.architecture")
    ap.add_argument("--sliding-window", type=int, default=None,
                    help="mistral/gemma3 window (default 8/4; 0 = none)")
    ap.add_argument("--softcap", action="store_true", help="gemma3: add logit softcapping keys")
    ap.add_argument("--softcap-low", action="store_true", help="gemma2: softcaps 5 / 3 instead of 50 / 30")
    ap.add_argument("--plain", action="store_true",
                    help="skip optional features (rope factors/scaling, partial rotary)")
    ap.add_argument("--yarn", type=float, default=0.0, metavar="FACTOR",
                    help="YaRN rope scaling by FACTOR over an original context of 256 (with llama's "
                         "rope_freqs too; mistral and gemma3 write linear scaling: --plain for them)")
    ap.add_argument("--yarn-betas", type=float, nargs=2, default=None, metavar=("FAST", "SLOW"),
                    help="with --yarn: write rope.scaling.yarn_beta_fast/slow")
    ap.add_argument("--wide", action="store_true",
                    help="n_embd 256 / n_ff 512 (what the k-quant types use)")
    args = ap.parse_args(argv)
    build(args)
    print(f"wrote {args.out} ({args.arch}, {args.type})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
