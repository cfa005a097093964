"""Self-checks of the float64 reference (python3 -m pytest tests/reference).

These test the oracle itself: RoPE properties, masks, causality, KV-cache
consistency, convention equivalences (llama normal rope on permuted Q/K ==
neox rope on HF-layout Q/K; fused phi3 tensors == split tensors; GQA head
mapping), quantized tiny models vs f32, k-quant encoders, and the CLI.
Real-model checks run only when the GGUF is present (SmolLM2: models/ or
$LANTERN_SMOLLM2; Gemma 3 270M: $LANTERN_GEMMA3_270M).
"""
from __future__ import annotations

import copy
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import kquants  # noqa: E402
import make_tiny_model  # noqa: E402
import reference_forward as R  # noqa: E402
from gguf import GGMLQuantizationType  # noqa: E402
from gguf.quants import dequantize  # noqa: E402

ARCHS = ("llama", "mistral", "qwen2", "qwen3", "smollm3", "phi3", "gemma3")
TOKENS = [268, 1, 72, 101, 108, 108, 111, 32, 116, 104, 101, 114, 101, 33, 10, 260, 261, 5, 6, 7]
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny")


_made: dict[tuple, str] = {}


def tiny(tiny_dir, arch: str, qtype: str = "f32", *extra: str) -> str:
    key = (arch, qtype, extra)
    if key not in _made:
        name = "-".join([arch, qtype, *[e.strip("-") for e in extra]]) + ".gguf"
        path = str(tiny_dir / name)
        make_tiny_model.main([arch, path, "--type", qtype, *extra])
        _made[key] = path
    return _made[key]


def clone(m: R.Model) -> R.Model:
    mm = copy.copy(m)
    mm.hp = copy.copy(m.hp)
    mm.w = dict(m.w)
    return mm


# ----------------------------------------------------------------------------
# RoPE
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("neox", [False, True])
@pytest.mark.parametrize("n_rot", [16, 12])
def test_rope_position0_identity(neox, n_rot):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 16))
    cos, sin = R.rope_cos_sin(np.array([0]), n_rot, 10000.0, 1.0, None, 1.0)
    np.testing.assert_allclose(R.apply_rope(x, cos, sin, n_rot, neox), x, atol=0, rtol=0)


@pytest.mark.parametrize("neox", [False, True])
def test_rope_partial_leaves_tail(neox):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 2, 16))
    cos, sin = R.rope_cos_sin(np.arange(5), 12, 10000.0, 1.0, None, 1.0)
    y = R.apply_rope(x, cos, sin, 12, neox)
    np.testing.assert_array_equal(y[..., 12:], x[..., 12:])
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)


@pytest.mark.parametrize("neox", [False, True])
def test_rope_relative_position(neox):
    """q.k after rope depends only on the position difference."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 1, 32))
    k = rng.standard_normal((1, 1, 32))

    def dot(pq, pk):
        cq, sq = R.rope_cos_sin(np.array([pq]), 32, 10000.0, 1.0, None, 1.0)
        ck, sk = R.rope_cos_sin(np.array([pk]), 32, 10000.0, 1.0, None, 1.0)
        return float(np.sum(R.apply_rope(q, cq, sq, 32, neox) * R.apply_rope(k, ck, sk, 32, neox)))

    assert dot(7, 3) == pytest.approx(dot(104, 100), rel=1e-10)
    assert dot(7, 3) != pytest.approx(dot(8, 3), rel=1e-6)


def test_rope_normal_mode_pairs():
    """Normal mode rotates (x0, x1) by theta_0 = p (first pair has freq 1)."""
    x = np.zeros((1, 1, 4))
    x[0, 0, 0] = 1.0
    cos, sin = R.rope_cos_sin(np.array([1]), 4, 10000.0, 1.0, None, 1.0)
    y = R.apply_rope(x, cos, sin, 4, neox=False)
    np.testing.assert_allclose(y[0, 0], [np.cos(1), np.sin(1), 0, 0], atol=1e-15)
    y = R.apply_rope(x, cos, sin, 4, neox=True)   # neox pairs (0, 2)
    np.testing.assert_allclose(y[0, 0], [np.cos(1), 0, np.sin(1), 0], atol=1e-15)


def test_rope_freq_factors_and_scale():
    pos = np.arange(6)
    c1, s1 = R.rope_cos_sin(pos, 8, 500.0, 0.5, None, 1.0)
    c2, s2 = R.rope_cos_sin(pos, 8, 500.0, 1.0, np.full(4, 2.0), 1.0)
    np.testing.assert_allclose(c1, c2, rtol=1e-13)
    np.testing.assert_allclose(s1, s2, rtol=1e-13)
    c3, s3 = R.rope_cos_sin(pos, 8, 500.0, 1.0, None, 1.5)
    c4, s4 = R.rope_cos_sin(pos, 8, 500.0, 1.0, None, 1.0)
    np.testing.assert_allclose(c3, 1.5 * c4)
    np.testing.assert_allclose(s3, 1.5 * s4)


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """HF -> GGUF row permutation of llama.cpp's converter for Q/K."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama_unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def test_neox_equals_normal_on_permuted_rows():
    rng = np.random.default_rng(3)
    x_hf = rng.standard_normal((4, 3, 16))
    x_gguf = llama_permute(x_hf.reshape(-1, 16).T, 1).T.reshape(4, 3, 16)  # permute within each head
    cos, sin = R.rope_cos_sin(np.arange(4), 16, 10000.0, 1.0, None, 1.0)
    y_neox = R.apply_rope(x_hf, cos, sin, 16, True)
    y_norm = R.apply_rope(x_gguf, cos, sin, 16, False)
    back = llama_unpermute(y_norm.reshape(-1, 16).T, 1).T.reshape(4, 3, 16)
    np.testing.assert_allclose(back, y_neox, rtol=1e-12, atol=1e-12)


def test_llama_model_equals_neox_model_with_hf_layout(tiny_dir):
    """A llama GGUF (permuted Q/K, normal rope) == the same net in HF layout + neox rope."""
    m = R.load_model(tiny(tiny_dir, "llama", "f32", "--plain"))
    ref = R.forward(m, TOKENS)
    mm = clone(m)
    mm.hp.rope_neox = True
    for il in range(m.hp.n_layer):
        mm.w[f"blk.{il}.attn_q.weight"] = llama_unpermute(m.w[f"blk.{il}.attn_q.weight"], m.hp.n_head)
        mm.w[f"blk.{il}.attn_k.weight"] = llama_unpermute(m.w[f"blk.{il}.attn_k.weight"], m.hp.n_head_kv)
    np.testing.assert_allclose(R.forward(mm, TOKENS), ref, rtol=1e-9, atol=1e-9)
    mm.hp.rope_neox = False  # and the mode matters
    assert np.abs(R.forward(mm, TOKENS) - ref).max() > 1e-3


# ----------------------------------------------------------------------------
# masks, causality, cache
# ----------------------------------------------------------------------------

def test_attention_mask():
    m = R.attention_mask(np.arange(5), np.arange(5))
    np.testing.assert_array_equal(m, np.tril(np.ones((5, 5), dtype=bool)))
    w = R.attention_mask(np.arange(6), np.arange(6), window=3)
    for i in range(6):
        for j in range(6):
            assert w[i, j] == (j <= i and i - j < 3)
    # queries at positions 3,4 against keys 0..4 (KV-cache layout)
    q = R.attention_mask(np.array([3, 4]), np.arange(5), window=2)
    np.testing.assert_array_equal(q, [[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]])


@pytest.mark.parametrize("arch", ARCHS)
def test_causality(tiny_dir, arch):
    m = R.load_model(tiny(tiny_dir, arch))
    full = R.forward(m, TOKENS)
    for k in (1, 5, 13):
        np.testing.assert_allclose(R.forward(m, TOKENS[:k]), full[:k], rtol=1e-10, atol=1e-10)
    changed = list(TOKENS)
    changed[10] = 42
    alt = R.forward(m, changed)
    np.testing.assert_allclose(alt[:10], full[:10], rtol=1e-10, atol=1e-10)
    assert np.abs(alt[10:] - full[10:]).max() > 1e-6


@pytest.mark.parametrize("arch", ARCHS)
def test_kv_cache_matches_prefill(tiny_dir, arch):
    m = R.load_model(tiny(tiny_dir, arch))
    full = R.forward(m, TOKENS, n_ctx=len(TOKENS))
    cache = R.KVCache.empty(m.hp.n_layer)
    parts = [R.forward(m, TOKENS[:7], n_ctx=len(TOKENS), cache=cache)]
    for t in TOKENS[7:]:
        parts.append(R.forward(m, [t], n_ctx=len(TOKENS), cache=cache))
    np.testing.assert_allclose(np.concatenate(parts), full, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("arch,window", [("mistral", 8), ("gemma3", 4)])
def test_sliding_window(tiny_dir, arch, window):
    path = tiny(tiny_dir, arch)
    on = R.forward(R.load_model(path, "auto"), TOKENS)
    off = R.forward(R.load_model(path, "off"), TOKENS)
    np.testing.assert_allclose(on[:window], off[:window], rtol=1e-10, atol=1e-10)
    assert np.abs(on[window:] - off[window:]).max() > 1e-4
    m = R.load_model(path)
    assert m.hp.sliding_window == window
    if arch == "gemma3":
        assert m.hp.swa_layers == [True] * 5 + [False]
    else:
        assert all(m.hp.swa_layers)


def test_gqa_head_mapping(tiny_dir):
    """Query head h uses kv head h // (n_head / n_head_kv): duplicating each kv
    head's rows in place (repeat_interleave) and declaring n_head_kv = n_head
    must not change anything."""
    m = R.load_model(tiny(tiny_dir, "qwen2"))
    ref = R.forward(m, TOKENS)
    mm = clone(m)
    g = m.hp.n_head // m.hp.n_head_kv
    hd = m.hp.head_dim
    for il in range(m.hp.n_layer):
        for t in ("attn_k", "attn_v"):
            w = m.w[f"blk.{il}.{t}.weight"].reshape(m.hp.n_head_kv, hd, -1)
            mm.w[f"blk.{il}.{t}.weight"] = np.repeat(w, g, axis=0).reshape(m.hp.n_head * hd, -1)
            b = m.w[f"blk.{il}.{t}.bias"].reshape(m.hp.n_head_kv, hd)
            mm.w[f"blk.{il}.{t}.bias"] = np.repeat(b, g, axis=0).reshape(-1)
    mm.hp.n_head_kv = m.hp.n_head
    np.testing.assert_allclose(R.forward(mm, TOKENS), ref, rtol=1e-10, atol=1e-10)


def test_phi3_fused_equals_split(tiny_dir):
    m = R.load_model(tiny(tiny_dir, "phi3"))
    ref = R.forward(m, TOKENS)
    mm = clone(m)
    nq = m.hp.n_head * m.hp.head_dim
    nk = m.hp.n_head_kv * m.hp.head_dim
    for il in range(m.hp.n_layer):
        qkv = mm.w.pop(f"blk.{il}.attn_qkv.weight")
        mm.w[f"blk.{il}.attn_q.weight"] = qkv[:nq]
        mm.w[f"blk.{il}.attn_k.weight"] = qkv[nq:nq + nk]
        mm.w[f"blk.{il}.attn_v.weight"] = qkv[nq + nk:]
        up = mm.w.pop(f"blk.{il}.ffn_up.weight")
        mm.w[f"blk.{il}.ffn_gate.weight"] = up[:m.hp.n_ff]
        mm.w[f"blk.{il}.ffn_up.weight"] = up[m.hp.n_ff:]
    np.testing.assert_allclose(R.forward(mm, TOKENS), ref, rtol=1e-10, atol=1e-10)


def test_phi3_long_factors_selected_by_n_ctx(tiny_dir):
    m = R.load_model(tiny(tiny_dir, "phi3"))
    assert m.hp.n_rot == 12 and m.hp.head_dim == 16 and m.hp.n_ctx_orig == 256
    short = R.forward(m, TOKENS)
    long_ = R.forward(m, TOKENS, n_ctx=512)
    np.testing.assert_allclose(R.forward(m, TOKENS, n_ctx=256), short)
    assert np.abs(short - long_).max() > 1e-4


def test_tied_output(tiny_dir):
    m = R.load_model(tiny(tiny_dir, "qwen2"))
    assert "output.weight" not in m.w and m.hp.n_vocab == m.w["token_embd.weight"].shape[0]


def test_hparams_per_arch(tiny_dir):
    hp = R.load_model(tiny(tiny_dir, "llama")).hp
    assert (hp.arch, hp.rope_neox, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_vocab) == ("llama", False, 4, 2, 16, 269)
    hp = R.load_model(tiny(tiny_dir, "mistral")).hp
    assert hp.arch == "llama" and hp.freq_scale == 0.5 and hp.sliding_window == 8
    hp = R.load_model(tiny(tiny_dir, "gemma3")).hp
    assert hp.rope_neox and hp.head_dim == 32 and hp.rope_base == 1e6 and hp.rope_base_swa == 10000.0
    assert hp.freq_scale == 0.125 and hp.attn_scale == pytest.approx(1 / np.sqrt(32))
    assert hp.embd_scale == pytest.approx(8.0)


def test_mistral_arch_name(tiny_dir):
    a = R.forward(R.load_model(tiny(tiny_dir, "mistral")), TOKENS)
    b = R.forward(R.load_model(tiny(tiny_dir, "mistral", "f32", "--arch-name", "mistral")), TOKENS)
    np.testing.assert_array_equal(a, b)


def test_gemma3_softcap(tiny_dir):
    plain = R.forward(R.load_model(tiny(tiny_dir, "gemma3")), TOKENS)
    capped = R.forward(R.load_model(tiny(tiny_dir, "gemma3", "f32", "--softcap")), TOKENS)
    assert np.abs(capped).max() < 30.0
    assert np.abs(plain - capped).max() > 1e-6


# ----------------------------------------------------------------------------
# quantization
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("qtype,tol", [("f16", 0.01), ("q8_0", 0.05), ("q4_0", 0.5)])
def test_quantized_close_to_f32(tiny_dir, arch, qtype, tol):
    ref = R.forward(R.load_model(tiny(tiny_dir, arch, "f32")), TOKENS)
    q = R.forward(R.load_model(tiny(tiny_dir, arch, qtype)), TOKENS)
    rel = np.sqrt(np.mean((q - ref) ** 2) / np.mean(ref ** 2))
    assert rel < tol, rel
    assert rel > 0


@pytest.mark.parametrize("name,tol", [("Q2_K", 0.4), ("Q3_K", 0.2), ("Q4_K", 0.1), ("Q5_K", 0.05), ("Q6_K", 0.03)])
def test_kquant_encoders_roundtrip(name, tol):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((6, 512)) * 0.05).astype(np.float32)
    x[0, :256] = np.abs(x[0, :256]) + 0.01          # all-positive block
    x[1, :256] = -np.abs(x[1, :256])                # all-negative block
    x[2, :256] = 0.0                                # all-zero block
    qtype = GGMLQuantizationType[name]
    blob = kquants.ENCODERS[name](x)
    y = dequantize(blob, qtype)
    assert y.shape == x.shape
    assert np.all(y[2, :256] == 0)
    rel = np.sqrt(np.mean((y - x) ** 2) / np.mean(x ** 2))
    assert rel < tol, rel


@pytest.mark.parametrize("arch,qtype,tol", [("llama", "q6_k", 0.05), ("gemma3", "q6_k", 0.15),
                                           ("phi3", "q4_k", 0.25), ("qwen2", "q5_k", 0.15)])
def test_kquant_tiny_model(tiny_dir, arch, qtype, tol):
    m = R.load_model(tiny(tiny_dir, arch, qtype))
    assert m.hp.n_embd == 256
    logits = R.forward(m, TOKENS)
    assert np.all(np.isfinite(logits))
    ref = R.forward(R.load_model(tiny(tiny_dir, arch, "f32", "--wide")), TOKENS)
    rel = np.sqrt(np.mean((logits - ref) ** 2) / np.mean(ref ** 2))
    assert 0 < rel < tol, rel


# ----------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(HERE, "reference_forward.py"), *args],
                          capture_output=True, text=True, check=False)


def test_cli_writes_logits(tiny_dir, tmp_path):
    path = tiny(tiny_dir, "llama")
    out = tmp_path / "l.bin"
    toks = ",".join(map(str, TOKENS))
    r = run_cli(path, "--tokens", toks, "--out", str(out))
    assert r.returncode == 0, r.stderr
    data = np.fromfile(out, dtype="<f4").reshape(len(TOKENS), 269)
    ref = R.forward(R.load_model(path), TOKENS)
    np.testing.assert_allclose(data, ref.astype(np.float32))
    first = r.stdout.splitlines()[0]
    assert first.startswith("arch=llama n_tokens=20 n_vocab=269 ")
    assert f"argmax_last={int(np.argmax(ref[-1]))}" in first

    r = run_cli(path, "--tokens", toks, "--out", str(out), "--last-only", "--generate", "3")
    assert r.returncode == 0, r.stderr
    assert np.fromfile(out, dtype="<f4").shape == (269,)
    gen = [ln for ln in r.stdout.splitlines() if ln.startswith("generated: ")]
    assert len(gen) == 1 and len(gen[0].split()) == 4
    assert int(gen[0].split()[1]) == int(np.argmax(ref[-1]))


def test_cli_errors(tiny_dir, tmp_path):
    r = run_cli(tiny(tiny_dir, "llama"), "--tokens", "1,2,99999")
    assert r.returncode != 0 and "out of range" in r.stderr


def test_generate_uses_cache_consistently(tiny_dir):
    m = R.load_model(tiny(tiny_dir, "gemma3"))
    new = R.generate(m, TOKENS[:6], 5, stop_at_eos=False)
    seq = list(TOKENS[:6])
    for _ in range(5):
        seq.append(int(np.argmax(R.forward(m, seq, n_ctx=11)[-1])))
    assert new == seq[6:]


# ----------------------------------------------------------------------------
# real models (skipped when absent)
# ----------------------------------------------------------------------------

def _smollm2_path() -> str | None:
    for p in (os.environ.get("LANTERN_SMOLLM2"), os.path.join(REPO, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")):
        if p and os.path.isfile(p):
            return p
    return None


# <|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n
SMOL_PROMPT = [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]


@pytest.mark.skipif(_smollm2_path() is None, reason="SmolLM2-135M-Instruct.Q4_1.gguf not present")
def test_smollm2_greedy_answer():
    m = R.load_model(_smollm2_path())
    assert m.hp.arch == "llama" and not m.hp.rope_neox
    new = R.generate(m, SMOL_PROMPT, 8)
    assert R.decode(m, new) == "The capital of France is Paris.<|im_end|>"


@pytest.mark.skipif(not os.path.isfile(os.environ.get("LANTERN_GEMMA3_270M", "")),
                    reason="set LANTERN_GEMMA3_270M to gemma-3-270m-q4_k_m.gguf")
def test_gemma3_270m_greedy():
    m = R.load_model(os.environ["LANTERN_GEMMA3_270M"])
    # <bos>The quick brown fox jumps over the lazy
    new = R.generate(m, [2, 818, 3823, 8864, 37423, 38167, 1024, 506, 31770], 2)
    assert R.decode(m, new) == " dog."
