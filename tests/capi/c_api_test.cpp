// The C API (include/lantern/lantern_c.h) through the shared library alone:
// this binary links liblantern_c, not the engine's static libraries.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "../unit/test_util.h"
#include "lantern/lantern_c.h"

#include <nlohmann/json.hpp>

extern "C" int c_chat_answer(const char* model_path, const char* question, int max_tokens, char* out, int capacity);

namespace lantern::test {
namespace {

struct ModelFixture : ::testing::Test {
    static void SetUpTestSuite() {
        lantern_model_params p = lantern_model_default_params();
        p.n_threads = 2;
        model = lantern_model_load(default_model_path().c_str(), &p);
        ASSERT_NE(model, nullptr) << lantern_last_error();
    }
    static void TearDownTestSuite() { lantern_model_free(model); }
    static lantern_model* model;
};
lantern_model* ModelFixture::model = nullptr;

// The README's question through a C program: the golden answer the CLI and
// the server give.
TEST(CApi, ChatFromC) {
    char out[512];
    const int n = c_chat_answer(default_model_path().c_str(), "What is the capital of France? Answer in one sentence.", 32,
                                out, sizeof out);
    ASSERT_GT(n, 0) << lantern_last_error();
    EXPECT_STREQ(out, "The capital of France is Paris.");
}

TEST_F(ModelFixture, TextRoundTripsAndBuffersReportTheirLength) {
    EXPECT_EQ(lantern_model_n_vocab(model), 49152);
    EXPECT_GT(lantern_model_n_embd(model), 0);
    EXPECT_EQ(lantern_model_n_layer(model), 30);
    EXPECT_NE(std::string(lantern_model_description(model)).find("Q4_1"), std::string::npos);
    const std::string text = "Hello world, this is Lantern.";
    // Capacity 0 asks for the count.
    const int n = lantern_tokenize(model, text.data(), text.size(), 0, 0, nullptr, 0);
    ASSERT_GT(n, 2);
    std::vector<int32_t> ids(n);
    ASSERT_EQ(lantern_tokenize(model, text.data(), text.size(), 0, 0, ids.data(), n), n);
    char buf[8];
    const int len = lantern_detokenize(model, ids.data(), n, 0, buf, sizeof buf);
    EXPECT_EQ(len, static_cast<int>(text.size()));
    EXPECT_EQ(std::string(buf), text.substr(0, sizeof buf - 1));  // truncated, terminated
    std::string full(len + 1, '\0');
    ASSERT_EQ(lantern_detokenize(model, ids.data(), n, 0, full.data(), len + 1), len);
    EXPECT_EQ(full.c_str(), text);
    // Special tokens parse only when asked.
    const std::string im = "<|im_start|>";
    EXPECT_EQ(lantern_tokenize(model, im.data(), im.size(), 0, 1, nullptr, 0), 1);
    EXPECT_GT(lantern_tokenize(model, im.data(), im.size(), 0, 0, nullptr, 0), 1);
    // A conversation through a built-in template.
    const char* roles[] = {"system", "user"};
    const char* contents[] = {"Be brief.", "Hi"};
    char chat[512];
    ASSERT_GT(lantern_chat_apply(model, roles, contents, 2, 1, "chatml", chat, sizeof chat), 0) << lantern_last_error();
    EXPECT_NE(std::string(chat).find("<|im_start|>user\nHi<|im_end|>"), std::string::npos) << chat;
}

TEST_F(ModelFixture, DecodeSampleAndContextLimits) {
    lantern_context_params cp = lantern_context_default_params();
    cp.n_ctx = 16;
    cp.n_seq = 2;
    lantern_context* c = lantern_context_new(model, &cp);
    ASSERT_NE(c, nullptr) << lantern_last_error();
    const std::string text = "Once upon a time";
    int32_t ids[32];
    const int n = lantern_tokenize(model, text.data(), text.size(), 0, 0, ids, 32);
    ASSERT_GT(n, 0);
    ASSERT_EQ(lantern_decode(c, ids, nullptr, nullptr, nullptr, n), LANTERN_OK) << lantern_last_error();
    EXPECT_EQ(lantern_n_outputs(c), 1);
    EXPECT_EQ(lantern_sequence_length(c, 0), n);
    EXPECT_EQ(lantern_sequence_length(c, 1), 0);
    const float* logits = lantern_logits(c, 0);
    ASSERT_NE(logits, nullptr);
    std::vector<float> first(logits, logits + lantern_model_n_vocab(model));
    EXPECT_EQ(lantern_logits(c, 1), nullptr);
    EXPECT_EQ(lantern_last_error_code(), LANTERN_ERR_INVALID_ARGUMENT);

    // The same tokens in sequence 1, positions given: the same logits.
    std::vector<int32_t> pos(n), seq(n, 1);
    for (int i = 0; i < n; ++i) pos[i] = i;
    ASSERT_EQ(lantern_decode(c, ids, pos.data(), seq.data(), nullptr, n), LANTERN_OK) << lantern_last_error();
    logits = lantern_logits(c, 0);
    for (size_t i = 0; i < first.size(); i += 997) EXPECT_NEAR(logits[i], first[i], 1e-3f) << i;

    // Greedy with a bias that forces token 42, then one that bans the argmax.
    lantern_sampler_params sp = lantern_sampler_default_params();
    sp.temperature = 0.0f;
    const int32_t forced = 42;
    const float plus = 100.0f;
    sp.bias_tokens = &forced;
    sp.bias_values = &plus;
    sp.n_bias = 1;
    lantern_sampler* s = lantern_sampler_new(&sp, lantern_model_n_vocab(model));
    ASSERT_NE(s, nullptr) << lantern_last_error();
    EXPECT_EQ(lantern_sampler_sample(s, first.data()), 42);
    lantern_sampler_free(s);
    sp.n_bias = 0;
    s = lantern_sampler_new(&sp, lantern_model_n_vocab(model));
    const int32_t top = lantern_sampler_sample(s, first.data());
    const float ban = -INFINITY;
    sp.bias_tokens = &top;
    sp.bias_values = &ban;
    sp.n_bias = 1;
    lantern_sampler* banned = lantern_sampler_new(&sp, lantern_model_n_vocab(model));
    EXPECT_NE(lantern_sampler_sample(banned, first.data()), top);
    EXPECT_EQ(lantern_sampler_accept(s, -5), LANTERN_ERR_INVALID_ARGUMENT);
    lantern_sampler_free(banned);
    lantern_sampler_free(s);

    // Past n_ctx: CONTEXT_FULL, and the sequence keeps what it held.
    std::vector<int32_t> many(20, ids[0]);
    EXPECT_EQ(lantern_decode(c, many.data(), nullptr, nullptr, nullptr, 20), LANTERN_ERR_CONTEXT_FULL);
    EXPECT_NE(std::string(lantern_last_error()).find("context"), std::string::npos) << lantern_last_error();
    EXPECT_EQ(lantern_sequence_length(c, 0), n);
    EXPECT_EQ(lantern_clear_sequence(c, 0), LANTERN_OK);
    EXPECT_EQ(lantern_sequence_length(c, 0), 0);
    EXPECT_EQ(lantern_clear_sequence(c, 7), LANTERN_ERR_INVALID_ARGUMENT);
    int32_t bad_seq = 5;
    EXPECT_EQ(lantern_decode(c, ids, nullptr, &bad_seq, nullptr, 1), LANTERN_ERR_INVALID_ARGUMENT);
    lantern_context_free(c);
}

// A sequence's state through a file: the tokens come back, the loaded
// sequence gives the saved one's logits, a missing file is an I/O error.
TEST_F(ModelFixture, SequenceStateThroughAFile) {
    lantern_context_params cp = lantern_context_default_params();
    cp.n_ctx = 32;
    cp.n_seq = 2;
    lantern_context* c = lantern_context_new(model, &cp);
    ASSERT_NE(c, nullptr) << lantern_last_error();
    const std::string text = "Once upon a time";
    int32_t ids[16];
    const int n = lantern_tokenize(model, text.data(), text.size(), 0, 0, ids, 16);
    ASSERT_EQ(lantern_decode(c, ids, nullptr, nullptr, nullptr, n), LANTERN_OK) << lantern_last_error();
    const std::string path = temp_path("c-seq-state.bin").string();
    ASSERT_EQ(lantern_sequence_save_file(c, 0, path.c_str(), ids, n), LANTERN_OK) << lantern_last_error();
    EXPECT_EQ(lantern_sequence_save_file(c, 0, path.c_str(), ids, n - 1), LANTERN_ERR_INVALID_ARGUMENT);
    int32_t back[16] = {};
    ASSERT_EQ(lantern_sequence_load_file(c, 1, path.c_str(), back, 16), n) << lantern_last_error();
    EXPECT_EQ(std::vector<int32_t>(back, back + n), std::vector<int32_t>(ids, ids + n));
    EXPECT_EQ(lantern_sequence_length(c, 1), n);
    std::vector<float> l0, l1;
    for (int s = 0; s < 2; ++s) {
        int32_t pos = n - 1;
        ASSERT_EQ(lantern_decode(c, &ids[n - 1], &pos, &s, nullptr, 1), LANTERN_OK) << lantern_last_error();
        const float* l = lantern_logits(c, 0);
        (s == 0 ? l0 : l1).assign(l, l + lantern_model_n_vocab(model));
    }
    EXPECT_EQ(l0, l1);
    EXPECT_EQ(lantern_sequence_load_file(c, 0, "/nonexistent/state.bin", back, 16), LANTERN_ERR_IO);
    EXPECT_EQ(lantern_sequence_length(c, 0), n);
    std::remove(path.c_str());
    lantern_context_free(c);
}

// The KV cache's types: q8_0 keys and values reach the same answer; a state
// saved from such a cache loads only into one of the same types; an unknown
// type is an invalid argument.
TEST_F(ModelFixture, CacheTypes) {
    lantern_context_params cp = lantern_context_default_params();
    EXPECT_EQ(cp.cache_type_k, nullptr);
    cp.n_ctx = 32;
    cp.cache_type_k = "q8_0";
    cp.cache_type_v = "q8_0";
    lantern_context* q8 = lantern_context_new(model, &cp);
    ASSERT_NE(q8, nullptr) << lantern_last_error();
    cp.cache_type_k = cp.cache_type_v = nullptr;
    lantern_context* f16 = lantern_context_new(model, &cp);
    ASSERT_NE(f16, nullptr) << lantern_last_error();
    int32_t ids[16];
    const int n = lantern_tokenize(model, "Once upon a time", 16, 0, 0, ids, 16);
    std::vector<int32_t> best;
    for (lantern_context* c : {q8, f16}) {
        ASSERT_EQ(lantern_decode(c, ids, nullptr, nullptr, nullptr, n), LANTERN_OK) << lantern_last_error();
        const float* l = lantern_logits(c, 0);
        best.push_back(static_cast<int32_t>(std::max_element(l, l + lantern_model_n_vocab(model)) - l));
    }
    EXPECT_EQ(best[0], best[1]);
    const std::string path = temp_path("c-q8-state.bin").string();
    ASSERT_EQ(lantern_sequence_save_file(q8, 0, path.c_str(), nullptr, 0), LANTERN_OK) << lantern_last_error();
    EXPECT_EQ(lantern_sequence_load_file(f16, 0, path.c_str(), nullptr, 0), LANTERN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(lantern_last_error()).find("q8_0"), std::string::npos) << lantern_last_error();
    std::remove(path.c_str());
    lantern_context_free(q8);
    lantern_context_free(f16);
    cp.cache_type_v = "q4_K";
    EXPECT_EQ(lantern_context_new(model, &cp), nullptr);
    EXPECT_EQ(lantern_last_error_code(), LANTERN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(lantern_last_error()).find("q4_K"), std::string::npos) << lantern_last_error();
}

// Parameter structs are read as far as their size: a program built against
// an older, shorter struct gets the defaults past it; a struct not taken
// from its defaults call (size 0), or a longer one than the library knows,
// is refused with the struct named.
TEST_F(ModelFixture, ParamStructsAreReadAsFarAsTheirSize) {
    EXPECT_EQ(lantern_model_default_params().size, sizeof(lantern_model_params));
    EXPECT_EQ(lantern_context_default_params().size, sizeof(lantern_context_params));
    EXPECT_EQ(lantern_sampler_default_params().size, sizeof(lantern_sampler_params));

    // An older caller's struct ended before the cache types: the bytes
    // past its size (here a type the cache would refuse) are not read.
    lantern_context_params cp = lantern_context_default_params();
    cp.n_ctx = 32;
    cp.cache_type_k = cp.cache_type_v = "q4_K";
    cp.size = offsetof(lantern_context_params, cache_type_k);
    lantern_context* c = lantern_context_new(model, &cp);
    ASSERT_NE(c, nullptr) << lantern_last_error();
    EXPECT_EQ(lantern_context_n_ctx(c), 32);
    lantern_context_free(c);
    cp.size = sizeof cp;
    EXPECT_EQ(lantern_context_new(model, &cp), nullptr);  // the same struct read whole: q4_K refused
    EXPECT_NE(std::string(lantern_last_error()).find("q4_K"), std::string::npos) << lantern_last_error();

    struct Case {
        size_t size;
        const char* says;
    };
    for (const Case k : {Case{0, "lantern_context_params.size is 0"},
                         Case{sizeof cp + 8, "(a newer lantern_c.h than the library?)"}}) {
        lantern_context_params bad = lantern_context_default_params();
        bad.size = k.size;
        EXPECT_EQ(lantern_context_new(model, &bad), nullptr);
        EXPECT_EQ(lantern_last_error_code(), LANTERN_ERR_INVALID_ARGUMENT);
        EXPECT_NE(std::string(lantern_last_error()).find(k.says), std::string::npos) << lantern_last_error();
    }
    lantern_model_params mp{};  // zero-filled by hand, not from the defaults call
    mp.n_threads = 2;
    EXPECT_EQ(lantern_model_load(default_model_path().c_str(), &mp), nullptr);
    EXPECT_NE(std::string(lantern_last_error()).find("lantern_model_params.size is 0"), std::string::npos)
        << lantern_last_error();
    lantern_sampler_params sp = lantern_sampler_default_params();
    sp.temperature = 0.0f;
    sp.top_p = 2.0f;  // refused when read...
    sp.size = offsetof(lantern_sampler_params, top_p);
    lantern_sampler* s = lantern_sampler_new(&sp, 100);  // ...but past this caller's struct
    ASSERT_NE(s, nullptr) << lantern_last_error();
    lantern_sampler_free(s);
}

// json_object needs the model's vocabulary; with it, the first token of a
// reply can only open the object (or be whitespace).
TEST_F(ModelFixture, JsonObjectSamplerNeedsTheModel) {
    lantern_sampler_params sp = lantern_sampler_default_params();
    sp.temperature = 0.0f;
    sp.json_object = 1;
    EXPECT_EQ(lantern_sampler_new(&sp, lantern_model_n_vocab(model)), nullptr);
    EXPECT_NE(std::string(lantern_last_error()).find("json_object"), std::string::npos) << lantern_last_error();
    lantern_sampler* s = lantern_sampler_new_for_model(&sp, model);
    ASSERT_NE(s, nullptr) << lantern_last_error();
    std::vector<float> logits(lantern_model_n_vocab(model), 0.0f);
    const std::string hello = "Hello";
    int32_t id = 0;
    ASSERT_EQ(lantern_tokenize(model, hello.data(), hello.size(), 0, 0, &id, 1), 1);
    logits[id] = 50.0f;  // prose is what the logits want
    const int32_t t = lantern_sampler_sample(s, logits.data());
    ASSERT_GE(t, 0) << lantern_last_error();
    char piece[64];
    ASSERT_GT(lantern_token_to_piece(model, t, 0, piece, sizeof piece), 0);
    const std::string first = piece;
    EXPECT_EQ(first.find_first_not_of(" \n\t\r"), first.find('{')) << first;
    lantern_sampler_free(s);
}

// A GBNF grammar holds the output; once it is matched whole only an end
// token can come, until restart_output begins a new one. A bad grammar is
// refused naming where.
TEST_F(ModelFixture, GrammarSamplerFromC) {
    lantern_sampler_params sp = lantern_sampler_default_params();
    sp.temperature = 0.0f;
    sp.grammar = "root ::= \"Paris\"";
    EXPECT_EQ(lantern_sampler_new(&sp, lantern_model_n_vocab(model)), nullptr);
    lantern_sampler* s = lantern_sampler_new_for_model(&sp, model);
    ASSERT_NE(s, nullptr) << lantern_last_error();
    std::vector<float> logits(lantern_model_n_vocab(model), 0.0f);
    const std::string hello = "Hello";
    int32_t id = 0;
    ASSERT_EQ(lantern_tokenize(model, hello.data(), hello.size(), 0, 0, &id, 1), 1);
    logits[id] = 50.0f;  // not what the grammar allows
    std::string text;
    int32_t t = 0;
    for (int i = 0; i < 8; ++i) {
        t = lantern_sampler_sample(s, logits.data());
        ASSERT_GE(t, 0) << lantern_last_error();
        if (lantern_token_is_eog(model, t) == 1) break;
        char piece[64];
        ASSERT_GT(lantern_token_to_piece(model, t, 0, piece, sizeof piece), 0);
        text += piece;
    }
    EXPECT_EQ(text, "Paris");
    EXPECT_EQ(lantern_token_is_eog(model, t), 1);
    lantern_sampler_restart_output(s);
    t = lantern_sampler_sample(s, logits.data());
    ASSERT_GE(t, 0);
    EXPECT_NE(lantern_token_is_eog(model, t), 1);
    lantern_sampler_free(s);
    sp.grammar = "root ::= \"a\" | b";
    EXPECT_EQ(lantern_sampler_new_for_model(&sp, model), nullptr);
    EXPECT_NE(std::string(lantern_last_error()).find("line 1, column 16: rule 'b' is used but not defined"),
              std::string::npos)
        << lantern_last_error();
}

// chat_template_kwargs reach the template, and opens_reasoning says whether
// the prompt left a <think> block open (the reply then starts reasoning).
TEST_F(ModelFixture, TemplateVariablesAndOpenReasoningFromC) {
    const char* tmpl =
        "{% for m in messages %}{{ m.content }}{% endfor %}"
        "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% else %}<think>\n{% endif %}";
    auto render = [&](const std::string& request) {
        std::string out(4096, '\0');
        const int n = lantern_chat_apply_json(model, request.c_str(), 1, tmpl, out.data(), static_cast<int>(out.size()));
        EXPECT_GT(n, 0) << lantern_last_error();
        return nlohmann::json::parse(out.c_str());
    };
    const nlohmann::json on = render(R"({"messages": [{"role": "user", "content": "Hi"}]})");
    EXPECT_EQ(on["prompt"], "Hi<think>\n");
    EXPECT_EQ(on["opens_reasoning"], true);
    const nlohmann::json off =
        render(R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"enable_thinking": false}})");
    EXPECT_EQ(off["prompt"], "Hi<think></think>");
    EXPECT_EQ(off["opens_reasoning"], false);
}

// Function calling through the C API: the prompt with the tools and a
// required call's prefix, the sampler held to it, the reply parsed.
TEST_F(ModelFixture, RequiredToolCallFromC) {
    const std::string request = R"({"messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
        "tool_choice": "required"})";
    const int n = lantern_chat_apply_json(model, request.c_str(), 1, nullptr, nullptr, 0);
    ASSERT_GT(n, 0) << lantern_last_error();
    std::string out(static_cast<size_t>(n) + 1, '\0');
    ASSERT_EQ(lantern_chat_apply_json(model, request.c_str(), 1, nullptr, out.data(), n + 1), n);
    const nlohmann::json rendered = nlohmann::json::parse(out.c_str());
    const std::string prompt = rendered["prompt"];
    EXPECT_NE(prompt.find("get_weather"), std::string::npos);
    ASSERT_GE(prompt.size(), 12u);
    EXPECT_EQ(prompt.substr(prompt.size() - 12), "<tool_call>\n");
    ASSERT_EQ(rendered["call_prefixes"].size(), 1u);
    const std::string prefix = rendered["call_prefixes"][0];
    EXPECT_EQ(prefix, "{\"name\": \"get_weather\", \"arguments\": {");
    const std::string schema = rendered["call_schema"];  // one function: its parameters' schema
    EXPECT_NE(schema.find("\"city\""), std::string::npos) << schema;

    lantern_sampler_params sp = lantern_sampler_default_params();
    sp.temperature = 0.0f;
    sp.json_object = 1;
    const char* prefixes[] = {prefix.c_str()};
    sp.json_prefixes = prefixes;
    sp.n_json_prefixes = 1;
    sp.json_schema = schema.c_str();
    lantern_sampler* s = lantern_sampler_new_for_model(&sp, model);
    ASSERT_NE(s, nullptr) << lantern_last_error();
    lantern_context_params cp = lantern_context_default_params();
    cp.n_ctx = 1024;
    lantern_context* ctx = lantern_context_new(model, &cp);
    ASSERT_NE(ctx, nullptr) << lantern_last_error();
    std::vector<int32_t> ids(prompt.size() + 8);
    const int n_ids = lantern_tokenize(model, prompt.data(), prompt.size(), 0, 1, ids.data(), static_cast<int>(ids.size()));
    ASSERT_GT(n_ids, 0);
    ASSERT_EQ(lantern_decode(ctx, ids.data(), nullptr, nullptr, nullptr, n_ids), LANTERN_OK) << lantern_last_error();
    std::string reply;
    for (int i = 0; i < 96; ++i) {
        const int32_t t = lantern_sampler_sample(s, lantern_logits(ctx, 0));
        ASSERT_GE(t, 0) << lantern_last_error();
        if (lantern_token_is_eog(model, t) == 1) break;
        char piece[128];
        ASSERT_GE(lantern_token_to_piece(model, t, 0, piece, sizeof piece), 0);
        reply += piece;
        ASSERT_EQ(lantern_decode(ctx, &t, nullptr, nullptr, nullptr, 1), LANTERN_OK) << lantern_last_error();
    }
    EXPECT_EQ(reply.rfind(prefix, 0), 0u) << reply;
    char parsed[2048];
    ASSERT_GT(lantern_chat_parse_reply(request.c_str(), reply.c_str(), parsed, sizeof parsed), 0) << lantern_last_error();
    const nlohmann::json message = nlohmann::json::parse(parsed);
    EXPECT_TRUE(message["content"].is_null()) << message;
    ASSERT_EQ(message["tool_calls"].size(), 1u) << message;
    EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
    const nlohmann::json args = nlohmann::json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(args.is_object());
    for (const auto& [key, value] : args.items()) EXPECT_TRUE(key == "city" && value.is_string()) << args;
    // A schema the sampler cannot enforce is refused when the sampler is made.
    sp.json_schema = R"({"type": "string", "pattern": "(a)\\1"})";
    sp.n_json_prefixes = 0;
    EXPECT_EQ(lantern_sampler_new_for_model(&sp, model), nullptr);
    EXPECT_NE(std::string(lantern_last_error()).find("backreferences"), std::string::npos) << lantern_last_error();
    // Plain text is a plain message.
    ASSERT_GT(lantern_chat_parse_reply(request.c_str(), "It is sunny.", parsed, sizeof parsed), 0);
    EXPECT_EQ(nlohmann::json::parse(parsed), nlohmann::json({{"role", "assistant"}, {"content", "It is sunny."}}));
    // A request with the older "functions" gets the older function_call,
    // as the server answers it.
    const std::string legacy = R"({"messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "functions": [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]})";
    const char* call = R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>)";
    ASSERT_GT(lantern_chat_parse_reply(legacy.c_str(), call, parsed, sizeof parsed), 0) << lantern_last_error();
    const nlohmann::json old_style = nlohmann::json::parse(parsed);
    EXPECT_FALSE(old_style.contains("tool_calls")) << old_style;
    EXPECT_EQ(old_style["function_call"]["name"], "get_weather") << old_style;
    EXPECT_EQ(nlohmann::json::parse(old_style["function_call"]["arguments"].get<std::string>()), nlohmann::json({{"city", "Oslo"}}));
    // A malformed request names what is wrong.
    EXPECT_EQ(lantern_chat_apply_json(model, "{\"messages\": []}", 1, nullptr, nullptr, 0), LANTERN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(lantern_last_error()).find("messages"), std::string::npos) << lantern_last_error();
    // So does a reply's request whose reasoning fields have the wrong type.
    for (const auto& [field, value] : {std::pair{"reasoning_format", "1"}, std::pair{"opens_reasoning", "\"yes\""}}) {
        const std::string bad =
            R"({"messages": [{"role": "user", "content": "Hi"}], ")" + std::string(field) + "\": " + value + "}";
        EXPECT_EQ(lantern_chat_parse_reply(bad.c_str(), "Hello.", parsed, sizeof parsed), LANTERN_ERR_INVALID_ARGUMENT)
            << bad;
        EXPECT_NE(std::string(lantern_last_error()).find(std::string("'") + field + "' must be"), std::string::npos)
            << lantern_last_error();
    }
    lantern_context_free(ctx);
    lantern_sampler_free(s);
}

TEST(CApi, FailuresAreStatusesWithMessages) {
    const std::string missing = temp_path("no-such-model.gguf").string();
    EXPECT_EQ(lantern_model_load(missing.c_str(), nullptr), nullptr);
    EXPECT_EQ(lantern_last_error_code(), LANTERN_ERR_IO);
    EXPECT_NE(std::string(lantern_last_error()).find(missing), std::string::npos) << lantern_last_error();
    // A corrupt file: FORMAT, named.
    const std::string garbage = temp_path("garbage-c.gguf").string();
    std::FILE* f = std::fopen(garbage.c_str(), "wb");
    const char bytes[] = "GGUF\x03\x00\x00\x00 this is not a model";
    std::fwrite(bytes, 1, sizeof bytes - 1, f);
    std::fclose(f);
    EXPECT_EQ(lantern_model_load(garbage.c_str(), nullptr), nullptr);
    EXPECT_EQ(lantern_last_error_code(), LANTERN_ERR_FORMAT) << lantern_last_error();
    std::remove(garbage.c_str());
    // Null handles and bad parameters never crash.
    EXPECT_EQ(lantern_model_n_vocab(nullptr), LANTERN_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(lantern_context_new(nullptr, nullptr), nullptr);
    EXPECT_EQ(lantern_decode(nullptr, nullptr, nullptr, nullptr, nullptr, 1), LANTERN_ERR_INVALID_ARGUMENT);
    lantern_sampler_params sp = lantern_sampler_default_params();
    sp.top_p = 2.0f;
    EXPECT_EQ(lantern_sampler_new(&sp, 100), nullptr);
    EXPECT_NE(std::string(lantern_last_error()).find("top_p"), std::string::npos) << lantern_last_error();
    lantern_model_free(nullptr);
    lantern_context_free(nullptr);
    lantern_sampler_free(nullptr);
    // Each thread has its own last error.
    std::string other;
    std::thread([&] {
        lantern_model_n_vocab(nullptr);
        other = lantern_last_error();
    }).join();
    EXPECT_NE(other, lantern_last_error());
    EXPECT_STREQ(lantern_version(), "0.1.0");
}

// What the build runs on, and load progress through a C callback.
TEST(CApi, BackendsDevicesAndProgress) {
    char buf[256];
    ASSERT_GT(lantern_backends(buf, sizeof buf), 0);
    EXPECT_EQ(std::string(buf).rfind("cpu", 0), 0u) << buf;
    ASSERT_GT(lantern_cpu_kernels(buf, sizeof buf), 0);
    EXPECT_FALSE(std::string(buf).empty());
    const int n = lantern_device_count();
    ASSERT_GE(n, 0) << lantern_last_error();
    for (int i = 0; i < n; ++i) {
        char backend[32], name[256], details[1024];
        int index = -1;
        ASSERT_EQ(lantern_device_info(i, backend, sizeof backend, &index, name, sizeof name, details, sizeof details),
                  LANTERN_OK);
        EXPECT_GE(index, 0);
    }
    EXPECT_EQ(lantern_device_info(n, nullptr, 0, nullptr, nullptr, 0, nullptr, 0), LANTERN_ERR_INVALID_ARGUMENT);

    struct Seen {
        int calls = 0;
        float last = -1.0f;
        bool ordered = true;
    } seen;
    lantern_model_params p = lantern_model_default_params();
    p.progress = [](float f, void* user) {
        auto* s = static_cast<Seen*>(user);
        s->ordered = s->ordered && f >= s->last && f >= 0.0f && f <= 1.0f;
        s->last = f;
        ++s->calls;
    };
    p.progress_user_data = &seen;
    lantern_model* m = lantern_model_load(default_model_path().c_str(), &p);
    ASSERT_NE(m, nullptr) << lantern_last_error();
    lantern_model_free(m);
    EXPECT_GT(seen.calls, 1);
    EXPECT_TRUE(seen.ordered);
    EXPECT_EQ(seen.last, 1.0f);
}

// Rope overrides: the defaults keep the file's settings; linear scaling by 2
// doubles the context the model is for; a bad value is refused by name.
TEST(CApi, RopeOverrides) {
    lantern_model_params p = lantern_model_default_params();
    EXPECT_EQ(p.rope_scaling, nullptr);
    EXPECT_EQ(p.rope_freq_scale, 0.0f);
    EXPECT_LT(p.yarn_beta_fast, 0.0f);
    lantern_model* m = lantern_model_load(default_model_path().c_str(), &p);
    ASSERT_NE(m, nullptr) << lantern_last_error();
    const int trained = lantern_model_n_ctx_train(m);
    EXPECT_EQ(lantern_model_n_ctx_max(m), trained);
    lantern_model_free(m);
    p.rope_scaling = "linear";
    p.rope_freq_scale = 0.5f;
    m = lantern_model_load(default_model_path().c_str(), &p);
    ASSERT_NE(m, nullptr) << lantern_last_error();
    EXPECT_EQ(lantern_model_n_ctx_max(m), 2 * trained);
    lantern_model_free(m);
    p.rope_scaling = "cubic";
    EXPECT_EQ(lantern_model_load(default_model_path().c_str(), &p), nullptr);
    EXPECT_EQ(lantern_last_error_code(), LANTERN_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(lantern_last_error()).find("scaling 'cubic'"), std::string::npos) << lantern_last_error();
}

// Fill in the middle: StarCoder's vocabulary gives PRE prefix SUF suffix
// MID; the default model (no FIM tokens) is refused by name.
TEST(CApi, FillInTheMiddle) {
    lantern_model_params p = lantern_model_default_params();
    p.vocab_only = 1;
    const std::string starcoder = (testdata_dir() / "vocab/ggml-vocab-starcoder.gguf").string();
    lantern_model* m = lantern_model_load(starcoder.c_str(), &p);
    ASSERT_NE(m, nullptr) << lantern_last_error();
    const std::string prefix = "def f():\n    ", suffix = "\n";
    const int n = lantern_fill_in_middle(m, prefix.data(), prefix.size(), suffix.data(), suffix.size(), 0, nullptr, 0);
    ASSERT_GT(n, 3);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    ASSERT_EQ(lantern_fill_in_middle(m, prefix.data(), prefix.size(), suffix.data(), suffix.size(), 0, ids.data(), n), n);
    int32_t pre = -1, mid = -1;
    ASSERT_EQ(lantern_tokenize(m, "<fim_prefix>", 12, 0, 1, &pre, 1), 1);
    ASSERT_EQ(lantern_tokenize(m, "<fim_middle>", 12, 0, 1, &mid, 1), 1);
    EXPECT_EQ(ids.front(), pre);
    EXPECT_EQ(ids.back(), mid);
    lantern_model_free(m);
    m = lantern_model_load(default_model_path().c_str(), &p);
    ASSERT_NE(m, nullptr) << lantern_last_error();
    EXPECT_EQ(lantern_fill_in_middle(m, "a", 1, "b", 1, 0, nullptr, 0), LANTERN_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(lantern_last_error()).find("fill-in-the-middle"), std::string::npos) << lantern_last_error();
    lantern_model_free(m);
}

// The library exports the C API and nothing else (the engine inside it is
// hidden, so it cannot clash with another copy of it in the process).
TEST(CApi, ExportsOnlyTheCApi) {
    const std::string cmd = "nm -D --defined-only " + std::string(LANTERN_C_LIBRARY) + " 2>&1";
    std::FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char line[1024];
    int api = 0;
    std::vector<std::string> others;
    while (std::fgets(line, sizeof line, p) != nullptr) {
        std::string s(line);
        const std::string name = s.substr(s.find_last_of(' ') + 1, s.find_last_not_of("\n") - s.find_last_of(' '));
        const char kind = s.size() > 17 ? s[17] : ' ';
        if (name.rfind("lantern_", 0) == 0) {
            ++api;
        } else if (kind == 'T' || kind == 'W' || kind == 'D' || kind == 'B') {
            others.push_back(name);
        }
    }
    pclose(p);
    EXPECT_GE(api, 30);
    EXPECT_TRUE(others.empty()) << others.size() << " others, e.g. " << others.front();
}

}  // namespace
}  // namespace lantern::test
