#!/usr/bin/env python3
"""Independent float64 reference forward pass for GGUF decoder-only LLMs.

This is Lantern's *oracle*: the C++ engine's logits are compared against the
logits written by this script.  It only depends on numpy and the `gguf` PyPI
package (GGUFReader + gguf.quants.dequantize); every weight is dequantized once
to float32 by gguf-py, widened to float64, and the whole forward pass runs in
float64 over all positions at once (one causal prefill; --generate then
decodes token by token with a KV cache, which gives the same numbers).

CLI (stable; the C++ test suite relies on it)
---------------------------------------------
  python3 tests/reference/reference_forward.py MODEL.gguf --tokens 1,2,3 \
          [--out logits.bin] [--last-only] [--generate N] \
          [--swa auto|on|off] [--n-ctx N] [--text STRING] [--top K] [--verbose]
          [--cache-dir DIR]

  --tokens     comma-separated token ids (whitespace tolerated), required unless
               --text is given.
  --out PATH   write float32 little-endian logits, row-major, shape
               [n_tokens, n_vocab] (one row per input position), or
               [1, n_vocab] with --last-only.  No header.
  --last-only  only write the last row.
  --generate N greedy continuation of N tokens (argmax; stops after emitting
               the EOS id); prints the ids and the decoded text.  --out still
               holds the logits of the *prompt* only.
  --swa        sliding-window attention policy (see "Sliding window" below).
  --n-ctx N    context size the engine is assumed to run with; only selects the
               phi3 long/short rope factor set (long iff N > original ctx).
               Default: the number of tokens processed (prompt + generated
               tokens with --generate).
  --text S     approximate tokenization of S (tokenizer.ggml.model == gpt2 only,
               ChatML specials recognised; see simple_bpe.py); debugging aid,
               the test suite always passes --tokens.
  --top K      also print the top-K (id, logit, piece) of the last row.
  --verbose    print the resolved hyper-parameters to stderr.
  --cache-dir  (or env LANTERN_REF_CACHE) keep gguf-py's float32 dequantized
               weights as .npy files under DIR, keyed by path/size/mtime, so
               later runs skip GGUFReader (which takes seconds on a 50k-token
               vocabulary).  Same numbers either way.

stdout (one `key=value` line first, then optional lines):
  arch=llama n_tokens=16 n_vocab=49152 argmax_last=1234 logit_max=17.25
  top: ...            (with --top)
  generated: 1 2 3    (with --generate)
  text: '...'         (with --generate; decoded continuation)
Exit status is non-zero with a message on stderr for unsupported files.

Library use: `load_model(path)` (cached per process) and
`forward(model, tokens, ...)` -> float64 logits [n_tokens, n_vocab].

Conventions (documented because they are easy to get wrong)
-----------------------------------------------------------
* Shapes: GGUF dims are innermost-first.  gguf-py hands back numpy arrays in
  row-major order with the reversed shape, so a GGUF matrix with dims
  [n_in, n_out] is a numpy array W of shape (n_out, n_in) and a projection is
  y = x @ W.T.  token_embd ([n_embd, n_vocab]) is (n_vocab, n_embd): row = token.
* RoPE mode:
    - llama / mistral: "normal" mode, rotating adjacent pairs (x[2i], x[2i+1]).
      llama.cpp's HF converter permutes the rows of Q and K (attn_q / attn_k)
      so that this interleaved rotation on GGUF weights equals HF's
      rotate_half rotation on the original weights.
    - qwen2 / qwen3 / phi3 / gemma3: "neox" mode, rotating (x[i], x[i + n_rot/2]);
      their converters do not permute Q/K.
  theta_i(p) = p * freq_scale * base^(-2i/n_rot) / ff[i],  i in [0, n_rot/2),
  with ff = rope frequency factors (rope_freqs.weight for Llama 3.x,
  rope_factors_{short,long}.weight for phi3 longrope; 1 otherwise).
  Only the first n_rot (= {arch}.rope.dimension_count, default head_dim)
  dimensions of a head rotate; the rest pass through (partial rotary).
  cos/sin are multiplied by {arch}.rope.scaling.attn_factor when present
  (llama.cpp multiplies it into the rope "attn_factor"; phi3 longrope writes
  it).  Rope scaling: {arch}.rope.scaling.type none -> freq_scale 1; linear
  (also the default when only a factor is given) -> 1/factor; yarn -> as
  transformers' "yarn" rope init: pair i's inverse frequency mixes the
  trained one (extrapolation) and the trained one / factor (interpolation)
  with weight 1 - ramp(i) for the trained one, ramp linear from 0 at
  floor(d(beta_fast)) to 1 at ceil(d(beta_slow)) (clamped to [0, n_rot-1]),
  d(r) = n_rot ln(orig_ctx / (2 pi r)) / (2 ln base), orig_ctx =
  rope.scaling.original_context_length, beta_fast/slow =
  rope.scaling.yarn_beta_fast/slow (default 32/1); cos/sin are multiplied
  by 0.1 ln(factor) + 1 as well (llama.cpp's defaults: ext_factor 1).
* Attention: scale 1/sqrt(head_dim) (gemma3: see below), GQA with query head h
  reading kv head h // (n_head / n_head_kv), causal softmax, optional
  {arch}.attn_logit_softcapping (s = c*tanh(s/c)) before the mask.
  head_dim = {arch}.attention.key_length if present else n_embd / n_head
  (value_length likewise for V).
* Sliding window: a query at position i sees keys j with 0 <= i-j < W
  (W = {arch}.attention.sliding_window; llama.cpp "standard" SWA).
  --swa auto (default):
    - llama / mistral: every layer windowed iff the file has a sliding_window > 0
      (llama.cpp itself ignores that key for "llama" files; real Mistral GGUFs
      are written as "llama" without it, so this only matters for files that
      carry it, e.g. make_tiny_model.py's mistral model);
    - gemma3: windowed ("local") layers iff the file has sliding_window; the
      pattern is {arch}.attention.sliding_window_pattern if present (int n:
      layer il is local iff il % n < n-1; or a per-layer bool array), else 6
      (llama.cpp hard-codes 6: every 6th layer is global);
    - qwen2, phi3: no window (as llama.cpp; it disables phi3 SWA).
  --swa off: never mask by window (gemma3's local layers keep their local rope
  base); --swa on: like auto, but phi3/qwen2 also window every layer when the
  file has a sliding_window.
* Norms: RMSNorm y = x / sqrt(mean(x^2) + eps) * w, eps from
  {arch}.attention.layer_norm_rms_epsilon.  Gemma's (1 + w) is *not* applied
  here: llama.cpp's Gemma3 converter already adds 1 to every `*norm.weight`
  (incl. q/k norms) when writing the GGUF.
* Architectures:
    llama/mistral: emb -> [attn_norm, q/k/v (+bias if present), rope, attn,
        attn_output, residual, ffn_norm, down(silu(gate) * up), residual]
        -> output_norm -> output (or token_embd when output.weight is absent).
    qwen2: as llama, q/k/v biases, neox rope.
    qwen3: as llama, no biases; per-head RMSNorm of q and k (attn_q_norm /
        attn_k_norm) *before* rope; neox rope; head_dim from
        attention.key_length (need not be n_embd / n_head).
    qwen3moe: as qwen3, with a mixture of experts for the FFN (below).
    Mixture of experts (llama files with {arch}.expert_count, i.e. Mixtral,
        and qwen3moe): ffn_gate_inp [n_embd, E] scores the experts; p =
        softmax over all E; the expert_used_count largest (ties to the lower
        index) each give down_e(silu(gate_e h) * up_e h) from the 3-D
        ffn_{gate,up,down}_exps tensors, weighted by p renormalised over the
        chosen ones (unless {arch}.expert_weights_norm is false; qwen2moe
        defaults to false).
    qwen2moe: as qwen2 with a mixture of experts, plus a shared expert
        down_s(silu(gate_s h) * up_s h) (ffn_{gate,up,down}_shexp) scaled per
        token by sigmoid(ffn_gate_inp_shexp . h) and added to the experts' sum.
    granite / granitemoe: as llama / Mixtral (normal rope), with IBM's four
        multipliers: emb * {arch}.embedding_scale, attention scale
        {arch}.attention.scale (instead of 1/sqrt(head_dim)), each attention
        and FFN output * {arch}.residual_scale before its residual add, and
        logits / {arch}.logit_scale (each only when present and nonzero).
    smollm3: as llama (normal rope), but layers il with (il + 1) % 4 == 0
        use no rope at all ("NoPE"; the 4 is fixed, no GGUF key).
    phi3: fused attn_qkv (rows: Q | K | V) or separate q/k/v; fused ffn_up
        (rows: gate | up, i.e. gate = first n_ff outputs); neox rope; partial
        rotary; longrope factors (short unless n_ctx > original_context_length).
    gemma2: as gemma3 below without the q/k norms: the even layers local
        (sliding window), one rope base for all layers, attention logits
        soft-capped by {arch}.attn_logit_softcapping; 27B (46 layers) scales
        q by 1/sqrt(n_embd / n_head).
    gemma3: emb * sqrt(n_embd); attn_norm; q/k/v; per-head RMSNorm of q and k
        (attn_q_norm / attn_k_norm, eps as above) *before* rope; neox rope with
        base {arch}.rope.freq_base on global layers and
        {arch}.rope.freq_base_swa (default 10000, llama.cpp hard-codes it) with
        freq_scale 1 on local layers; q scaled by {arch}.attention.scale if
        present else 1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for 62-layer 27B,
        as llama.cpp does); attn_output; post_attention_norm; residual;
        ffn_norm; down(gelu_tanh(gate) * up); post_ffw_norm; residual;
        output_norm; tied output; {arch}.final_logit_softcapping if present.

Verified against real files: SmolLM2-135M-Instruct Q4_1 (llama; greedy ChatML
answer "The capital of France is Paris.") and gemma-3-270m Q4_K_M (gemma3;
"...over the lazy" -> " dog."; every alternative convention tried -- rope mode,
local rope base, attention scale, embedding scale, norm +1 -- raises the
negative log-likelihood of an English sentence).  qwen2 / phi3 / mistral are
checked only by construction and by the equivalence tests in test_reference.py.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:
    from gguf import GGUFReader, GGMLQuantizationType
    from gguf.quants import dequantize
except ImportError as exc:  # pragma: no cover
    sys.stderr.write(f"reference_forward.py needs the gguf package: {exc}\n")
    raise

SUPPORTED_ARCHS = ("llama", "mistral", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "smollm3", "phi3", "gemma2",
                   "gemma3", "granite", "granitemoe")
NEOX_ARCHS = ("qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3")


class UnsupportedModel(Exception):
    pass


# ----------------------------------------------------------------------------
# GGUF reading
# ----------------------------------------------------------------------------

def read_metadata(reader: GGUFReader) -> dict[str, Any]:
    """All key/value pairs except the (large) tokenizer arrays."""
    meta: dict[str, Any] = {}
    for key, fld in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        if key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                   "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            continue
        meta[key] = fld.contents()
    return meta


def tensor_to_f32(t) -> np.ndarray:
    """Dequantize one ReaderTensor with gguf.quants.dequantize.

    Returns float32 (float64 for F64 tensors) with numpy shape = reversed GGUF
    dims, i.e. a GGUF [n_in, n_out] matrix becomes (n_out, n_in)."""
    np_shape = tuple(int(d) for d in reversed(t.shape.tolist()))
    qtype = GGMLQuantizationType(t.tensor_type)
    if qtype == GGMLQuantizationType.F64:
        arr = np.array(t.data, dtype=np.float64)
    elif qtype in (GGMLQuantizationType.I8, GGMLQuantizationType.I16,
                   GGMLQuantizationType.I32, GGMLQuantizationType.I64):
        arr = np.asarray(t.data).astype(np.float32)
    else:
        arr = np.array(dequantize(t.data, qtype), dtype=np.float32)
    return arr.reshape(np_shape)


@dataclass
class HParams:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int          # k / q head size
    head_dim_v: int
    n_ff: int
    eps: float
    n_rot: int
    rope_base: float
    rope_base_swa: float
    freq_scale: float
    rope_attn_factor: float
    rope_neox: bool
    n_ctx_train: int
    n_ctx_orig: int
    sliding_window: int
    swa_layers: list[bool]
    attn_scale: float
    attn_softcap: float
    final_softcap: float
    embd_scale: float
    residual_scale: float
    logit_scale: float
    bos_id: int | None
    eos_id: int | None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Model:
    path: str
    hp: HParams
    meta: dict[str, Any]
    w: dict[str, np.ndarray]
    tokens: list[str] | None
    tokenizer_model: str | None
    merges: list[str] | None

    def has(self, name: str) -> bool:
        return name in self.w

    def get(self, name: str) -> np.ndarray:
        try:
            return self.w[name]
        except KeyError:
            raise UnsupportedModel(f"tensor {name!r} missing from {self.path}") from None


def _first(meta: dict[str, Any], keys: list[str], default=None):
    for k in keys:
        if k in meta:
            return meta[k]
    return default


def build_hparams(meta: dict[str, Any], w: dict[str, np.ndarray], swa_policy: str) -> HParams:
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHS:
        raise UnsupportedModel(f"architecture {arch!r} not supported (supported: {', '.join(SUPPORTED_ARCHS)})")

    def g(key: str, default=None):
        return meta.get(f"{arch}.{key}", default)

    n_embd = int(g("embedding_length"))
    n_layer = int(g("block_count"))
    n_head = g("attention.head_count")
    n_head_kv = g("attention.head_count_kv", n_head)
    if isinstance(n_head, list) or isinstance(n_head_kv, list):
        raise UnsupportedModel("per-layer head counts are not supported")
    n_head = int(n_head)
    n_head_kv = int(n_head_kv)
    n_ff = g("feed_forward_length")
    if isinstance(n_ff, list):
        raise UnsupportedModel("per-layer feed_forward_length is not supported")
    n_ff = int(n_ff)
    head_dim = int(g("attention.key_length", n_embd // n_head))
    head_dim_v = int(g("attention.value_length", head_dim))
    eps = float(g("attention.layer_norm_rms_epsilon", 1e-5))
    n_rot = int(g("rope.dimension_count", head_dim))
    if n_rot % 2 or n_rot > head_dim:
        raise UnsupportedModel(f"bad rope.dimension_count {n_rot} for head_dim {head_dim}")
    rope_base = float(g("rope.freq_base", 10000.0))
    rope_base_swa = float(g("rope.freq_base_swa", 10000.0 if arch == "gemma3" else rope_base))

    # rope scaling (llama.cpp: type defaults to linear; factor 0/absent -> no scaling)
    scaling_type = g("rope.scaling.type", "linear")
    factor = float(g("rope.scaling.factor", 0.0) or 0.0)
    if scaling_type == "none" or factor == 0.0:
        freq_scale = 1.0
    elif scaling_type == "linear":
        freq_scale = 1.0 / factor
    elif scaling_type == "yarn":
        freq_scale = 1.0  # the yarn mix below carries the scaling
    else:
        # longrope / su (phi3): the frequency factors tensors carry the scaling
        freq_scale = 1.0
    rope_attn_factor = float(g("rope.scaling.attn_factor", 1.0) or 1.0)

    n_ctx_train = int(g("context_length", 0) or 0)
    n_ctx_orig = int(g("rope.scaling.original_context_length", n_ctx_train) or n_ctx_train)
    yarn = None
    if scaling_type == "yarn" and factor > 0.0:
        yarn = {"factor": factor, "orig_ctx": n_ctx_orig,
                "beta_fast": float(g("rope.scaling.yarn_beta_fast", 32.0)),
                "beta_slow": float(g("rope.scaling.yarn_beta_slow", 1.0))}

    # vocabulary size = rows of the output matrix (or of token_embd when tied)
    out = w.get("output.weight", w.get("token_embd.weight"))
    n_vocab = int(out.shape[0])

    # sliding window
    # swa_layers = which layers are "local" (gemma3: also selects the local rope
    # base); sliding_window = the mask window actually applied (0: none).
    sw = int(g("attention.sliding_window", 0) or 0)
    swa_layers = [False] * n_layer
    if sw > 0:
        if arch == "gemma3":
            pat = g("attention.sliding_window_pattern", 6)
            if isinstance(pat, list):
                swa_layers = [bool(x) for x in pat][:n_layer]
                swa_layers += [False] * (n_layer - len(swa_layers))
            else:
                pat = int(pat)
                swa_layers = [pat == 0 or (il % pat) < (pat - 1) for il in range(n_layer)]
        elif arch == "gemma2":  # the even layers
            swa_layers = [il % 2 == 0 for il in range(n_layer)]
        elif arch in ("llama", "mistral") or swa_policy == "on":
            swa_layers = [True] * n_layer
    if not any(swa_layers) or swa_policy == "off":
        sw = 0

    # attention scale / softcapping / embedding scale
    attn_scale = 1.0 / math.sqrt(head_dim)
    if arch in ("gemma2", "gemma3"):
        if f"{arch}.attention.scale" in meta:
            attn_scale = float(g("attention.scale"))
        elif n_layer == (62 if arch == "gemma3" else 46):  # the 27Bs: query_pre_attn_scalar = n_embd / n_head
            attn_scale = 1.0 / math.sqrt(n_embd / n_head)
    attn_softcap = float(g("attn_logit_softcapping", 0.0) or 0.0)
    final_softcap = float(g("final_logit_softcapping", 0.0) or 0.0)
    embd_scale = math.sqrt(n_embd) if arch in ("gemma2", "gemma3") else 1.0
    residual_scale = logit_scale = 1.0
    if arch in ("granite", "granitemoe"):
        embd_scale = float(g("embedding_scale", 0.0) or 1.0)
        residual_scale = float(g("residual_scale", 0.0) or 1.0)
        logit_scale = float(g("logit_scale", 0.0) or 1.0)
        if float(g("attention.scale", 0.0) or 0.0) > 0:
            attn_scale = float(g("attention.scale"))

    return HParams(
        arch=arch, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
        n_head_kv=n_head_kv, head_dim=head_dim, head_dim_v=head_dim_v, n_ff=n_ff, eps=eps,
        n_rot=n_rot, rope_base=rope_base, rope_base_swa=rope_base_swa, freq_scale=freq_scale,
        rope_attn_factor=rope_attn_factor, rope_neox=arch in NEOX_ARCHS,
        n_ctx_train=n_ctx_train, n_ctx_orig=n_ctx_orig, sliding_window=sw,
        swa_layers=swa_layers, attn_scale=attn_scale, attn_softcap=attn_softcap,
        final_softcap=final_softcap, embd_scale=embd_scale, residual_scale=residual_scale,
        logit_scale=logit_scale,
        bos_id=meta.get("tokenizer.ggml.bos_token_id"),
        eos_id=meta.get("tokenizer.ggml.eos_token_id"),
        extra={"rope_scaling_type": scaling_type, "rope_scaling_factor": factor, "yarn": yarn},
    )


_MODEL_CACHE: dict[tuple, Model] = {}


def _disk_cache_path(path: str, cache_dir: str) -> str:
    import hashlib  # noqa: PLC0415
    st = os.stat(path)
    ident = f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}"
    return os.path.join(cache_dir, hashlib.sha1(ident.encode()).hexdigest()[:20])


def _read_gguf(path: str, cache_dir: str | None):
    """(meta, weights float64, tokens, merges), optionally via an on-disk cache.

    The cache stores gguf-py's float32 dequantization (lossless w.r.t. what this
    script would compute anyway) as .npy files plus a JSON sidecar, keyed by
    absolute path, size and mtime; GGUFReader is slow on big vocabularies."""
    import json  # noqa: PLC0415
    cdir = _disk_cache_path(path, cache_dir) if cache_dir else None
    if cdir and os.path.isfile(os.path.join(cdir, "done")):
        with open(os.path.join(cdir, "meta.json"), encoding="utf-8") as f:
            side = json.load(f)
        w = {name: np.load(os.path.join(cdir, f"{i}.npy")).astype(np.float64)
             for i, name in enumerate(side["tensor_names"])}
        return side["meta"], w, side["tokens"], side["merges"]

    reader = GGUFReader(path, "r")
    meta = read_metadata(reader)
    w32 = {t.name: tensor_to_f32(t) for t in reader.tensors}
    tok_field = reader.fields.get("tokenizer.ggml.tokens")
    tokens = tok_field.contents() if tok_field is not None else None
    mfield = reader.fields.get("tokenizer.ggml.merges")
    merges = mfield.contents() if mfield is not None else None
    del reader
    if cdir:
        try:
            tmp = cdir + f".tmp{os.getpid()}"
            os.makedirs(tmp, exist_ok=True)
            names = list(w32)
            for i, name in enumerate(names):
                np.save(os.path.join(tmp, f"{i}.npy"), w32[name])
            with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
                json.dump({"meta": meta, "tensor_names": names, "tokens": tokens, "merges": merges}, f)
            open(os.path.join(tmp, "done"), "w").close()
            if not os.path.exists(cdir):
                os.rename(tmp, cdir)
        except OSError as exc:  # cache is best effort
            sys.stderr.write(f"warning: could not write cache {cdir}: {exc}\n")
    w = {}
    for k in list(w32):  # widen one tensor at a time to bound peak memory
        w[k] = w32.pop(k).astype(np.float64)
    return meta, w, tokens, merges


def load_model(path: str, swa_policy: str = "auto", cache_dir: str | None = None) -> Model:
    """Read + dequantize a GGUF (cached per process by path/mtime/size/policy).

    cache_dir (default: $LANTERN_REF_CACHE if set) enables an on-disk cache of
    the dequantized weights shared between processes."""
    if cache_dir is None:
        cache_dir = os.environ.get("LANTERN_REF_CACHE") or None
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size, swa_policy)
    if key in _MODEL_CACHE:
        return _MODEL_CACHE[key]
    meta, w, tokens, merges = _read_gguf(path, cache_dir)
    hp = build_hparams(meta, w, swa_policy)
    model = Model(path=path, hp=hp, meta=meta, w=w, tokens=tokens,
                  tokenizer_model=meta.get("tokenizer.ggml.model"), merges=merges)
    _MODEL_CACHE[key] = model
    return model


# ----------------------------------------------------------------------------
# Math helpers (float64)
# ----------------------------------------------------------------------------

def rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def yarn_inv_freq(inv_freq: np.ndarray, n_rot: int, base: float, yarn: dict):
    """YaRN's inverse frequencies and magnitude (see the module docstring)."""
    def correction_dim(rotations: float) -> float:
        return n_rot * math.log(yarn["orig_ctx"] / (rotations * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(correction_dim(yarn["beta_fast"])), 0)
    high = min(math.ceil(correction_dim(yarn["beta_slow"])), n_rot - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(n_rot // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    keep = 1.0 - ramp  # share of the trained (extrapolated) frequency
    mixed = inv_freq / yarn["factor"] * (1.0 - keep) + inv_freq * keep
    magnitude = 0.1 * math.log(yarn["factor"]) + 1.0 if yarn["factor"] > 1.0 else 1.0
    return mixed, magnitude


def rope_cos_sin(positions: np.ndarray, n_rot: int, base: float, freq_scale: float,
                 freq_factors: np.ndarray | None, attn_factor: float, yarn: dict | None = None):
    """cos/sin tables of shape (n_tokens, n_rot/2)."""
    i = np.arange(n_rot // 2, dtype=np.float64)
    inv_freq = base ** (-2.0 * i / n_rot)
    if freq_factors is not None:
        ff = np.asarray(freq_factors, dtype=np.float64).reshape(-1)
        if ff.shape[0] != n_rot // 2:
            raise UnsupportedModel(f"rope frequency factors have {ff.shape[0]} entries, expected {n_rot // 2}")
        inv_freq = inv_freq / ff
    if yarn is not None:
        inv_freq, magnitude = yarn_inv_freq(inv_freq, n_rot, base, yarn)
        attn_factor = attn_factor * magnitude
    theta = np.asarray(positions, dtype=np.float64)[:, None] * (freq_scale * inv_freq)[None, :]
    return np.cos(theta) * attn_factor, np.sin(theta) * attn_factor


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, n_rot: int, neox: bool) -> np.ndarray:
    """x: (n_tokens, n_heads, head_dim); rotates the first n_rot dims of each head."""
    out = x.copy()
    c = cos[:, None, :]
    s = sin[:, None, :]
    if neox:
        half = n_rot // 2
        x0 = x[..., :half]
        x1 = x[..., half:n_rot]
        out[..., :half] = x0 * c - x1 * s
        out[..., half:n_rot] = x0 * s + x1 * c
    else:
        x0 = x[..., 0:n_rot:2]
        x1 = x[..., 1:n_rot:2]
        out[..., 0:n_rot:2] = x0 * c - x1 * s
        out[..., 1:n_rot:2] = x0 * s + x1 * c
    return out


def attention_mask(q_pos: np.ndarray, k_pos: np.ndarray, window: int = 0) -> np.ndarray:
    """Boolean (n_q, n_k) matrix, True where a query may attend a key.

    Causal: key position <= query position; with window W > 0 additionally
    query_pos - key_pos < W (llama.cpp "standard" sliding window)."""
    i = np.asarray(q_pos)[:, None]
    j = np.asarray(k_pos)[None, :]
    allowed = j <= i
    if window > 0:
        allowed &= (i - j) < window
    return allowed


def moe_ffn(m: Model, h: np.ndarray, pre: str) -> np.ndarray:
    """Mixture of experts, token by token (see the module docstring)."""
    arch = m.hp.arch
    k = int(m.meta[f"{arch}.expert_used_count"])
    norm = bool(m.meta.get(f"{arch}.expert_weights_norm", arch != "qwen2moe"))
    router = m.get(pre + "ffn_gate_inp.weight")                  # (E, n_embd)
    gate, up, down = (m.get(pre + f"ffn_{n}_exps.weight") for n in ("gate", "up", "down"))  # (E, ...)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        p = softmax(router @ h[t])
        chosen = sorted(range(len(p)), key=lambda i: (-p[i], i))[:k]
        w = p[chosen] / (p[chosen].sum() if norm else 1.0)
        for e, we in zip(chosen, w):
            out[t] += we * (down[e] @ (silu(gate[e] @ h[t]) * (up[e] @ h[t])))
    if m.has(pre + "ffn_gate_shexp.weight"):
        g_s, u_s, d_s = (m.get(pre + f"ffn_{n}_shexp.weight") for n in ("gate", "up", "down"))
        gate_inp = m.get(pre + "ffn_gate_inp_shexp.weight").reshape(-1)
        shared = (silu(h @ g_s.T) * (h @ u_s.T)) @ d_s.T
        out += shared / (1.0 + np.exp(-(h @ gate_inp)))[:, None]
    return out


def linear(m: Model, x: np.ndarray, name: str) -> np.ndarray:
    y = x @ m.get(name + ".weight").T
    b = m.w.get(name + ".bias")
    if b is not None:
        y = y + b
    return y


# ----------------------------------------------------------------------------
# Forward
# ----------------------------------------------------------------------------

def _rope_factors(m: Model, layer: int, n_ctx: int) -> np.ndarray | None:
    for name in (f"blk.{layer}.rope_freqs.weight", "rope_freqs.weight"):
        if m.has(name):
            return m.w[name]
    if m.has("rope_factors_long.weight") or m.has("rope_factors_short.weight"):
        use_long = m.hp.n_ctx_orig > 0 and n_ctx > m.hp.n_ctx_orig
        name = "rope_factors_long.weight" if use_long else "rope_factors_short.weight"
        if not m.has(name):
            name = "rope_factors_short.weight" if use_long else "rope_factors_long.weight"
        return m.w[name]
    return None


@dataclass
class KVCache:
    """Per-layer post-rope K and V of the tokens already processed."""
    k: list[np.ndarray | None]
    v: list[np.ndarray | None]
    n_past: int = 0

    @classmethod
    def empty(cls, n_layer: int) -> "KVCache":
        return cls(k=[None] * n_layer, v=[None] * n_layer, n_past=0)


def forward(m: Model, tokens: list[int], n_ctx: int | None = None,
            cache: KVCache | None = None) -> np.ndarray:
    """Logits (float64, [n_new, n_vocab]) for `tokens`.

    Without `cache` this is a causal prefill at positions 0..n-1.  With a cache,
    the tokens are appended after cache.n_past earlier tokens (positions
    n_past..), attend to the cached K/V, and the cache is extended in place.
    `n_ctx` only selects phi3's long/short rope factors (default: total length).
    """
    hp = m.hp
    toks = np.asarray(tokens, dtype=np.int64)
    n = int(toks.shape[0])
    if n == 0:
        raise ValueError("no tokens")
    n_emb_rows = m.get("token_embd.weight").shape[0]
    if toks.min() < 0 or toks.max() >= n_emb_rows:
        raise ValueError(f"token id out of range [0, {n_emb_rows})")
    n_past = cache.n_past if cache is not None else 0
    q_pos = np.arange(n_past, n_past + n, dtype=np.int64)
    k_pos = np.arange(0, n_past + n, dtype=np.int64)
    n_ctx = (n_past + n) if n_ctx is None else n_ctx
    arch = hp.arch

    x = m.get("token_embd.weight")[toks] * hp.embd_scale

    mask_full = attention_mask(q_pos, k_pos, 0)
    mask_swa = attention_mask(q_pos, k_pos, hp.sliding_window) if hp.sliding_window > 0 else mask_full
    group = hp.n_head // hp.n_head_kv

    for il in range(hp.n_layer):
        pre = f"blk.{il}."
        is_swa = hp.swa_layers[il]
        h = rms_norm(x, m.get(pre + "attn_norm.weight"), hp.eps)

        if m.has(pre + "attn_qkv.weight"):
            qkv = linear(m, h, pre + "attn_qkv")
            nq = hp.n_head * hp.head_dim
            nk = hp.n_head_kv * hp.head_dim
            q, k, v = qkv[:, :nq], qkv[:, nq:nq + nk], qkv[:, nq + nk:]
        else:
            q = linear(m, h, pre + "attn_q")
            k = linear(m, h, pre + "attn_k")
            v = linear(m, h, pre + "attn_v")
        q = q.reshape(n, hp.n_head, hp.head_dim)
        k = k.reshape(n, hp.n_head_kv, hp.head_dim)
        v = v.reshape(n, hp.n_head_kv, hp.head_dim_v)

        if m.has(pre + "attn_q_norm.weight"):
            q = rms_norm(q, m.w[pre + "attn_q_norm.weight"], hp.eps)
        if m.has(pre + "attn_k_norm.weight"):
            k = rms_norm(k, m.w[pre + "attn_k_norm.weight"], hp.eps)

        if arch == "gemma3" and is_swa:
            base, fscale = hp.rope_base_swa, 1.0
        else:
            base, fscale = hp.rope_base, hp.freq_scale
        if not (arch == "smollm3" and (il + 1) % 4 == 0):
            yarn = None if arch == "gemma3" and is_swa else hp.extra["yarn"]
            cos, sin = rope_cos_sin(q_pos, hp.n_rot, base, fscale, _rope_factors(m, il, n_ctx),
                                    hp.rope_attn_factor, yarn)
            q = apply_rope(q, cos, sin, hp.n_rot, hp.rope_neox)
            k = apply_rope(k, cos, sin, hp.n_rot, hp.rope_neox)

        if cache is not None:
            if cache.k[il] is not None:
                k = np.concatenate([cache.k[il], k], axis=0)
                v = np.concatenate([cache.v[il], v], axis=0)
            cache.k[il], cache.v[il] = k, v

        # GQA: query head h reads kv head h // group
        k_e = np.repeat(k, group, axis=1)           # (n_k, n_head, hd)
        v_e = np.repeat(v, group, axis=1)
        scores = np.einsum("ihd,jhd->hij", q, k_e) * hp.attn_scale  # (n_head, n_q, n_k)
        if hp.attn_softcap > 0:
            scores = hp.attn_softcap * np.tanh(scores / hp.attn_softcap)
        mask = mask_swa if is_swa else mask_full
        scores = np.where(mask[None, :, :], scores, -np.inf)
        probs = softmax(scores, axis=-1)
        attn = np.einsum("hij,jhd->ihd", probs, v_e).reshape(n, hp.n_head * hp.head_dim_v)
        attn = linear(m, attn, pre + "attn_output")

        if m.has(pre + "post_attention_norm.weight"):
            attn = rms_norm(attn, m.w[pre + "post_attention_norm.weight"], hp.eps)
        x = x + attn * hp.residual_scale

        h = rms_norm(x, m.get(pre + "ffn_norm.weight"), hp.eps)
        if m.has(pre + "ffn_gate_inp.weight"):
            x = x + moe_ffn(m, h, pre) * hp.residual_scale
            continue
        if m.has(pre + "ffn_gate.weight"):
            gate = linear(m, h, pre + "ffn_gate")
            up = linear(m, h, pre + "ffn_up")
        else:  # fused gate|up (phi3): first half is the gate
            gu = linear(m, h, pre + "ffn_up")
            half = gu.shape[-1] // 2
            gate, up = gu[:, :half], gu[:, half:]
        act = gelu_tanh(gate) if arch in ("gemma2", "gemma3") else silu(gate)
        ffn = linear(m, act * up, pre + "ffn_down")
        if m.has(pre + "post_ffw_norm.weight"):
            ffn = rms_norm(ffn, m.w[pre + "post_ffw_norm.weight"], hp.eps)
        x = x + ffn * hp.residual_scale

    if cache is not None:
        cache.n_past = n_past + n

    x = rms_norm(x, m.get("output_norm.weight"), hp.eps)
    out_name = "output" if m.has("output.weight") else "token_embd"
    logits = linear(m, x, out_name) / hp.logit_scale
    if hp.final_softcap > 0:
        logits = hp.final_softcap * np.tanh(logits / hp.final_softcap)
    return logits


def generate(m: Model, tokens: list[int], n_new: int, n_ctx: int | None = None,
             stop_at_eos: bool = True) -> list[int]:
    """Greedy continuation using the KV cache (prefill once, then one token per step)."""
    cache = KVCache.empty(m.hp.n_layer)
    total = len(tokens) + n_new
    logits = forward(m, tokens, n_ctx=n_ctx or total, cache=cache)
    out: list[int] = []
    for _ in range(n_new):
        nxt = int(np.argmax(logits[-1]))
        out.append(nxt)
        if stop_at_eos and m.hp.eos_id is not None and nxt == m.hp.eos_id:
            break
        if len(out) == n_new:
            break
        logits = forward(m, [nxt], n_ctx=n_ctx or total, cache=cache)
    return out


# ----------------------------------------------------------------------------
# Token decoding (for human-readable summaries only)
# ----------------------------------------------------------------------------

def _gpt2_unicode_to_byte() -> dict[str, int]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    extra = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def decode(m: Model, ids: list[int]) -> str:
    if not m.tokens:
        return ""
    if m.tokenizer_model == "gpt2":
        table = _gpt2_unicode_to_byte()
        data = bytearray()
        for i in ids:
            piece = m.tokens[i]
            if all(ch in table for ch in piece):
                data.extend(table[ch] for ch in piece)
            else:
                data.extend(piece.encode("utf-8"))
        return data.decode("utf-8", errors="replace")
    # SentencePiece-style ("llama"): ▁ = space, <0xNN> byte tokens
    data = bytearray()
    for i in ids:
        piece = m.tokens[i]
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            data.append(int(piece[3:5], 16))
        else:
            data.extend(piece.replace("\u2581", " ").encode("utf-8"))
    return data.decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------

def parse_tokens(s: str) -> list[int]:
    parts = [p for p in s.replace(" ", ",").replace("\n", ",").split(",") if p.strip()]
    return [int(p) for p in parts]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", default=None)
    ap.add_argument("--text", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--last-only", action="store_true")
    ap.add_argument("--generate", type=int, default=0)
    ap.add_argument("--swa", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--n-ctx", type=int, default=None)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--cache-dir", default=None)
    args = ap.parse_args(argv)

    try:
        m = load_model(args.model, args.swa, args.cache_dir)
    except UnsupportedModel as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2

    if args.tokens is not None:
        tokens = parse_tokens(args.tokens)
    elif args.text is not None:
        if m.tokenizer_model != "gpt2" or not m.tokens:
            sys.stderr.write("error: --text only supports gpt2 (byte-level BPE) vocabularies\n")
            return 2
        from simple_bpe import encode_text  # noqa: PLC0415 (local helper)
        tokens = encode_text(m.tokens, m.merges, args.text)
        print("tokens: " + ",".join(str(t) for t in tokens))
    else:
        sys.stderr.write("error: --tokens (or --text) is required\n")
        return 2
    if not tokens:
        sys.stderr.write("error: empty token list\n")
        return 2

    if args.verbose:
        for k, v in vars(m.hp).items():
            sys.stderr.write(f"  {k} = {v}\n")

    try:
        logits = forward(m, tokens, n_ctx=args.n_ctx)
    except (UnsupportedModel, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2

    if args.out:
        rows = logits[-1:] if args.last_only else logits
        np.ascontiguousarray(rows, dtype="<f4").tofile(args.out)

    last = logits[-1]
    print(f"arch={m.hp.arch} n_tokens={len(tokens)} n_vocab={logits.shape[1]} "
          f"argmax_last={int(np.argmax(last))} logit_max={float(np.max(last)):.6f}")
    if args.top > 0:
        order = np.argsort(-last)[:args.top]
        pieces = [f"{int(i)}:{float(last[i]):.4f}:{(m.tokens[i] if m.tokens else '')!r}" for i in order]
        print("top: " + " ".join(pieces))
    if args.generate > 0:
        new = generate(m, tokens, args.generate, n_ctx=args.n_ctx)
        print("generated: " + " ".join(str(t) for t in new))
        print(f"text: {decode(m, new)!r}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
