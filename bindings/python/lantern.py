"""Lantern from Python: the C API (include/lantern/lantern_c.h, liblantern_c.so)
through ctypes, with no other dependency.

    import lantern
    model = lantern.Model("model.gguf")
    print(model.chat([{"role": "user", "content": "Hi!"}], max_tokens=64, temperature=0))

    ctx = lantern.Context(model, n_ctx=2048)          # the lower level: decode and sample
    ctx.decode(model.tokenize("The sky is"))
    sampler = lantern.Sampler(model.n_vocab, temperature=0)
    token = sampler.sample(ctx.logits())

The library is found through LANTERN_LIBRARY (a path to liblantern_c.so), else
in build/lib of the checkout this file is in, else by the loader's search path.
A failure raises LanternError, whose `code` is the C API's LANTERN_ERR_* status.
"""
import codecs
import ctypes
import json
import os
import pathlib
import weakref

__all__ = ["LanternError", "Model", "Context", "Sampler", "backends", "cpu_kernels"]

_p, _i32p, _fp, _cs = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_float), ctypes.c_char_p


_Progress = ctypes.CFUNCTYPE(None, ctypes.c_float, ctypes.c_void_p)


class _ModelParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("backend", _cs), ("device", ctypes.c_int), ("n_gpu_layers", ctypes.c_int),
                ("n_threads", ctypes.c_int), ("vocab_only", ctypes.c_int), ("progress", _Progress),
                ("progress_user_data", ctypes.c_void_p), ("lora_paths", ctypes.POINTER(_cs)),
                ("lora_scales", _fp), ("n_lora", ctypes.c_int), ("rope_scaling", _cs),
                ("rope_freq_base", ctypes.c_float), ("rope_freq_scale", ctypes.c_float),
                ("yarn_orig_ctx", ctypes.c_int), ("yarn_ext_factor", ctypes.c_float),
                ("yarn_attn_factor", ctypes.c_float), ("yarn_beta_fast", ctypes.c_float),
                ("yarn_beta_slow", ctypes.c_float)]


class _ContextParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("n_ctx", ctypes.c_int), ("n_seq", ctypes.c_int), ("n_batch", ctypes.c_int), ("n_threads", ctypes.c_int),
                ("embeddings", ctypes.c_int), ("cache_type_k", _cs), ("cache_type_v", _cs)]


class _SamplerParams(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("temperature", ctypes.c_float), ("top_k", ctypes.c_int), ("top_p", ctypes.c_float),
                ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float), ("repeat_last_n", ctypes.c_int),
                ("frequency_penalty", ctypes.c_float), ("presence_penalty", ctypes.c_float),
                ("seed", ctypes.c_uint64), ("bias_tokens", _i32p), ("bias_values", _fp), ("n_bias", ctypes.c_int),
                ("json_object", ctypes.c_int), ("json_prefixes", ctypes.POINTER(ctypes.c_char_p)),
                ("n_json_prefixes", ctypes.c_int), ("json_schema", ctypes.c_char_p), ("grammar", ctypes.c_char_p),
                ("typical_p", ctypes.c_float), ("top_n_sigma", ctypes.c_float), ("xtc_probability", ctypes.c_float),
                ("xtc_threshold", ctypes.c_float), ("dry_multiplier", ctypes.c_float), ("dry_base", ctypes.c_float),
                ("dry_allowed_length", ctypes.c_int), ("dry_penalty_last_n", ctypes.c_int),
                ("dry_sequence_breakers", ctypes.POINTER(ctypes.c_char_p)), ("n_dry_sequence_breakers", ctypes.c_int),
                ("mirostat", ctypes.c_int), ("mirostat_tau", ctypes.c_float), ("mirostat_eta", ctypes.c_float)]


# name: (result, arguments); the C header is the reference.
_SIGNATURES = {
    "lantern_last_error": (_cs, []),
    "lantern_last_error_code": (ctypes.c_int, []),
    "lantern_version": (_cs, []),
    "lantern_backends": (ctypes.c_int, [_cs, ctypes.c_int]),
    "lantern_cpu_kernels": (ctypes.c_int, [_cs, ctypes.c_int]),
    "lantern_model_default_params": (_ModelParams, []),
    "lantern_model_load": (_p, [_cs, ctypes.POINTER(_ModelParams)]),
    "lantern_model_free": (None, [_p]),
    "lantern_model_n_vocab": (ctypes.c_int, [_p]),
    "lantern_model_n_ctx_train": (ctypes.c_int, [_p]),
    "lantern_model_n_ctx_max": (ctypes.c_int, [_p]),
    "lantern_model_description": (_cs, [_p]),
    "lantern_token_bos": (ctypes.c_int32, [_p]),
    "lantern_token_is_eog": (ctypes.c_int, [_p, ctypes.c_int32]),
    "lantern_tokenize": (ctypes.c_int, [_p, _cs, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, _i32p, ctypes.c_int]),
    "lantern_fill_in_middle": (ctypes.c_int, [_p, _cs, ctypes.c_size_t, _cs, ctypes.c_size_t, ctypes.c_int, _i32p,
                                              ctypes.c_int]),
    "lantern_token_to_piece": (ctypes.c_int, [_p, ctypes.c_int32, ctypes.c_int, _cs, ctypes.c_int]),
    "lantern_detokenize": (ctypes.c_int, [_p, _i32p, ctypes.c_int, ctypes.c_int, _cs, ctypes.c_int]),
    "lantern_chat_apply": (ctypes.c_int, [_p, ctypes.POINTER(_cs), ctypes.POINTER(_cs), ctypes.c_int, ctypes.c_int,
                                          _cs, _cs, ctypes.c_int]),
    "lantern_chat_apply_json": (ctypes.c_int, [_p, _cs, ctypes.c_int, _cs, _cs, ctypes.c_int]),
    "lantern_chat_parse_reply": (ctypes.c_int, [_cs, _cs, _cs, ctypes.c_int]),
    "lantern_context_default_params": (_ContextParams, []),
    "lantern_context_new": (_p, [_p, ctypes.POINTER(_ContextParams)]),
    "lantern_context_free": (None, [_p]),
    "lantern_decode": (ctypes.c_int, [_p, _i32p, _i32p, _i32p, ctypes.POINTER(ctypes.c_int8), ctypes.c_int]),
    "lantern_logits": (_fp, [_p, ctypes.c_int]),
    "lantern_embeddings": (_fp, [_p, ctypes.c_int]),
    "lantern_model_n_embd": (ctypes.c_int, [_p]),
    "lantern_n_outputs": (ctypes.c_int, [_p]),
    "lantern_sequence_length": (ctypes.c_int, [_p, ctypes.c_int]),
    "lantern_clear_sequence": (ctypes.c_int, [_p, ctypes.c_int]),
    "lantern_context_n_ctx": (ctypes.c_int, [_p]),
    "lantern_sequence_save_file": (ctypes.c_int, [_p, ctypes.c_int, ctypes.c_char_p, _i32p, ctypes.c_int]),
    "lantern_sequence_load_file": (ctypes.c_int, [_p, ctypes.c_int, ctypes.c_char_p, _i32p, ctypes.c_int]),
    "lantern_sampler_default_params": (_SamplerParams, []),
    "lantern_sampler_new": (_p, [ctypes.POINTER(_SamplerParams), ctypes.c_int]),
    "lantern_sampler_new_for_model": (_p, [ctypes.POINTER(_SamplerParams), _p]),
    "lantern_sampler_free": (None, [_p]),
    "lantern_sampler_sample": (ctypes.c_int32, [_p, _fp]),
    "lantern_sampler_accept": (ctypes.c_int, [_p, ctypes.c_int32]),
    "lantern_sampler_restart_output": (None, [_p]),
}

_lib = None


def _library():
    global _lib
    if _lib is None:
        path = os.environ.get("LANTERN_LIBRARY")
        if path is None:
            local = pathlib.Path(__file__).resolve().parents[2] / "build" / "lib" / "liblantern_c.so"
            path = str(local) if local.exists() else "liblantern_c.so"
        lib = ctypes.CDLL(path)
        for name, (res, args) in _SIGNATURES.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        _lib = lib
    return _lib


class LanternError(Exception):
    """A failed call: `code` is the LANTERN_ERR_* status, str() the library's message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _raise():
    lib = _library()
    raise LanternError(lib.lantern_last_error_code(), lib.lantern_last_error().decode("utf-8", "replace"))


def _check(status):
    if status < 0:
        _raise()
    return status


def _bytes(fn, *args):
    """Calls a function that writes text into a buffer, with a second call if it was short."""
    buf = ctypes.create_string_buffer(256)
    n = _check(fn(*args, buf, len(buf)))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        _check(fn(*args, buf, n + 1))
    return buf.raw[:n]


def _text(fn, *args):
    return _bytes(fn, *args).decode("utf-8", "replace")


def _ids(tokens):
    return (ctypes.c_int32 * len(tokens))(*tokens)


def backends():
    """The backends built into the library, "cpu" first."""
    return _text(_library().lantern_backends).split(",")


def cpu_kernels():
    """The instruction set of the CPU kernels ("AVX2", "NEON SDOT", ...)."""
    return _text(_library().lantern_cpu_kernels)


class Model:
    """A GGUF model. backend: "cpu", "cuda", "opencl" or "auto"; n_gpu_layers: the last N
    layers on that backend (a large number: all of them); progress: called with 0..1 while
    the weights load; lora: LoRA adapter GGUFs to apply, each a path or a (path, scale) pair;
    vocab_only: the vocabulary and chat template alone (tokenize, templates; no contexts);
    rope: overrides of the file's rotary settings, as keywords of lantern_model_params
    (rope_scaling="yarn", rope_freq_scale=0.25, yarn_orig_ctx=32768, yarn_beta_fast=...)."""

    _ROPE = ("rope_scaling", "rope_freq_base", "rope_freq_scale", "yarn_orig_ctx", "yarn_ext_factor",
             "yarn_attn_factor", "yarn_beta_fast", "yarn_beta_slow")

    def __init__(self, path, backend="cpu", n_gpu_layers=0, n_threads=0, device=0, progress=None, lora=(),
                 vocab_only=False, **rope):
        lib = _library()
        params = lib.lantern_model_default_params()
        params.backend, params.device = backend.encode(), device
        params.n_gpu_layers, params.n_threads = n_gpu_layers, n_threads
        params.vocab_only = int(vocab_only)
        adapters = [(a, 1.0) if isinstance(a, (str, bytes, os.PathLike)) else tuple(a) for a in lora]
        paths = (_cs * len(adapters))(*[os.fsencode(p) for p, _ in adapters])
        scales = (ctypes.c_float * len(adapters))(*[float(s) for _, s in adapters])
        params.lora_paths, params.lora_scales, params.n_lora = paths, scales, len(adapters)
        for key, value in rope.items():
            if key not in self._ROPE:
                raise TypeError(f"Model() got an unexpected keyword argument '{key}'")
            setattr(params, key, value.encode() if key == "rope_scaling" else value)
        callback = _Progress(lambda fraction, _: progress(fraction)) if progress else _Progress()
        params.progress = callback
        self._contexts = weakref.WeakSet()  # closed before the model: they use its backends
        self._h = lib.lantern_model_load(os.fsencode(path), ctypes.byref(params))
        if not self._h:
            _raise()
        self.n_vocab = _check(lib.lantern_model_n_vocab(self._h))
        self.n_ctx_train = _check(lib.lantern_model_n_ctx_train(self._h))
        self.n_ctx_max = _check(lib.lantern_model_n_ctx_max(self._h))
        self.description = lib.lantern_model_description(self._h).decode()

    def close(self):
        """Frees the model, and first every context still open on it."""
        if getattr(self, "_h", None):
            for ctx in list(self._contexts):
                ctx.close()
            _library().lantern_model_free(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def tokenize(self, text, add_special=True, parse_special=False):
        data = text.encode()
        lib = _library()
        n = _check(lib.lantern_tokenize(self._h, data, len(data), int(add_special), int(parse_special), None, 0))
        out = (ctypes.c_int32 * n)()
        _check(lib.lantern_tokenize(self._h, data, len(data), int(add_special), int(parse_special), out, n))
        return list(out)

    def fill_in_middle(self, prefix, suffix, max_tokens=0):
        """The prompt (token ids) asking a code model for what goes between prefix and suffix;
        LanternError for a model without fill-in-the-middle tokens."""
        p, s = prefix.encode(), suffix.encode()
        lib = _library()
        n = _check(lib.lantern_fill_in_middle(self._h, p, len(p), s, len(s), max_tokens, None, 0))
        out = (ctypes.c_int32 * n)()
        _check(lib.lantern_fill_in_middle(self._h, p, len(p), s, len(s), max_tokens, out, n))
        return list(out)

    def detokenize(self, tokens, render_special=False):
        return _text(_library().lantern_detokenize, self._h, _ids(tokens), len(tokens), int(render_special))

    def token_to_piece(self, token, render_special=False):
        return _text(_library().lantern_token_to_piece, self._h, token, int(render_special))

    def is_end_of_generation(self, token):
        return _check(_library().lantern_token_is_eog(self._h, token)) == 1

    def apply_chat_template(self, messages, add_generation_prompt=True, template=None):
        """messages: [{"role": ..., "content": ...}]; template: a built-in name or Jinja source."""
        roles = (_cs * len(messages))(*[m["role"].encode() for m in messages])
        contents = (_cs * len(messages))(*[m["content"].encode() for m in messages])
        return _text(_library().lantern_chat_apply, self._h, roles, contents, len(messages),
                     int(add_generation_prompt), template.encode() if template else None)

    def stream(self, prompt, max_tokens=256, n_ctx=4096, parse_special=False, add_special=True, **sampling):
        """Yields the text generated after `prompt` piece by piece, whole UTF-8 characters only
        (stops at an end-of-generation token); sampling: Sampler's keyword arguments
        (json_object=True: the text is one JSON object). The penalties see the prompt's tokens,
        as lantern run's and the server's do."""
        ctx = Context(self, n_ctx=n_ctx)
        sampler = Sampler(self.n_vocab, model=self, **sampling)
        ids = self.tokenize(prompt, add_special, parse_special)
        for t in ids:
            sampler.accept(t)
        ctx.decode(ids)
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        lib = _library()
        for _ in range(max_tokens):
            if ctx.sequence_length() >= ctx.n_ctx:
                break
            token = sampler.sample(ctx.logits())
            if self.is_end_of_generation(token):
                break
            piece = utf8.decode(_bytes(lib.lantern_token_to_piece, self._h, token, 0))
            if piece:
                yield piece
            ctx.decode([token])
        rest = utf8.decode(b"", final=True)
        if rest:
            yield rest

    def generate(self, prompt, max_tokens=256, **kwargs):
        """The text generated after `prompt` (stream()'s pieces joined)."""
        return "".join(self.stream(prompt, max_tokens, **kwargs))

    def chat_stream(self, messages, template=None, **kwargs):
        """Yields the assistant's reply to a conversation piece by piece, through the chat template."""
        prompt = self.apply_chat_template(messages, True, template)
        bos = _library().lantern_token_bos(self._h)
        starts_with_bos = bos >= 0 and prompt.startswith(self.token_to_piece(bos, True))
        return self.stream(prompt, parse_special=True, add_special=bos >= 0 and not starts_with_bos, **kwargs)

    def chat(self, messages, template=None, **kwargs):
        """The assistant's reply to a conversation, through the chat template."""
        return "".join(self.chat_stream(messages, template, **kwargs))

    def chat_message(self, messages, tools=None, tool_choice=None, template=None, template_kwargs=None, **kwargs):
        """The assistant's reply as OpenAI's message dict, with function calling: messages
        and tools as OpenAI's API takes them (assistant "tool_calls", "tool" answers);
        tool_choice "auto", "none", "required" or {"type": "function", "function": {"name": ...}}.
        A reply that calls tools has "tool_calls" (and content None); a required call is
        sampled under a constraint that keeps it a valid call of the allowed tools. A reasoning
        model's <think> text is the message's "reasoning_content"; template_kwargs are more
        template variables (e.g. {"enable_thinking": False})."""
        request = {"messages": messages}
        if tools:
            request["tools"] = tools
        if tool_choice is not None:
            request["tool_choice"] = tool_choice
        if template_kwargs:
            request["chat_template_kwargs"] = template_kwargs
        req = json.dumps(request).encode()
        lib = _library()
        rendered = json.loads(_text(lib.lantern_chat_apply_json, self._h, req, 1,
                                    template.encode() if template else None))
        prompt, prefixes = rendered["prompt"], rendered["call_prefixes"]
        if prefixes:
            kwargs.update(json_object=True, json_prefixes=prefixes)
            if rendered.get("call_schema"):
                kwargs.update(json_schema=rendered["call_schema"])
        bos = lib.lantern_token_bos(self._h)
        starts_with_bos = bos >= 0 and prompt.startswith(self.token_to_piece(bos, True))
        reply = "".join(self.stream(prompt, parse_special=True, add_special=bos >= 0 and not starts_with_bos, **kwargs))
        request["opens_reasoning"] = rendered["opens_reasoning"]
        return json.loads(_text(lib.lantern_chat_parse_reply, json.dumps(request).encode(), reply.encode()))


class Context:
    """A KV cache of n_seq sequences of n_ctx positions each, and the last decode's logits
    (embeddings=True: its final hidden states instead, Context.embeddings). cache_type_k and
    cache_type_v are the cache's element types ("f16", "q8_0", "q4_0"...: see ContextParams)."""

    def __init__(self, model, n_ctx=4096, n_seq=1, n_batch=512, n_threads=0, embeddings=False,
                 cache_type_k="f16", cache_type_v="f16"):
        lib = _library()
        params = lib.lantern_context_default_params()
        params.n_ctx, params.n_seq, params.n_batch, params.n_threads = n_ctx, n_seq, n_batch, n_threads
        params.embeddings = int(embeddings)
        params.cache_type_k, params.cache_type_v = cache_type_k.encode(), cache_type_v.encode()
        if not model._h:
            raise LanternError(-1, "the model is closed")  # LANTERN_ERR_INVALID_ARGUMENT
        self._model = model  # the model must outlive the context
        self._h = lib.lantern_context_new(model._h, ctypes.byref(params))
        if not self._h:
            _raise()
        model._contexts.add(self)
        self.n_vocab = model.n_vocab
        self.n_ctx = _check(lib.lantern_context_n_ctx(self._h))

    def close(self):
        if getattr(self, "_h", None):
            _library().lantern_context_free(self._h)
            self._h = None

    __del__ = close

    def _handle(self):
        if not self._h:
            raise LanternError(-1, "the context is closed")  # LANTERN_ERR_INVALID_ARGUMENT
        return self._h

    def decode(self, tokens, seq=0, positions=None, logits=None):
        """Runs tokens in sequence `seq` (positions: where they go, by default after what it holds;
        logits: which tokens' logits to keep, by default the last one's)."""
        n = len(tokens)
        pos = _ids(positions) if positions is not None else None
        want = (ctypes.c_int8 * n)(*[int(bool(x)) for x in logits]) if logits is not None else None
        _check(_library().lantern_decode(self._handle(), _ids(tokens), pos, _ids([seq] * n), want, n))

    def logits(self, i=0):
        """The i-th kept logits of the last decode, as a ctypes float array (valid until the next decode)."""
        ptr = _library().lantern_logits(self._handle(), i)
        if not ptr:
            _raise()
        return ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float * self.n_vocab)).contents

    def embeddings(self, i=0):
        """The i-th output's final hidden state (a context made with embeddings=True), a
        ctypes float array valid until the next decode."""
        ptr = _library().lantern_embeddings(self._handle(), i)
        if not ptr:
            _raise()
        n_embd = _check(_library().lantern_model_n_embd(self._model._h))
        return ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float * n_embd)).contents

    def sequence_length(self, seq=0):
        return _check(_library().lantern_sequence_length(self._handle(), seq))

    def clear_sequence(self, seq=0):
        _check(_library().lantern_clear_sequence(self._handle(), seq))

    def save_sequence(self, path, tokens=None, seq=0):
        """Writes sequence `seq`'s state (its KV cache, and `tokens`, all it holds, when given) to `path`."""
        tokens = list(tokens or [])
        _check(_library().lantern_sequence_save_file(self._handle(), seq, os.fsencode(path), _ids(tokens) if tokens else None,
                                                     len(tokens)))

    def load_sequence(self, path, seq=0):
        """Replaces sequence `seq` with a saved state; returns the tokens saved with it ([] if none). To
        sample after it, decode its last token again at position sequence_length() - 1."""
        out = (ctypes.c_int32 * self.n_ctx)()  # a state holds at most n_ctx positions
        n = _check(_library().lantern_sequence_load_file(self._handle(), seq, os.fsencode(path), out, self.n_ctx))
        return list(out[:n])


class Sampler:
    """llama.cpp's sampling chain: logit_bias ({token: bias}, -inf bans), penalties, top-k,
    top-p, min-p, temperature (0: greedy); seed None draws one. json_object: the output is
    one JSON object (needs `model`, whose vocabulary it checks tokens against), beginning with
    one of json_prefixes when given (a required tool call's); json_schema (a dict or its JSON
    text): the output follows that schema (OpenAI's structured-output subset); grammar (GBNF
    text, llama.cpp's format): the output matches its root rule. Also llama.cpp's typical_p,
    top_n_sigma, xtc_probability, xtc_threshold, dry_multiplier, dry_base, dry_allowed_length,
    dry_penalty_last_n, dry_sequence_breakers (a list of texts), mirostat (1 or 2), mirostat_tau and
    mirostat_eta, as keyword arguments."""

    def __init__(self, n_vocab, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.0,
                 repeat_last_n=64, frequency_penalty=0.0, presence_penalty=0.0, seed=None, logit_bias=None,
                 json_object=False, json_prefixes=None, json_schema=None, grammar=None, model=None,
                 dry_sequence_breakers=None, **more):
        lib = _library()
        p = lib.lantern_sampler_default_params()
        p.temperature, p.top_k, p.top_p, p.min_p = temperature, top_k, top_p, min_p
        p.repeat_penalty, p.repeat_last_n = repeat_penalty, repeat_last_n
        p.frequency_penalty, p.presence_penalty = frequency_penalty, presence_penalty
        if seed is not None:
            p.seed = seed
        bias = dict(logit_bias or {})
        self._bias = (_ids(list(bias)), (ctypes.c_float * len(bias))(*bias.values()))
        p.bias_tokens, p.bias_values, p.n_bias = self._bias[0], self._bias[1], len(bias)
        p.json_object = int(json_object)
        prefixes = [x.encode() for x in (json_prefixes or [])]
        self._prefixes = (ctypes.c_char_p * len(prefixes))(*prefixes)
        p.json_prefixes, p.n_json_prefixes = self._prefixes, len(prefixes)
        if json_schema is not None:
            self._schema = (json_schema if isinstance(json_schema, str) else json.dumps(json_schema)).encode()
            p.json_schema = self._schema
        if grammar is not None:
            self._grammar = grammar.encode()
            p.grammar = self._grammar
        for name, value in more.items():
            if name not in ("typical_p", "top_n_sigma", "xtc_probability", "xtc_threshold", "dry_multiplier",
                            "dry_base", "dry_allowed_length", "dry_penalty_last_n", "mirostat", "mirostat_tau",
                            "mirostat_eta"):
                raise TypeError(f"Sampler() got an unexpected keyword argument '{name}'")
            setattr(p, name, value)
        if dry_sequence_breakers is not None:
            breakers = [x.encode() for x in dry_sequence_breakers]
            self._breakers = (ctypes.c_char_p * max(len(breakers), 1))(*breakers)
            p.dry_sequence_breakers, p.n_dry_sequence_breakers = self._breakers, len(breakers)
        self._model = model  # the model must outlive the sampler
        if model is not None:
            self._h = lib.lantern_sampler_new_for_model(ctypes.byref(p), model._h)
        else:
            self._h = lib.lantern_sampler_new(ctypes.byref(p), n_vocab)
        if not self._h:
            _raise()
        self.n_vocab = n_vocab

    def close(self):
        if getattr(self, "_h", None):
            _library().lantern_sampler_free(self._h)
            self._h = None

    __del__ = close

    def sample(self, logits):
        """The next token from n_vocab logits (Context.logits(), or any float sequence)."""
        if not isinstance(logits, ctypes.Array):
            logits = (ctypes.c_float * self.n_vocab)(*logits)
        return _check(_library().lantern_sampler_sample(self._h, ctypes.cast(logits, _fp)))

    def accept(self, token):
        _check(_library().lantern_sampler_accept(self._h, token))

    def restart_output(self):
        """The next token begins a new output (a chat's next reply): a JSON or grammar
        constraint starts over; penalties and the random sequence go on."""
        _library().lantern_sampler_restart_output(self._h)
