"""`lantern serve` through OpenAI's own Python client (the `openai` package): the
responses, streamed chunks, tool calls, embeddings and errors must parse as that
client parses OpenAI's. Needs the built `lantern` (LANTERN_BUILD_DIR, else build/) and
the default model; skipped when either or the package is missing."""
import json
import math
import os
import pathlib
import re
import subprocess

import pytest

openai = pytest.importorskip("openai")

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("LANTERN_BUILD_DIR", ROOT / "build")) / "bin" / "lantern"
MODEL = pathlib.Path(os.environ.get("LANTERN_MODEL", ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
QUESTION = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
ANSWER = "The capital of France is Paris."
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def start(*args):
    """A server on a free port; returns (process, base URL)."""
    if not BIN.exists() or not MODEL.exists():
        pytest.skip(f"needs {BIN} and {MODEL}")
    proc = subprocess.Popen([str(BIN), "serve", "-m", str(MODEL), "--port", "0", "-t", "2", "--parallel", "2",
                             "-c", "1024", *args], stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        m = re.search(r"listening on (http://[^ ]+)", line)
        if m:
            return proc, m.group(1) + "/v1"
    proc.kill()
    pytest.fail("the server did not start")


@pytest.fixture(scope="module")
def client():
    proc, url = start()
    try:
        yield openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_chat_and_its_stream(client):
    r = client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=32)
    assert r.choices[0].message.content == ANSWER
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 20 and r.usage.completion_tokens > 0
    chunks = list(client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=32,
                                                 stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens


def test_logprobs_and_choices(client):
    r = client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=8, logprobs=True,
                                       top_logprobs=2, n=2, seed=1)
    assert len(r.choices) == 2
    tokens = r.choices[0].logprobs.content
    assert tokens and all(t.logprob <= 0 and len(t.top_logprobs) == 2 for t in tokens)


def test_tool_calls_whole_and_streamed(client):
    kw = dict(model="m", messages=[{"role": "user", "content": "What is the weather in Paris?"}], tools=WEATHER,
              tool_choice="required", temperature=0, max_tokens=96)
    r = client.chat.completions.create(**kw)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    [call] = c.message.tool_calls
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments), dict)
    # Streamed, the client's delta objects carry the same call.
    name, args, finish = "", "", None
    for chunk in client.chat.completions.create(stream=True, **kw):
        d = chunk.choices[0].delta
        for tc in d.tool_calls or []:
            name += tc.function.name or ""
            args += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert (name, args, finish) == ("get_weather", call.function.arguments, "tool_calls")
    # The call and its answer go back in the next request.
    follow = client.chat.completions.create(
        model="m", temperature=0, max_tokens=16, tools=WEATHER,
        messages=kw["messages"] + [c.message.model_dump(exclude_none=True),
                                   {"role": "tool", "tool_call_id": call.id, "content": '{"celsius": 21}'}])
    assert follow.choices[0].message.role == "assistant"


def test_structured_output(client):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Describe Paris as JSON."}],
                                       temperature=0, max_tokens=64,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "city", "schema": schema, "strict": True}})
    v = json.loads(r.choices[0].message.content)
    assert set(v) == {"city", "population"} and isinstance(v["population"], int)


def test_grammar_through_extra_body(client):
    grammar = 'root ::= "The answer is " [A-Z] [a-z]+ "."'
    r = client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=32,
                                       extra_body={"grammar": grammar})
    assert re.fullmatch(r"The answer is [A-Z][a-z]+\.", r.choices[0].message.content), r.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=QUESTION, extra_body={"grammar": "root ::= ("})
    assert "grammar" in str(e.value)


def test_pydantic_models_through_parse(client):
    # The client turns nested pydantic models into a strict schema with $defs
    # and $ref, and parses the reply back into them.
    from pydantic import BaseModel, Field

    class City(BaseModel):
        name: str
        population: int

    class Answer(BaseModel):
        city: City
        landmarks: list[str] = Field(max_length=2)
        capital: bool

    r = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "Tell me about Paris."}],
                                      response_format=Answer, temperature=0, max_tokens=160)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Answer) and isinstance(parsed.city, City)
    assert len(parsed.landmarks) <= 2


def test_pydantic_union_of_models(client):
    # A union of two models is an anyOf of two object schemas: the reply is
    # held to whichever still fits as it is written, and parses back.
    from typing import Literal, Union

    from pydantic import BaseModel, Field

    class Cat(BaseModel):
        kind: Literal["cat"]
        lives: int

    class Dog(BaseModel):
        kind: Literal["dog"]
        good: bool

    class Pets(BaseModel):
        pets: list[Union[Cat, Dog]] = Field(min_length=1, max_length=3)

    r = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "List my pets: a dog and a cat."}],
                                      response_format=Pets, temperature=0, max_tokens=300)
    parsed = r.choices[0].message.parsed
    assert isinstance(parsed, Pets) and 1 <= len(parsed.pets) <= 3
    assert all(isinstance(p, (Cat, Dog)) for p in parsed.pets)


def test_pydantic_ranges_and_formats(client):
    # Field(ge=, gt=, le=) become minimum/exclusiveMinimum/maximum, multiple_of
    # multipleOf, dates, datetimes, UUIDs and durations string formats: each is
    # held, and parses back.
    import datetime
    import uuid

    from pydantic import BaseModel, Field

    class Booking(BaseModel):
        guests: int = Field(ge=1, le=8)
        rating: float = Field(gt=0, le=5)
        deposit: int = Field(multiple_of=10, ge=0)
        day: datetime.date
        at: datetime.datetime
        ref: uuid.UUID
        stay: datetime.timedelta

    r = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "Book a table for two."}],
                                      response_format=Booking, temperature=0, max_tokens=300)
    b = r.choices[0].message.parsed
    assert isinstance(b, Booking) and 1 <= b.guests <= 8 and 0 < b.rating <= 5 and b.deposit % 10 == 0
    assert isinstance(b.day, datetime.date) and isinstance(b.at, datetime.datetime) and isinstance(b.ref, uuid.UUID)
    assert isinstance(b.stay, datetime.timedelta)


def test_pydantic_patterns(client):
    # Field(pattern=...) becomes a string's pattern: every string the model
    # writes matches it, and the reply parses back; so do formats held as
    # patterns.
    import re

    from pydantic import BaseModel, Field

    class Flight(BaseModel):
        number: str = Field(pattern=r"^[A-Z]{2}\d{3,4}$")
        gate: str = Field(pattern=r"^[A-F]-?\d{1,2}$")
        seats: list[str] = Field(max_length=3)

    r = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "My flight to Rome, please."}],
                                      response_format=Flight, temperature=0, max_tokens=200)
    f = r.choices[0].message.parsed
    assert isinstance(f, Flight)
    assert re.fullmatch(r"[A-Z]{2}\d{3,4}", f.number) and re.fullmatch(r"[A-F]-?\d{1,2}", f.gate)

    # IPv4Address and AnyUrl: formats ipv4 and uri, held as patterns.
    from ipaddress import IPv4Address

    from pydantic import AnyUrl

    class Server(BaseModel):
        ip: IPv4Address
        docs: AnyUrl

    r = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "Where is the web server?"}],
                                      response_format=Server, temperature=0, max_tokens=200)
    assert isinstance(r.choices[0].message.parsed, Server)


def test_pydantic_dicts_and_tuples(client):
    # dict[str, X] is an object whose keys are free and whose values follow
    # additionalProperties (beside min/maxProperties from the field's
    # lengths); a tuple is prefixItems, one schema per element; a fractional
    # multiple_of a number of few decimals.
    from pydantic import BaseModel, Field

    class Inventory(BaseModel):
        counts: dict[str, int] = Field(min_length=1, max_length=3)
        origin: tuple[float, float]
        notes: dict[str, str] = Field(max_length=2)
        weight: float = Field(multiple_of=0.25, gt=0)

    r = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "Count the fruit in my kitchen."}],
                                      response_format=Inventory, temperature=0, max_tokens=200)
    inv = r.choices[0].message.parsed
    assert isinstance(inv, Inventory) and 1 <= len(inv.counts) <= 3 and len(inv.notes) <= 2
    assert all(isinstance(v, int) for v in inv.counts.values()) and len(inv.origin) == 2
    assert inv.weight > 0 and (inv.weight * 4).is_integer()


# A reasoning model's template (Qwen3's switch, DeepSeek-R1's open block):
# the generation prompt opens a <think> block unless enable_thinking is false.
THINKING_TEMPLATE = """{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% else %}<think>
{% endif %}{% endif %}"""


def test_reasoning_content_and_template_kwargs():
    # The reply inside the open block is reasoning_content (whole and
    # streamed); chat_template_kwargs reach the template (thinking off: the
    # prompt closes the block, the reply is content); reasoning_format none
    # leaves everything in content.
    proc, url = start("--chat-template", THINKING_TEMPLATE)
    try:
        c = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        r = c.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=48)
        m = r.choices[0].message
        assert m.content == "" and "Paris" in m.reasoning_content
        chunks = list(c.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=48, stream=True))
        deltas = [ch.choices[0].delta for ch in chunks if ch.choices]
        assert "".join(getattr(d, "reasoning_content", None) or "" for d in deltas) == m.reasoning_content
        assert "".join(d.content or "" for d in deltas) == ""
        off = c.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=48,
                                        extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        assert off.choices[0].message.content.strip() and getattr(off.choices[0].message, "reasoning_content", None) is None
        raw = c.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=48,
                                        extra_body={"reasoning_format": "none"})
        assert raw.choices[0].message.content.strip() == m.reasoning_content
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="m", messages=QUESTION, extra_body={"chat_template_kwargs": [1]})
        assert "chat_template_kwargs" in str(e.value)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    # The server's default (--reasoning-format none), which a request overrides.
    proc, url = start("--chat-template", THINKING_TEMPLATE, "--reasoning-format", "none")
    try:
        c = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        raw = c.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=48)
        assert raw.choices[0].message.content.strip() == m.reasoning_content
        split = c.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=48,
                                          extra_body={"reasoning_format": "auto"})
        assert split.choices[0].message.reasoning_content == m.reasoning_content
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_legacy_function_call(client):
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Weather in Oslo?"}],
                                       functions=[WEATHER[0]["function"]], function_call={"name": "get_weather"},
                                       temperature=0, max_tokens=64)
    assert r.choices[0].finish_reason == "function_call"
    assert r.choices[0].message.function_call.name == "get_weather"
    assert isinstance(json.loads(r.choices[0].message.function_call.arguments), dict)


def test_completions_embeddings_models(client):
    r = client.completions.create(model="m", prompt="The capital of France is", temperature=0, max_tokens=4)
    assert r.choices[0].text.strip()
    e = client.embeddings.create(model="m", input=["Paris", "a bowl of soup"])
    assert len(e.data) == 2
    assert all(abs(math.sqrt(sum(x * x for x in d.embedding)) - 1.0) < 1e-3 for d in e.data)
    assert [m.object for m in client.models.list().data] == ["model"]


def test_errors_are_openai_errors(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=QUESTION, temperature=7000)
    assert "temperature" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=QUESTION, tools=WEATHER,
                                       tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert "get_time" in str(e.value)


def test_api_key():
    proc, url = start("--api-key", "secret")
    try:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key="wrong", max_retries=0).models.list()
        assert openai.OpenAI(base_url=url, api_key="secret", max_retries=0).models.list().data
    finally:
        proc.terminate()
        proc.wait(timeout=30)
