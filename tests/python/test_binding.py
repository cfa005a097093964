"""The Python binding (bindings/python/lantern.py) over the C API's shared
library: the build's liblantern_c (LANTERN_BUILD_DIR, else build/) and the
default model (LANTERN_MODEL, else models/). Skipped when either is missing."""
import math
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIB = pathlib.Path(os.environ.get("LANTERN_BUILD_DIR", ROOT / "build")) / "lib" / "liblantern_c.so"
MODEL = pathlib.Path(os.environ.get("LANTERN_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
QUESTION = "What is the capital of France? Answer in one sentence."


@pytest.fixture(scope="module")
def lantern():
    if not LIB.exists() or not MODEL.exists():
        pytest.skip(f"needs {LIB} and {MODEL}")
    os.environ["LANTERN_LIBRARY"] = str(LIB)
    sys.path.insert(0, str(ROOT / "bindings" / "python"))
    import lantern as module
    return module


@pytest.fixture(scope="module")
def model(lantern):
    with lantern.Model(MODEL, n_threads=2) as m:
        yield m


def test_chat_gives_the_golden_answer(model):
    assert model.chat([{"role": "user", "content": QUESTION}], max_tokens=32, temperature=0) == \
        "The capital of France is Paris."


def test_streamed_pieces_join_to_the_answer(model):
    pieces = list(model.chat_stream([{"role": "user", "content": QUESTION}], max_tokens=32, temperature=0))
    assert len(pieces) > 3
    assert "".join(pieces) == "The capital of France is Paris."
    # Characters split across tokens come out whole.
    text = "".join(model.stream("Le café et la crème brûlée", max_tokens=24, temperature=0))
    assert "\ufffd" not in text


def test_json_object_output(model):
    # A small object asked for: to the capital question in one sentence the
    # AVX2 kernels' greedy reply lists keys until max_tokens.
    import json
    ask = 'Give the capital of France as a JSON object with the key "capital".'
    reply = model.chat([{"role": "user", "content": ask}], max_tokens=96, temperature=0, json_object=True)
    obj = json.loads(reply)
    assert isinstance(obj, dict) and "Paris" in json.dumps(obj), reply


def test_grammar_output(lantern, model):
    grammar = 'root ::= ("yes" | "no") "."'
    out = model.generate("Is water wet? Answer:", max_tokens=8, temperature=0, grammar=grammar)
    assert out in ("yes.", "no."), out
    # Matched whole, only an end token can come, until a new output begins.
    ctx = lantern.Context(model, n_ctx=64)
    ctx.decode(model.tokenize("Is water wet? Answer:", add_special=False))
    logits = ctx.logits()
    s = lantern.Sampler(model.n_vocab, temperature=0, grammar='root ::= "Yes"', model=model)
    first = s.sample(logits)
    assert model.token_to_piece(first) == "Yes"
    assert s.sample(logits) != first
    s.restart_output()
    assert s.sample(logits) == first
    with pytest.raises(lantern.LanternError) as e:
        lantern.Sampler(model.n_vocab, grammar="root ::= x", model=model)
    assert "line 1, column 10" in str(e.value)


def test_more_samplers(lantern, model):
    loop = "the cat the cat the cat the cat"
    plain = model.generate(loop, max_tokens=24, temperature=0)
    assert "the cat the cat the cat" in plain
    assert "the cat the cat" not in model.generate(loop, max_tokens=24, temperature=0, dry_multiplier=0.8)
    assert model.generate(loop, max_tokens=24, temperature=0, dry_multiplier=0.8,
                          dry_sequence_breakers=[" ", "t"]) == plain
    assert model.generate("Hello", max_tokens=8, seed=1, mirostat=2, typical_p=0.9, xtc_probability=0.3)
    with pytest.raises(lantern.LanternError):
        lantern.Sampler(model.n_vocab, mirostat=3)
    with pytest.raises(TypeError):
        lantern.Sampler(model.n_vocab, mirostatt=2)


WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def test_tool_calls(model):
    import json
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    message = model.chat_message(question, tools=WEATHER, tool_choice="required", max_tokens=96, temperature=0)
    assert message["content"] is None
    [call] = message["tool_calls"]
    assert call["type"] == "function" and len(call["id"]) == 9
    assert call["function"]["name"] == "get_weather"
    assert isinstance(json.loads(call["function"]["arguments"]), dict)
    # The call and its answer go back into the conversation.
    convo = question + [{"role": "assistant", "content": None, "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": call["id"], "content": '{"celsius": 21}'}]
    after = model.chat_message(convo, tools=WEATHER, tool_choice="none", max_tokens=16, temperature=0)
    assert after["role"] == "assistant" and isinstance(after["content"], str) and "tool_calls" not in after
    # Without tools it is a plain chat.
    assert model.chat_message([{"role": "user", "content": QUESTION}], max_tokens=32, temperature=0) == \
        {"role": "assistant", "content": "The capital of France is Paris."}


def test_reasoning_and_template_kwargs(model):
    # A template whose generation prompt opens a <think> block unless
    # enable_thinking is false: the reply inside the block is the message's
    # reasoning_content; with the block closed by the template it is content.
    template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "<|im_start|>assistant\n{% if enable_thinking is defined and enable_thinking is false %}"
                "<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}")
    question = [{"role": "user", "content": QUESTION}]
    thinking = model.chat_message(question, template=template, max_tokens=32, temperature=0)
    assert thinking["content"] == "" and "Paris" in thinking["reasoning_content"]
    plain = model.chat_message(question, template=template, template_kwargs={"enable_thinking": False},
                               max_tokens=32, temperature=0)
    assert plain["content"].strip() and "reasoning_content" not in plain


def test_tokens_round_trip_and_long_text(model):
    text = "Lantern runs GGUF models. " * 40  # longer than the first text buffer
    ids = model.tokenize(text, add_special=False)
    assert len(ids) > 100
    assert model.detokenize(ids) == text
    assert model.tokenize("<|im_start|>", add_special=False, parse_special=True) == [1]
    assert "<|im_start|>user" in model.apply_chat_template([{"role": "user", "content": "Hi"}], template="chatml")


def test_decode_sample_and_bias(lantern, model):
    ctx = lantern.Context(model, n_ctx=64, n_seq=2)
    ids = model.tokenize("Once upon a time", add_special=False)
    ctx.decode(ids)
    first = list(ctx.logits())
    assert len(first) == model.n_vocab and all(math.isfinite(x) for x in first[:1000])
    ctx.decode(ids, seq=1)
    again = ctx.logits()
    assert max(abs(again[i] - first[i]) for i in range(0, model.n_vocab, 97)) < 1e-3
    assert (ctx.sequence_length(0), ctx.sequence_length(1)) == (len(ids), len(ids))
    greedy = lantern.Sampler(model.n_vocab, temperature=0)
    top = greedy.sample(first)
    assert first[top] == max(first)
    assert lantern.Sampler(model.n_vocab, temperature=0, logit_bias={top: -math.inf}).sample(first) != top
    assert lantern.Sampler(model.n_vocab, temperature=0.7, seed=1, logit_bias={42: 100}).sample(first) == 42
    # A base-model style completion through the high-level call.
    out = model.generate("Once upon a time", max_tokens=8, temperature=0)
    assert 0 < len(out) < 200


def test_sequence_state_file(lantern, model, tmp_path):
    ids = model.tokenize("Once upon a time, in a small village", add_special=False)
    ctx = lantern.Context(model, n_ctx=64)
    ctx.decode(ids)
    path = tmp_path / "state.bin"
    ctx.save_sequence(path, ids)
    ctx.decode([ids[-1]], positions=[len(ids) - 1])
    want = list(ctx.logits())
    other = lantern.Context(model, n_ctx=64, n_seq=2)
    assert other.load_sequence(path, seq=1) == ids
    assert other.sequence_length(1) == len(ids)
    other.decode([ids[-1]], seq=1, positions=[len(ids) - 1])
    assert list(other.logits()) == want
    path.write_bytes(path.read_bytes()[:-1])  # truncated: refused, the sequence kept
    with pytest.raises(lantern.LanternError) as e:
        other.load_sequence(path, seq=0)
    assert e.value.code == -3 and "checksum" in str(e.value)  # LANTERN_ERR_FORMAT
    assert other.sequence_length(0) == 0


def test_build_and_load_progress(lantern):
    assert lantern.backends()[0] == "cpu"
    assert lantern.cpu_kernels()
    seen = []
    with lantern.Model(MODEL, n_threads=2, progress=seen.append):
        pass
    assert len(seen) > 1 and seen == sorted(seen) and seen[-1] == 1.0


def test_closing_the_model_closes_its_contexts(lantern):
    m = lantern.Model(MODEL, n_threads=2)
    ctx = lantern.Context(m, n_ctx=32)
    ctx.decode(m.tokenize("Hi"))
    m.close()  # the context goes first: no use of a freed model, now or at exit
    with pytest.raises(lantern.LanternError):
        ctx.decode([1])
    with pytest.raises(lantern.LanternError):
        lantern.Context(m)
    del ctx


def test_embeddings_context(lantern, model):
    ctx = lantern.Context(model, n_ctx=64, embeddings=True)
    ids = model.tokenize("The cat sat on the mat.", add_special=False)
    ctx.decode(ids, logits=[True] * len(ids))
    vectors = [list(ctx.embeddings(i)) for i in range(len(ids))]
    assert len(vectors[0]) == 576 and vectors[0] != vectors[-1]
    with pytest.raises(lantern.LanternError):
        ctx.logits(0)


def test_cache_types(lantern, model):
    ids = model.tokenize("Once upon a time", add_special=False)
    best = []
    for kind in ("f16", "q8_0"):
        ctx = lantern.Context(model, n_ctx=32, cache_type_k=kind, cache_type_v=kind)
        ctx.decode(ids)
        logits = list(ctx.logits())
        best.append(logits.index(max(logits)))
    assert best[0] == best[1]
    with pytest.raises(lantern.LanternError) as e:
        lantern.Context(model, n_ctx=32, cache_type_k="q4_K")
    assert e.value.code == -1 and "q4_K" in str(e.value)  # LANTERN_ERR_INVALID_ARGUMENT


def test_errors_raise(lantern, model):
    with pytest.raises(lantern.LanternError) as e:
        lantern.Model("/nonexistent/model.gguf")
    assert e.value.code == -2 and "/nonexistent/model.gguf" in str(e.value)  # LANTERN_ERR_IO
    ctx = lantern.Context(model, n_ctx=8)
    with pytest.raises(lantern.LanternError) as e:
        ctx.decode([1] * 20)
    assert e.value.code == -7  # LANTERN_ERR_CONTEXT_FULL
    assert ctx.sequence_length() == 0
    with pytest.raises(lantern.LanternError):
        lantern.Sampler(model.n_vocab, top_p=2.0)
    with pytest.raises(lantern.LanternError):
        model.detokenize([model.n_vocab + 5])


def test_lora_adapters(lantern, tmp_path):
    import subprocess
    base, adapter = tmp_path / "tiny-f32.gguf", tmp_path / "tiny-lora.gguf"
    ref = ROOT / "tests" / "reference"
    subprocess.run([sys.executable, ref / "make_tiny_model.py", "--type", "f32", "llama", base], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, ref / "make_lora.py", base, adapter], check=True, capture_output=True)

    def last_logits(**kw):
        with lantern.Model(base, n_threads=2, **kw) as m:
            ctx = lantern.Context(m, n_ctx=32)
            ctx.decode([5, 42, 7, 99])
            return list(ctx.logits())

    plain = last_logits()
    assert last_logits(lora=[(adapter, 0.0)]) == plain
    adapted = last_logits(lora=[adapter])
    assert max(abs(a - b) for a, b in zip(adapted, plain)) > 1e-2
    halves = last_logits(lora=[(str(adapter), 0.5), (adapter, 0.5)])
    assert max(abs(a - b) for a, b in zip(halves, adapted)) < 1e-3 * max(abs(x) for x in adapted)
    with pytest.raises(lantern.LanternError) as e:
        lantern.Model(base, lora=[base])
    assert "general.type is not" in str(e.value)


def test_fill_in_middle(lantern):
    testdata = pathlib.Path(os.environ.get("LANTERN_TESTDATA", ROOT.parent / "shared" / "testdata"))
    with lantern.Model(testdata / "vocab" / "ggml-vocab-starcoder.gguf", vocab_only=True) as coder:
        ids = coder.fill_in_middle("def f():\n    ", "\n", max_tokens=5)
        assert len(ids) == 5
        assert coder.detokenize([ids[0], ids[-1]], render_special=True) == "<fim_prefix><fim_middle>"
    with lantern.Model(MODEL, vocab_only=True) as m:
        with pytest.raises(lantern.LanternError) as e:
            m.fill_in_middle("def f():", "\n")
    assert "fill-in-the-middle" in str(e.value)


def test_rope_overrides(lantern, tmp_path):
    import subprocess
    ref = ROOT / "tests" / "reference"
    plain, yarn = tmp_path / "tiny-qwen2.gguf", tmp_path / "tiny-qwen2-yarn.gguf"
    subprocess.run([sys.executable, ref / "make_tiny_model.py", "qwen2", plain], check=True, capture_output=True)
    subprocess.run([sys.executable, ref / "make_tiny_model.py", "qwen2", yarn, "--yarn", "4"], check=True,
                   capture_output=True)

    def logits(path, **kw):
        with lantern.Model(path, n_threads=2, **kw) as m:
            ctx = lantern.Context(m, n_ctx=32)
            ctx.decode([5, 42, 7, 99, 100, 3])
            return list(ctx.logits()), m.n_ctx_max

    keyed, n_max = logits(yarn)
    assert n_max == 1024
    overridden, n_max = logits(plain, rope_scaling="yarn", rope_freq_scale=0.25, yarn_orig_ctx=256)
    assert overridden == keyed and n_max == 1024
    assert logits(plain)[0] != keyed
    with pytest.raises(lantern.LanternError) as e:
        lantern.Model(plain, rope_scaling="cubic")
    assert "scaling 'cubic' is not one of none, linear, yarn" in str(e.value)
    with pytest.raises(TypeError):
        lantern.Model(plain, rope_sclaing="yarn")
