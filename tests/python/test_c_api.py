"""The C API from Python through ctypes, as a language binding would use it:
liblantern_c of the build (LANTERN_BUILD_DIR, else build/) and the default
model (LANTERN_MODEL, else models/). Skipped when either is missing."""
import ctypes
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIB = pathlib.Path(os.environ.get("LANTERN_BUILD_DIR", ROOT / "build")) / "lib" / "liblantern_c.so"
MODEL = pathlib.Path(os.environ.get("LANTERN_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))


class ModelParams(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_char_p), ("device", ctypes.c_int), ("n_gpu_layers", ctypes.c_int),
                ("n_threads", ctypes.c_int), ("vocab_only", ctypes.c_int)]


class ContextParams(ctypes.Structure):
    _fields_ = [("n_ctx", ctypes.c_int), ("n_seq", ctypes.c_int), ("n_batch", ctypes.c_int), ("n_threads", ctypes.c_int)]


class SamplerParams(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int), ("top_p", ctypes.c_float),
                ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float), ("repeat_last_n", ctypes.c_int),
                ("frequency_penalty", ctypes.c_float), ("presence_penalty", ctypes.c_float),
                ("seed", ctypes.c_uint64), ("bias_tokens", ctypes.POINTER(ctypes.c_int32)),
                ("bias_values", ctypes.POINTER(ctypes.c_float)), ("n_bias", ctypes.c_int)]


@pytest.fixture(scope="module")
def lib():
    if not LIB.exists() or not MODEL.exists():
        pytest.skip(f"needs {LIB} and {MODEL}")
    L = ctypes.CDLL(str(LIB))
    p, i32p, fp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_float)
    sigs = {
        "lantern_last_error": (ctypes.c_char_p, []),
        "lantern_last_error_code": (ctypes.c_int, []),
        "lantern_model_default_params": (ModelParams, []),
        "lantern_model_load": (p, [ctypes.c_char_p, ctypes.POINTER(ModelParams)]),
        "lantern_model_free": (None, [p]),
        "lantern_model_n_vocab": (ctypes.c_int, [p]),
        "lantern_chat_apply": (ctypes.c_int, [p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p),
                                              ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]),
        "lantern_tokenize": (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, i32p,
                                            ctypes.c_int]),
        "lantern_detokenize": (ctypes.c_int, [p, i32p, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
        "lantern_token_is_eog": (ctypes.c_int, [p, ctypes.c_int32]),
        "lantern_context_default_params": (ContextParams, []),
        "lantern_context_new": (p, [p, ctypes.POINTER(ContextParams)]),
        "lantern_context_free": (None, [p]),
        "lantern_decode": (ctypes.c_int, [p, i32p, i32p, i32p, ctypes.c_void_p, ctypes.c_int]),
        "lantern_logits": (fp, [p, ctypes.c_int]),
        "lantern_sampler_default_params": (SamplerParams, []),
        "lantern_sampler_new": (p, [ctypes.POINTER(SamplerParams), ctypes.c_int]),
        "lantern_sampler_free": (None, [p]),
        "lantern_sampler_sample": (ctypes.c_int32, [p, fp]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(L, name)
        f.restype, f.argtypes = res, args
    return L


def text_out(fn, *args):
    """Calls a lantern_* function that writes text, twice if the first buffer was short."""
    n = fn(*args, None, 0)
    assert n >= 0
    buf = ctypes.create_string_buffer(n + 1)
    assert fn(*args, buf, n + 1) == n
    return buf.value.decode()


def test_chat_answer_from_python(lib):
    mp = lib.lantern_model_default_params()
    mp.n_threads = 2
    model = lib.lantern_model_load(str(MODEL).encode(), ctypes.byref(mp))
    assert model, lib.lantern_last_error()
    roles = (ctypes.c_char_p * 1)(b"user")
    contents = (ctypes.c_char_p * 1)(b"What is the capital of France? Answer in one sentence.")
    prompt = text_out(lib.lantern_chat_apply, model, roles, contents, 1, 1, None).encode()
    n = lib.lantern_tokenize(model, prompt, len(prompt), 0, 1, None, 0)
    ids = (ctypes.c_int32 * n)()
    assert lib.lantern_tokenize(model, prompt, len(prompt), 0, 1, ids, n) == n
    cp = lib.lantern_context_default_params()
    cp.n_ctx = 512
    ctx = lib.lantern_context_new(model, ctypes.byref(cp))
    sp = lib.lantern_sampler_default_params()
    sp.temperature = 0.0
    sampler = lib.lantern_sampler_new(ctypes.byref(sp), lib.lantern_model_n_vocab(model))
    assert ctx and sampler, lib.lantern_last_error()
    assert lib.lantern_decode(ctx, ids, None, None, None, n) == 0, lib.lantern_last_error()
    out = []
    for _ in range(32):
        t = lib.lantern_sampler_sample(sampler, lib.lantern_logits(ctx, 0))
        if lib.lantern_token_is_eog(model, t):
            break
        out.append(t)
        one = (ctypes.c_int32 * 1)(t)
        assert lib.lantern_decode(ctx, one, None, None, None, 1) == 0, lib.lantern_last_error()
    answer = text_out(lib.lantern_detokenize, model, (ctypes.c_int32 * len(out))(*out), len(out), 0)
    assert answer == "The capital of France is Paris."
    lib.lantern_sampler_free(sampler)
    lib.lantern_context_free(ctx)
    lib.lantern_model_free(model)


def test_errors_reach_python(lib):
    assert not lib.lantern_model_load(b"/nonexistent/model.gguf", None)
    assert lib.lantern_last_error_code() == -2  # LANTERN_ERR_IO
    assert b"/nonexistent/model.gguf" in lib.lantern_last_error()
