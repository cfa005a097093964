// `lantern serve` as a black box over HTTP, in-process on a free port.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "gguf/gguf.h"
#include "lantern/lantern.h"
#include "server/engine.h"
#include "server/http_server.h"
#include "server/openai.h"
#include "test_util.h"

namespace lantern::test {
namespace {

using json = nlohmann::json;

class Server : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        ModelParams p;
        p.n_threads = 2;
        model_ = Model::load(default_model_path().string(), p).release();
        server::EngineParams ep;
        ep.n_slots = 4;
        ep.n_ctx = 384;
        ep.n_batch = 128;
        engine_ = new server::Engine(*model_, ep);
        server::ServerOptions so;
        so.port = 0;
        so.slot_save_path = slot_dir();
        std::filesystem::create_directories(so.slot_save_path);
        http_ = new server::HttpServer(*model_, *engine_, so);
        http_->bind();
        thread_ = new std::thread([] { http_->serve(); });
    }
    static void TearDownTestSuite() {
        http_->stop();
        thread_->join();
        delete thread_;
        delete http_;
        delete engine_;
        delete model_;
    }

    static std::string slot_dir() { return temp_path("server-slots").string(); }

    static httplib::Client client() {
        httplib::Client c("127.0.0.1", http_->port());
        c.set_read_timeout(300, 0);
        return c;
    }
    static json post(const std::string& path, const json& body, int* status = nullptr) {
        auto res = client().Post(path, body.dump(), "application/json");
        EXPECT_TRUE(res) << "no response from " << path;
        if (!res) return json();
        if (status != nullptr) *status = res->status;
        return json::parse(res->body);
    }
    // The events of a server-sent-event body, parsed, up to "[DONE]"
    // (*done: whether it came).
    static std::vector<json> sse_events(const std::string& body, bool* done = nullptr) {
        std::vector<json> events;
        size_t pos = 0;
        if (done != nullptr) *done = false;
        while ((pos = body.find("data: ", pos)) != std::string::npos) {
            const size_t end = body.find("\n\n", pos);
            const std::string data = body.substr(pos + 6, end - pos - 6);
            pos = end;
            if (data == "[DONE]") {
                if (done != nullptr) *done = true;
                break;
            }
            events.push_back(json::parse(data));
        }
        return events;
    }
    // GET /metrics, and one counter's value in it.
    static std::string metrics() {
        auto res = client().Get("/metrics");
        EXPECT_TRUE(res);
        if (!res) return std::string();
        EXPECT_EQ(res->status, 200);
        EXPECT_NE(res->get_header_value("Content-Type").find("text/plain"), std::string::npos);
        return res->body;
    }
    static uint64_t metric_value(const std::string& text, const std::string& name) {
        const size_t at = text.find("\n" + name + " ");
        EXPECT_NE(at, std::string::npos) << name << " in\n" << text;
        return at == std::string::npos ? uint64_t{0} : std::stoull(text.substr(at + name.size() + 2));
    }
    // Waits (up to two minutes) until no request runs or waits.
    static void wait_idle() {
        for (int i = 0; i < 1200; ++i) {
            const server::EngineStats st = engine_->stats();
            if (st.active_slots == 0 && st.queued == 0) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        ADD_FAILURE() << "the engine is still busy after two minutes";
    }
    static json chat(const std::string& user, int max_tokens = 24) {
        return post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", user}}}},
                                             {"temperature", 0},
                                             {"max_tokens", max_tokens}});
    }

    static Model* model_;
    static server::Engine* engine_;
    static server::HttpServer* http_;
    static std::thread* thread_;
};

Model* Server::model_ = nullptr;
server::Engine* Server::engine_ = nullptr;
server::HttpServer* Server::http_ = nullptr;
std::thread* Server::thread_ = nullptr;

TEST_F(Server, HealthAndModels) {
    auto h = client().Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(json::parse(h->body)["status"], "ok");
    auto m = client().Get("/v1/models");
    ASSERT_TRUE(m);
    EXPECT_EQ(json::parse(m->body)["data"][0]["object"], "model");
}

TEST_F(Server, ChatCompletionGolden) {
    const json r = chat("What is the capital of France? Answer in one sentence.");
    EXPECT_EQ(r["object"], "chat.completion");
    EXPECT_EQ(r["choices"][0]["message"]["content"], "The capital of France is Paris.");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 20);
}

TEST_F(Server, StreamedDeltasEqualTheFullAnswer) {
    const json body = {{"prompt", "The history of the printing press"}, {"temperature", 0}, {"max_tokens", 20}};
    const json full = post("/v1/completions", body);
    json sbody = body;
    sbody["stream"] = true;
    auto res = client().Post("/v1/completions", sbody.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    std::string text, finish;
    bool saw_done = false;
    for (const json& chunk : sse_events(res->body, &saw_done)) {
        text += chunk["choices"][0]["text"].get<std::string>();
        if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
    }
    EXPECT_TRUE(saw_done);
    EXPECT_EQ(text, full["choices"][0]["text"].get<std::string>());
    EXPECT_EQ(finish, "length");
    EXPECT_EQ(full["usage"]["completion_tokens"], 20);
}

// stream_options.include_usage: one more chunk, without choices, with the usage.
TEST_F(Server, StreamedUsageWhenAsked) {
    const json user = {{{"role", "user"}, {"content", "Name a fruit."}}};
    const json body = {{"messages", user}, {"temperature", 0}, {"max_tokens", 8}, {"stream", true},
                       {"stream_options", {{"include_usage", true}}}};
    auto res = client().Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    const std::vector<json> chunks = sse_events(res->body);
    ASSERT_GE(chunks.size(), 2u);
    const json& last = chunks.back();
    EXPECT_TRUE(last["choices"].empty()) << last;
    EXPECT_GT(last["usage"]["prompt_tokens"].get<int>(), 0) << last;
    int deltas = 0;
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
        EXPECT_FALSE(chunks[i].contains("usage")) << chunks[i];
        if (!chunks[i]["choices"][0]["delta"].value("content", std::string()).empty()) ++deltas;
    }
    EXPECT_EQ(last["usage"]["completion_tokens"].get<int>(), deltas) << res->body;
    int status = 0;
    const json e = post("/v1/chat/completions", {{"messages", user}, {"stream_options", {{"include_usage", true}}}},
                        &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("stream_options"), std::string::npos) << e;
}

// Requests decoded together in one batch (one KV sequence each) give what
// each gives alone.
TEST_F(Server, ConcurrentRequestsMatchSequentialOnes) {
    const std::vector<std::string> prompts = {"Name the three primary colors.", "What is 2 + 2?",
                                              "Write one sentence about cats.", "What is the capital of Italy?"};
    std::vector<std::string> alone;
    for (const std::string& p : prompts) alone.push_back(chat(p, 16)["choices"][0]["message"]["content"]);
    std::vector<std::future<json>> together;
    for (const std::string& p : prompts) together.push_back(std::async(std::launch::async, [p] { return chat(p, 16); }));
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(together[i].get()["choices"][0]["message"]["content"], alone[i]) << prompts[i];
    }
}

TEST_F(Server, StopStringsEndTheAnswer) {
    const json r = post("/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "What is the capital of France? Answer in one sentence."}}}},
                         {"temperature", 0},
                         {"stop", {"Paris"}}});
    EXPECT_EQ(r["choices"][0]["message"]["content"], "The capital of France is ");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

// Chat logprobs: one entry per generated token, its text the answer's, at
// temperature 0 the chosen token the most likely one.
TEST_F(Server, ChatLogprobsDescribeEachToken) {
    const json r = post("/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "What is the capital of France? Answer in one sentence."}}}},
                         {"temperature", 0},
                         {"max_tokens", 12},
                         {"logprobs", true},
                         {"top_logprobs", 3}});
    const json& content = r["choices"][0]["logprobs"]["content"];
    ASSERT_TRUE(content.is_array());
    EXPECT_EQ(content.size(), r["usage"]["completion_tokens"].get<size_t>());
    std::string text;
    for (const json& t : content) {
        text += t["token"].get<std::string>();
        const float lp = t["logprob"].get<float>();
        EXPECT_LE(lp, 0.0f);
        ASSERT_EQ(t["top_logprobs"].size(), 3u);
        EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);  // greedy
        EXPECT_FLOAT_EQ(t["top_logprobs"][0]["logprob"].get<float>(), lp);
        EXPECT_GE(t["top_logprobs"][0]["logprob"].get<float>(), t["top_logprobs"][1]["logprob"].get<float>());
        EXPECT_GE(t["top_logprobs"][1]["logprob"].get<float>(), t["top_logprobs"][2]["logprob"].get<float>());
        double mass = 0.0;
        for (const json& a : t["top_logprobs"]) mass += std::exp(a["logprob"].get<double>());
        EXPECT_LE(mass, 1.0 + 1e-4);
        EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
    }
    EXPECT_EQ(text, r["choices"][0]["message"]["content"].get<std::string>());
    // Not asked for: null.
    EXPECT_TRUE(chat("Hi", 2)["choices"][0]["logprobs"].is_null());
}

// A streamed reasoning reply with logprobs: every generated token's entry
// comes once, also those of text the reasoning split holds back and then
// drops (whitespace at the end of the block), which go with the last chunk.
// The grammar makes the reply a <think> block that ends in spaces.
TEST_F(Server, StreamedReasoningKeepsEveryTokensLogprob) {
    const json body = {{"messages", {{{"role", "user"}, {"content", "Capital of France?"}}}},
                       {"temperature", 0},
                       {"max_tokens", 32},
                       {"logprobs", true},
                       {"grammar", "root ::= \"<think>Paris\" [ ]{6}"}};
    const json whole = post("/v1/chat/completions", body);
    EXPECT_EQ(whole["choices"][0]["message"]["reasoning_content"], "Paris") << whole;
    const json& want = whole["choices"][0]["logprobs"]["content"];
    ASSERT_TRUE(want.is_array()) << whole;
    json streamed_body = body;
    streamed_body["stream"] = true;
    auto res = client().Post("/v1/chat/completions", streamed_body.dump(), "application/json");
    ASSERT_TRUE(res);
    json got = json::array();
    std::string reasoning;
    for (const json& chunk : sse_events(res->body)) {
        if (chunk["choices"].empty()) continue;
        const json& choice = chunk["choices"][0];
        if (choice["delta"].contains("reasoning_content")) reasoning += choice["delta"]["reasoning_content"].get<std::string>();
        if (choice["logprobs"].is_object()) {
            for (const json& t : choice["logprobs"]["content"]) got.push_back(t);
        }
    }
    EXPECT_EQ(reasoning, "Paris");
    ASSERT_EQ(got.size(), want.size()) << got;
    std::string text;
    for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i]["token"], want[i]["token"]) << i;
        text += got[i]["token"].get<std::string>();
    }
    EXPECT_EQ(text, "<think>Paris      ");
}

// Completions logprobs, streamed and not: the same tokens and values.
TEST_F(Server, StreamedCompletionLogprobsEqualTheFullOnes) {
    const json body = {{"prompt", "The history of the printing press"}, {"temperature", 0}, {"max_tokens", 10}, {"logprobs", 2}};
    const json full = post("/v1/completions", body)["choices"][0];
    const json& lp = full["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 10u);
    std::string joined;
    for (size_t i = 0; i < lp["tokens"].size(); ++i) {
        EXPECT_EQ(lp["text_offset"][i].get<size_t>(), joined.size());
        joined += lp["tokens"][i].get<std::string>();
        EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
        EXPECT_TRUE(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>()));
    }
    EXPECT_EQ(joined, full["text"].get<std::string>());
    json sbody = body;
    sbody["stream"] = true;
    auto res = client().Post("/v1/completions", sbody.dump(), "application/json");
    ASSERT_TRUE(res);
    json tokens = json::array(), values = json::array(), offsets = json::array();
    for (const json& event : sse_events(res->body)) {
        const json& c = event["choices"][0]["logprobs"];
        for (size_t i = 0; i < c["tokens"].size(); ++i) {
            tokens.push_back(c["tokens"][i]);
            values.push_back(c["token_logprobs"][i]);
            offsets.push_back(c["text_offset"][i]);
        }
    }
    EXPECT_EQ(tokens, lp["tokens"]);
    EXPECT_EQ(values, lp["token_logprobs"]);
    EXPECT_EQ(offsets, lp["text_offset"]);
}

// GET /metrics counts what a request did.
TEST_F(Server, MetricsCountTokensAndRequests) {
    auto value = metric_value;
    const std::string before = metrics();
    const json r = chat("Name a color.", 6);
    const std::string after = metrics();
    EXPECT_EQ(value(after, "lantern_requests_total"), value(before, "lantern_requests_total") + 1);
    // A prompt is decoded, or found in a slot's cache (the system prompt
    // other chats left there).
    const uint64_t cached = r["usage"]["prompt_tokens_details"]["cached_tokens"].get<uint64_t>();
    EXPECT_EQ(value(after, "lantern_prompt_tokens_cached_total") - value(before, "lantern_prompt_tokens_cached_total"),
              cached);
    EXPECT_EQ(value(after, "lantern_prompt_tokens_total") - value(before, "lantern_prompt_tokens_total") + cached,
              r["usage"]["prompt_tokens"].get<uint64_t>());
    EXPECT_EQ(value(after, "lantern_generated_tokens_total") - value(before, "lantern_generated_tokens_total"),
              r["usage"]["completion_tokens"].get<uint64_t>());
    EXPECT_GT(value(after, "lantern_decode_steps_total"), value(before, "lantern_decode_steps_total"));
    EXPECT_EQ(value(after, "lantern_slots"), 4u);
    EXPECT_EQ(value(after, "lantern_slots_active"), 0u);
    // The request's wall times, in seconds.
    auto seconds = [](const std::string& text, const std::string& name) {
        const size_t at = text.find("\n" + name + " ");
        EXPECT_NE(at, std::string::npos) << name << " in\n" << text;
        return at == std::string::npos ? 0.0 : std::stod(text.substr(at + name.size() + 2));
    };
    const double gen = seconds(after, "lantern_generation_seconds_total") - seconds(before, "lantern_generation_seconds_total");
    EXPECT_NEAR(gen, r["timings"]["predicted_ms"].get<double>() / 1e3, 2e-6);
    const double prompt = seconds(after, "lantern_prompt_seconds_total") - seconds(before, "lantern_prompt_seconds_total");
    EXPECT_NEAR(prompt, r["timings"]["prompt_ms"].get<double>() / 1e3, 2e-6);
}

// Sends a POST over a socket of its own, reads what comes in `wait_ms`
// (up to `want` bytes; 0: nothing awaited), and closes the socket: a client
// that gives up. Returns what it read.
std::string post_and_leave(int port, const std::string& path, const std::string& body, int wait_ms, size_t want) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
    const std::string http = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                             "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    EXPECT_EQ(send(fd, http.data(), http.size(), 0), static_cast<ssize_t>(http.size()));
    std::string got;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    while (got.size() < want || want == 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        char buf[4096];
        const ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    return got;
}

// A client that gives up before its answer is done ends its request: it is
// cancelled and counted, not generated to the end while nobody waits.
// Without a way to see the socket close, the non-streamed requests (which
// write nothing until the end) ran to max_tokens.
TEST_F(Server, ClientThatLeavesCancelsItsRequest) {
    const int kMaxTokens = 300;  // the slot's context (384) holds them all
    json one = {{"prompt", "Once upon a time"}, {"max_tokens", kMaxTokens}, {"ignore_eos", true}, {"temperature", 0}};
    json two = one;
    two["prompt"] = {"Once upon a time", "The sea was"};
    json streamed = one;
    streamed["stream"] = true;
    struct Case {
        const char* what;
        json body;
        uint64_t requests;  // generations it makes
        size_t want;        // bytes read before leaving (0: leave after 0.3 s)
    };
    for (const Case& c : {Case{"one prompt", one, 1, 0}, Case{"two prompts", two, 2, 0}, Case{"streamed", streamed, 1, 200}}) {
        SCOPED_TRACE(c.what);
        wait_idle();
        const std::string before = metrics();
        const std::string got = post_and_leave(http_->port(), "/v1/completions", c.body.dump(), c.want > 0 ? 60000 : 300, c.want);
        if (c.want == 0) {
            EXPECT_TRUE(got.empty()) << "answered within 0.3 s: " << got.substr(0, 200);
        } else {
            EXPECT_NE(got.find("data: "), std::string::npos) << got.substr(0, 200);
        }
        wait_idle();
        const std::string after = metrics();
        EXPECT_EQ(metric_value(after, "lantern_requests_cancelled_total"),
                  metric_value(before, "lantern_requests_cancelled_total") + c.requests);
        EXPECT_EQ(metric_value(after, "lantern_requests_total"), metric_value(before, "lantern_requests_total") + c.requests);
        EXPECT_LT(metric_value(after, "lantern_generated_tokens_total") - metric_value(before, "lantern_generated_tokens_total"),
                  c.requests * kMaxTokens);
    }
    // The server goes on serving.
    EXPECT_FALSE(chat("Name a color.", 4)["choices"][0]["message"]["content"].get<std::string>().empty());
}

// logit_bias: a bias of 100 makes a token the only choice, false bans one.
TEST_F(Server, LogitBiasForcesAndBansTokens) {
    auto token_of = [](const std::string& text) {
        const json t = post("/tokenize", {{"content", text}});
        EXPECT_EQ(t["tokens"].size(), 1u) << text << ": " << t;
        return t["tokens"][0].get<int>();
    };
    const json user = {{{"role", "user"}, {"content", "What is the capital of France? Answer in one sentence."}}};
    const int yes = token_of("Yes");
    json r = post("/v1/chat/completions", {{"messages", user}, {"temperature", 0}, {"max_tokens", 3},
                                           {"logit_bias", {{std::to_string(yes), 100}}}});
    EXPECT_EQ(r["choices"][0]["message"]["content"], "YesYesYes") << r;
    // Sampling with temperature too: the bias comes before every filter.
    r = post("/v1/completions", {{"prompt", "Once upon a time"}, {"temperature", 1.0}, {"seed", 7}, {"max_tokens", 2},
                                 {"logit_bias", {{std::to_string(yes), 100}}}});
    EXPECT_EQ(r["choices"][0]["text"], "YesYes") << r;
    // The greedy answer starts "The capital"; with "The" banned it cannot.
    const int the = token_of("The");
    r = post("/v1/chat/completions", {{"messages", user}, {"temperature", 0}, {"max_tokens", 8},
                                      {"logit_bias", {{std::to_string(the), false}}}});
    const std::string content = r["choices"][0]["message"]["content"];
    EXPECT_FALSE(content.empty());
    EXPECT_NE(content.rfind("The", 0), 0u) << content;
}

// response_format json_object: the reply is one JSON object, ended by the
// model once it is closed. (The prompt asks for a small object: asked the
// capital question in one sentence, the greedy reply of the AVX2 kernels
// lists keys until max_tokens, while the AVX-512 ones' closed early.)
TEST_F(Server, JsonObjectResponseFormat) {
    const json ask = {
        {{"role", "user"}, {"content", "Give the capital of France as a JSON object with the key \"capital\"."}}};
    const json r = post("/v1/chat/completions", {{"messages", ask}, {"temperature", 0}, {"max_tokens", 96},
                                                 {"response_format", {{"type", "json_object"}}}});
    const std::string content = r["choices"][0]["message"]["content"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << content;
    const json parsed = json::parse(content, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << content;
    EXPECT_TRUE(parsed.is_object()) << content;
    EXPECT_NE(parsed.dump().find("Paris"), std::string::npos) << content;
    const json user = {{{"role", "user"}, {"content", "What is the capital of France? Answer in one sentence."}}};
    int status = 0;
    for (const json& f : {json{{"type", "json_schema"}, {"json_schema", json::object()}}, json{{"type", "yaml"}},
                          json("json")}) {
        const json e = post("/v1/chat/completions", {{"messages", user}, {"response_format", f}}, &status);
        EXPECT_EQ(status, 400) << f;
        EXPECT_NE(e["error"]["message"].get<std::string>().find("response_format"), std::string::npos) << e;
    }
}

// response_format json_schema: the reply follows the schema (types,
// required keys, no others, enums); a schema with a keyword the sampler
// cannot enforce is a 400 naming it.
TEST_F(Server, JsonSchemaResponseFormat) {
    const json schema = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
        "country": {"type": "string"}, "population": {"type": "integer"}, "capital": {"type": "boolean"},
        "continent": {"enum": ["Europe", "Asia", "Africa"]}},
        "required": ["city", "country", "population", "capital", "continent"], "additionalProperties": false})");
    const json user = {{{"role", "user"}, {"content", "Describe Paris as JSON."}}};
    const json r = post("/v1/chat/completions", {{"messages", user}, {"temperature", 0}, {"max_tokens", 96},
                                                 {"response_format", {{"type", "json_schema"},
                                                                      {"json_schema", {{"name", "city"}, {"schema", schema}, {"strict", true}}}}}});
    const std::string content = r["choices"][0]["message"]["content"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << content;
    const json v = json::parse(content, nullptr, false);
    ASSERT_TRUE(v.is_object()) << content;
    EXPECT_EQ(v.size(), 5u) << content;
    EXPECT_TRUE(v["city"].is_string() && v["country"].is_string()) << content;
    EXPECT_TRUE(v["population"].is_number_integer() && v["capital"].is_boolean()) << content;
    EXPECT_TRUE(v["continent"] == "Europe" || v["continent"] == "Asia" || v["continent"] == "Africa") << content;
    int status = 0;
    const json e = post("/v1/chat/completions",
                        {{"messages", user}, {"response_format", {{"type", "json_schema"},
                                                                  {"json_schema", {{"name", "x"}, {"schema", {{"type", "string"}, {"format", "iri"}}}}}}}},
                        &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("format"), std::string::npos) << e;
}

// "grammar" (llama.cpp's extension) on both endpoints, streamed or not: the
// reply matches the GBNF grammar, and the request ends once it matches
// whole; a bad grammar, or one beside a JSON response_format, is a 400.
TEST_F(Server, GrammarHoldsTheReply) {
    const std::string grammar = "root ::= \"Answer: \" (\"yes\" | \"no\") \", because \" [a-z ]{3,40} \".\"";
    const std::regex shape("Answer: (yes|no), because [a-z ]{3,40}\\.");
    const json user = {{{"role", "user"}, {"content", "Is the sky blue?"}}};
    const json r = post("/v1/chat/completions",
                        {{"messages", user}, {"temperature", 0}, {"max_tokens", 64}, {"grammar", grammar}});
    const std::string content = r["choices"][0]["message"]["content"];
    EXPECT_TRUE(std::regex_match(content, shape)) << content;
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << content;
    // Streamed, the deltas add up to the same reply.
    auto res = client().Post("/v1/chat/completions",
                             json{{"messages", user}, {"temperature", 0}, {"max_tokens", 64}, {"grammar", grammar},
                                  {"stream", true}}
                                 .dump(),
                             "application/json");
    ASSERT_TRUE(res);
    std::string streamed;
    for (const json& chunk : sse_events(res->body)) {
        if (chunk["choices"].empty()) continue;
        const json& delta = chunk["choices"][0]["delta"];
        if (delta.contains("content") && delta["content"].is_string()) streamed += delta["content"].get<std::string>();
    }
    EXPECT_EQ(streamed, content);
    // Completions, with temperature: several draws, each matching.
    const json c = post("/v1/completions", {{"prompt", "Is the sky blue?"}, {"temperature", 1.0}, {"seed", 3},
                                            {"n", 3}, {"max_tokens", 64}, {"grammar", grammar}});
    ASSERT_EQ(c["choices"].size(), 3u);
    for (const json& choice : c["choices"]) {
        const std::string text = choice["text"];
        EXPECT_TRUE(std::regex_match(text, shape)) << text;
    }
    int status = 0;
    for (const json& bad : {json{{"grammar", "root ::= item"}}, json{{"grammar", 3}},
                            json{{"grammar", grammar}, {"response_format", {{"type", "json_object"}}}}}) {
        json req = bad;
        req["messages"] = user;
        const json e = post("/v1/chat/completions", req, &status);
        EXPECT_EQ(status, 400) << bad;
        EXPECT_NE(e["error"]["message"].get<std::string>().find("grammar"), std::string::npos) << e;
    }
    const json e = post("/v1/chat/completions", {{"messages", user}, {"grammar", "root ::= item"}}, &status);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("line 1, column 10"), std::string::npos) << e;
}

// llama.cpp's sampler fields: DRY breaks a greedy loop as on the command
// line; the others are taken; bad values are a 400 naming them.
TEST_F(Server, LlamaCppSamplerFields) {
    const json loop = {{"prompt", "the cat the cat the cat the cat"}, {"temperature", 0}, {"max_tokens", 30},
                       {"ignore_eos", true}};
    const std::string plain = post("/v1/completions", loop)["choices"][0]["text"];
    EXPECT_NE(plain.find("the cat the cat the cat"), std::string::npos) << plain;
    json dry = loop;
    dry["dry_multiplier"] = 0.8;
    const std::string varied = post("/v1/completions", dry)["choices"][0]["text"];
    EXPECT_EQ(varied.find("the cat the cat"), std::string::npos) << varied;
    dry["dry_sequence_breakers"] = {" ", "t"};
    EXPECT_EQ(post("/v1/completions", dry)["choices"][0]["text"], plain);
    json more = {{"prompt", "Hello"}, {"max_tokens", 8}, {"seed", 1}, {"mirostat", 2}, {"mirostat_tau", 4.0},
                 {"typical_p", 0.9}, {"top_n_sigma", 2.0}, {"xtc_probability", 0.3}};
    int status = 0;
    post("/v1/completions", more, &status);
    EXPECT_EQ(status, 200);
    for (const json& bad : {json{{"mirostat", 5}}, json{{"typical_p", 2}}, json{{"dry_base", 0.5}},
                            json{{"dry_sequence_breakers", "\n"}}, json{{"xtc_probability", "x"}}}) {
        json req = bad;
        req["prompt"] = "Hello";
        const json e = post("/v1/completions", req, &status);
        EXPECT_EQ(status, 400) << bad;
        EXPECT_NE(e["error"]["message"].get<std::string>().find(bad.begin().key()), std::string::npos) << e;
    }
}

// A conversation's next turn reuses what its slot holds: only the new part
// of the prompt is decoded, and the answer is the one a fresh slot gives.
TEST_F(Server, NextTurnReusesTheCachedPrompt) {
    const json first_turn = {{{"role", "user"}, {"content", "Name a fruit."}}};
    const json a = post("/v1/chat/completions", {{"messages", first_turn}, {"temperature", 0}, {"max_tokens", 12}});
    json next = first_turn;
    next.push_back({{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
    next.push_back({{"role", "user"}, {"content", "Name a color."}});
    const json b = post("/v1/chat/completions", {{"messages", next}, {"temperature", 0}, {"max_tokens", 12}});
    const int prompt = b["usage"]["prompt_tokens"], cached = b["usage"]["prompt_tokens_details"]["cached_tokens"];
    EXPECT_GE(cached, a["usage"]["prompt_tokens"].get<int>()) << b["usage"];  // the whole first turn
    EXPECT_LT(cached, prompt);

    // The same second turn on an engine that decodes every prompt whole.
    server::EngineParams ep;
    ep.n_slots = 1;
    ep.n_ctx = 384;
    ep.cache_prompt = false;
    server::Engine fresh(*model_, ep);
    auto req = std::make_shared<server::GenerationRequest>();
    const std::string text = model_->apply_chat_template(
        {{"user", "Name a fruit."}, {"assistant", a["choices"][0]["message"]["content"]}, {"user", "Name a color."}},
        true);
    req->prompt = model_->tokenize(text, false, true);
    ASSERT_EQ(static_cast<int>(req->prompt.size()), prompt);
    req->sampling.temperature = 0.0f;
    req->max_tokens = 12;
    std::promise<server::GenerationResult> done;
    req->on_done = [&](const server::GenerationResult& r) { done.set_value(r); };
    fresh.submit(req);
    const server::GenerationResult r = done.get_future().get();
    EXPECT_EQ(r.cached_tokens, 0);
    EXPECT_EQ(r.text, b["choices"][0]["message"]["content"].get<std::string>());
}

// Completions' echo with logprobs and max_tokens 0 scores a text, as
// evaluation harnesses ask: each prompt token's logprob given those before.
TEST_F(Server, EchoScoresThePrompt) {
    auto score = [](const std::string& text) {
        const json r = post("/v1/completions", {{"prompt", text}, {"echo", true}, {"logprobs", 1}, {"max_tokens", 0}});
        EXPECT_EQ(r["choices"][0]["text"], text) << r;
        EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
        EXPECT_EQ(r["usage"]["completion_tokens"], 0);
        const json& lp = r["choices"][0]["logprobs"];
        EXPECT_EQ(lp["tokens"].size(), r["usage"]["prompt_tokens"].get<size_t>()) << lp;
        EXPECT_TRUE(lp["token_logprobs"][0].is_null());
        EXPECT_TRUE(lp["top_logprobs"][0].is_null());
        std::string joined;
        for (const json& t : lp["tokens"]) joined += t.get<std::string>();
        EXPECT_EQ(joined, text);
        double sum = 0;
        for (size_t i = 1; i < lp["token_logprobs"].size(); ++i) {
            const double v = lp["token_logprobs"][i];
            EXPECT_LE(v, 0.0);
            EXPECT_EQ(lp["top_logprobs"][i].size(), 1u);
            EXPECT_EQ(lp["text_offset"][i].get<size_t>(), joined.find(lp["tokens"][i].get<std::string>(),
                                                                        lp["text_offset"][i - 1].get<size_t>()));
            sum += v;
        }
        return sum;
    };
    // The model knows its geography.
    EXPECT_GT(score("The capital of France is Paris."), score("The capital of France is Berlin.") + 2.0);
    // With tokens to generate, the prompt comes first and the generated
    // tokens follow it in the lists.
    const json r = post("/v1/completions", {{"prompt", "Once upon a time"}, {"echo", true}, {"logprobs", 0},
                                            {"max_tokens", 3}, {"temperature", 0}});
    const std::string text = r["choices"][0]["text"];
    EXPECT_EQ(text.rfind("Once upon a time", 0), 0u) << text;
    EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"].size(), r["usage"]["prompt_tokens"].get<size_t>() + 3) << r;
    const json plain = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0}});
    EXPECT_EQ(text, "Once upon a time" + plain["choices"][0]["text"].get<std::string>());
    // A scored prompt token has the logprob it had when it was generated.
    const json one = post("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 1}, {"temperature", 0},
                                              {"logprobs", 0}});
    const std::string next = one["choices"][0]["logprobs"]["tokens"][0];
    const double generated = one["choices"][0]["logprobs"]["token_logprobs"][0];
    const json scored = post("/v1/completions", {{"prompt", "Once upon a time" + next}, {"echo", true}, {"logprobs", 0},
                                                 {"max_tokens", 0}});
    const json& lp = scored["choices"][0]["logprobs"];
    ASSERT_EQ(lp["tokens"].back(), next) << lp;
    EXPECT_NEAR(lp["token_logprobs"].back().get<double>(), generated, 1e-3);
}

// --api-key: every route but /health wants the key.
TEST_F(Server, ApiKeyIsRequiredWhenSet) {
    server::ServerOptions so;
    so.port = 0;
    so.api_key = "sk-lantern-test";
    server::HttpServer keyed(*model_, *engine_, so);
    keyed.bind();
    std::thread t([&] { keyed.serve(); });
    httplib::Client c("127.0.0.1", keyed.port());
    c.set_read_timeout(300, 0);
    const std::string body = json{{"prompt", "Hello"}, {"max_tokens", 2}, {"temperature", 0}}.dump();
    auto none = c.Post("/v1/completions", body, "application/json");
    auto wrong = c.Post("/v1/completions", httplib::Headers{{"Authorization", "Bearer sk-lantern-tesT"}}, body,
                        "application/json");
    auto models = c.Get("/v1/models");
    auto health = c.Get("/health");
    auto bearer = c.Post("/v1/completions", httplib::Headers{{"Authorization", "Bearer sk-lantern-test"}}, body,
                         "application/json");
    auto header = c.Get("/v1/models", httplib::Headers{{"X-Api-Key", "sk-lantern-test"}});
    keyed.stop();
    t.join();
    ASSERT_TRUE(none && wrong && models && health && bearer && header);
    EXPECT_EQ(none->status, 401);
    EXPECT_EQ(json::parse(none->body)["error"]["type"], "invalid_api_key") << none->body;
    EXPECT_EQ(wrong->status, 401);
    EXPECT_EQ(models->status, 401);
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(bearer->status, 200) << bearer->body;
    EXPECT_EQ(json::parse(bearer->body)["usage"]["completion_tokens"], 2);
    EXPECT_EQ(header->status, 200);
}

// n: that many choices, each drawn on its own (a seed gives choice i seed + i),
// whole or streamed alike.
TEST_F(Server, SeveralChoices) {
    const json user = {{{"role", "user"}, {"content", "Write a word."}}};
    const json body = {{"messages", user}, {"temperature", 1.2}, {"seed", 11}, {"max_tokens", 6}, {"n", 3}};
    const json a = post("/v1/chat/completions", body);
    ASSERT_EQ(a["choices"].size(), 3u) << a;
    std::vector<std::string> texts;
    int tokens = 0;
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(a["choices"][i]["index"], i);
        texts.push_back(a["choices"][i]["message"]["content"]);
    }
    EXPECT_FALSE(texts[0] == texts[1] && texts[1] == texts[2]) << a;  // their own draws
    EXPECT_EQ(post("/v1/chat/completions", body)["choices"], a["choices"]);  // and reproducible
    for (const json& c : a["choices"]) tokens += c["finish_reason"] == "length" ? 6 : 0;
    EXPECT_GE(a["usage"]["completion_tokens"].get<int>(), tokens);
    // Streamed: every choice's deltas, its own final chunk, one [DONE] at the end.
    json sbody = body;
    sbody["stream"] = true;
    auto res = client().Post("/v1/chat/completions", sbody.dump(), "application/json");
    ASSERT_TRUE(res);
    bool done = false;
    std::vector<std::string> streamed(3);
    std::vector<int> finals(3, 0);
    for (const json& chunk : sse_events(res->body, &done)) {
        const json& c = chunk["choices"][0];
        const int i = c["index"];
        if (!c["finish_reason"].is_null()) ++finals[static_cast<size_t>(i)];
        streamed[static_cast<size_t>(i)] += c["delta"].value("content", std::string());
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(streamed, texts);
    EXPECT_EQ(finals, std::vector<int>({1, 1, 1}));
}

// /v1/embeddings: unit vectors, one per input, from text or token ids;
// a text is nearer its paraphrase than an unrelated one.
TEST_F(Server, Embeddings) {
    const json r = post("/v1/embeddings", {{"input", json::array({"The cat sat on the mat.", "A cat was sitting on the mat.",
                                                                  "Quarterly revenue grew by four percent."})}});
    ASSERT_EQ(r["data"].size(), 3u) << r;
    std::vector<std::vector<float>> v;
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(r["data"][i]["index"], i);
        v.push_back(r["data"][i]["embedding"].get<std::vector<float>>());
        ASSERT_EQ(v.back().size(), static_cast<size_t>(model_->info().n_embd));
        double n = 0;
        for (float x : v.back()) n += static_cast<double>(x) * x;
        EXPECT_NEAR(n, 1.0, 1e-4);
    }
    auto cos = [&](size_t a, size_t b) {
        double d = 0;
        for (size_t k = 0; k < v[a].size(); ++k) d += static_cast<double>(v[a][k]) * v[b][k];
        return d;
    };
    EXPECT_GT(cos(0, 1), cos(0, 2));
    EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 15);
    // Token ids give the same vector as their text.
    const json ids = post("/tokenize", {{"content", "The cat sat on the mat."}});
    const json by_ids = post("/v1/embeddings", {{"input", ids["tokens"]}});
    const std::vector<float> w = by_ids["data"][0]["embedding"].get<std::vector<float>>();
    for (size_t k = 0; k < w.size(); k += 37) EXPECT_NEAR(w[k], v[0][k], 1e-4) << k;
    // base64 (what OpenAI's Python client asks for): the same floats' bytes.
    const json b64 = post("/v1/embeddings", {{"input", "The cat sat on the mat."}, {"encoding_format", "base64"}});
    const std::string text = b64["data"][0]["embedding"].get<std::string>();
    ASSERT_EQ(text.size(), (v[0].size() * 4 + 2) / 3 * 4);
    auto sextet = [](char c) -> uint32_t {
        const std::string digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        return static_cast<uint32_t>(digits.find(c));
    };
    std::vector<unsigned char> bytes;
    for (size_t i = 0; i < text.size(); i += 4) {
        const uint32_t w = sextet(text[i]) << 18 | sextet(text[i + 1]) << 12 | (text[i + 2] == '=' ? 0 : sextet(text[i + 2]) << 6) |
                           (text[i + 3] == '=' ? 0 : sextet(text[i + 3]));
        bytes.push_back(static_cast<unsigned char>(w >> 16));
        if (text[i + 2] != '=') bytes.push_back(static_cast<unsigned char>(w >> 8));
        if (text[i + 3] != '=') bytes.push_back(static_cast<unsigned char>(w));
    }
    ASSERT_EQ(bytes.size(), v[0].size() * 4);
    for (size_t k = 0; k < v[0].size(); ++k) {
        float f = 0;
        std::memcpy(&f, bytes.data() + 4 * k, 4);
        EXPECT_EQ(f, v[0][k]) << k;
    }
    EXPECT_EQ(server::base64_floats({1.0f, -2.0f}), "AACAPwAAAMA=");
    int status = 0;
    for (const json& b : {json{{"input", 5}}, json{{"input", json::array()}}, json{{"input", ""}},
                          json{{"input", "x"}, {"encoding_format", "hex"}}, json{{"input", json::array({-1})}}}) {
        post("/v1/embeddings", b, &status);
        EXPECT_EQ(status, 400) << b;
    }
}

// A token that is part of a UTF-8 character (byte-level BPE splits CJK and
// emoji): its text goes out with U+FFFD for the broken bytes, its bytes
// exactly, and the server lives on (a strict JSON dump used to throw on the
// engine thread while streaming and end the process).
TEST_F(Server, PartialUtf8TokensAreSentSafely) {
    const json ids = post("/tokenize", {{"content", "你好世界"}});
    ASSERT_GT(ids["tokens"].size(), 1u);
    const int first = ids["tokens"][0];
    int status = 0;
    const json piece = post("/detokenize", {{"tokens", json::array({first})}}, &status);
    EXPECT_EQ(status, 200) << piece;
    const json body = {{"prompt", "Hi"}, {"max_tokens", 2}, {"logprobs", 1}, {"temperature", 0},
                       {"logit_bias", {{std::to_string(first), 100}}}};
    const json whole = post("/v1/completions", body, &status);
    ASSERT_EQ(status, 200) << whole;
    const json& lp = whole["choices"][0]["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 2u) << lp;
    json sbody = body;
    sbody["stream"] = true;
    auto res = client().Post("/v1/completions", sbody.dump(), "application/json");
    ASSERT_TRUE(res);
    bool done = false;
    EXPECT_FALSE(sse_events(res->body, &done).empty());
    EXPECT_TRUE(done);
    // Chat logprobs carry each token's exact bytes.
    const json chat_r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                      {"max_tokens", 1}, {"logprobs", true}, {"temperature", 0},
                                                      {"logit_bias", {{std::to_string(first), 100}}}});
    const json& tok = chat_r["choices"][0]["logprobs"]["content"][0];
    const std::string text = "你好世界";
    std::vector<int> expected;
    const std::string one = model_->token_to_piece(first);
    for (char c : one) expected.push_back(static_cast<unsigned char>(c));
    EXPECT_EQ(tok["bytes"].get<std::vector<int>>(), expected) << tok;
    EXPECT_EQ(text.rfind(one, 0), 0u);
    auto h = client().Get("/health");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
}

// A file whose {arch}.pooling_type asks for the last token's state (as
// last-token embedding models' files do) is pooled that way.
TEST_F(Server, EmbeddingsFollowTheFilesPooling) {
    const std::string copy = temp_path("pooling-last.gguf").string();
    {
        const auto f = gguf::File::open(default_model_path().string());
        gguf::Writer w;
        for (const auto& [key, value] : f->metadata()) w.set(key, value);
        w.set("llama.pooling_type", uint32_t{3});  // LLAMA_POOLING_TYPE_LAST
        for (const gguf::TensorInfo& t : f->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
        w.write(copy);
    }
    ModelParams p;
    p.n_threads = 2;
    auto last = Model::load(copy, p);
    EXPECT_EQ(last->info().pooling, "last");
    EXPECT_EQ(model_->info().pooling, "mean");
    const std::vector<int32_t> ids = last->tokenize("The cat sat on the mat.", false, false);
    server::EngineParams ep;
    ep.n_slots = 1;
    ep.n_ctx = 128;
    server::Engine engine(*last, ep);
    const std::vector<float> pooled = engine.embed({ids}).at(0);
    // The last token's state, normalised, from a context of its own.
    Context ctx(*last, ContextParams{.n_ctx = 128, .embeddings = true});
    Batch b;
    for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int>(i), 0, i + 1 == ids.size());
    ctx.decode(b);
    const float* h = ctx.embeddings(0);
    double n = 0;
    for (int k = 0; k < last->info().n_embd; ++k) n += static_cast<double>(h[k]) * h[k];
    ASSERT_EQ(pooled.size(), static_cast<size_t>(last->info().n_embd));
    for (int k = 0; k < last->info().n_embd; k += 13) EXPECT_NEAR(pooled[k], h[k] / std::sqrt(n), 1e-4) << k;
    std::remove(copy.c_str());
}

// Fill in the middle: a model without FIM tokens refuses /infill and a
// completion's 'suffix'; a copy of the default model whose file names three
// of its special tokens as FIM markers answers both, llama.cpp's /infill in
// its own format (whole and streamed), from the prompt Model::fill_in_middle
// makes.
TEST_F(Server, FillInTheMiddle) {
    int status = 0;
    json e = post("/infill", {{"input_prefix", "def f():\n    "}, {"input_suffix", "\n"}}, &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("fill-in-the-middle"), std::string::npos) << e;
    e = post("/v1/completions", {{"prompt", "def f():\n    "}, {"suffix", "\n"}}, &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("'suffix'"), std::string::npos) << e;

    const std::string copy = temp_path("fim-model.gguf").string();
    {
        const auto f = gguf::File::open(default_model_path().string());
        gguf::Writer w;
        for (const auto& [key, value] : f->metadata()) w.set(key, value);
        w.set("tokenizer.ggml.fim_pre_token_id", uint32_t{3});  // <repo_name>
        w.set("tokenizer.ggml.fim_suf_token_id", uint32_t{4});  // <reponame>
        w.set("tokenizer.ggml.fim_mid_token_id", uint32_t{6});  // <filename>
        for (const gguf::TensorInfo& t : f->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
        w.write(copy);
    }
    ModelParams p;
    p.n_threads = 2;
    auto fim = Model::load(copy, p);
    ASSERT_TRUE(fim->has_fill_in_middle());
    server::EngineParams ep;
    ep.n_slots = 1;
    ep.n_ctx = 256;
    server::Engine engine(*fim, ep);
    server::ServerOptions so;
    so.port = 0;
    server::HttpServer http(*fim, engine, so);
    http.bind();
    std::thread serving([&] { http.serve(); });
    httplib::Client c("127.0.0.1", http.port());
    c.set_read_timeout(300, 0);
    auto call = [&](const std::string& path, const json& body, int* code) {
        auto res = c.Post(path, body.dump(), "application/json");
        EXPECT_TRUE(res);
        *code = res ? res->status : 0;
        return res ? res->body : std::string();
    };

    const std::string prefix = "def add(a, b):\n    ", suffix = "\n\nprint(add(1, 2))\n";
    const size_t prompt_tokens = fim->fill_in_middle({.prefix = prefix, .suffix = suffix}).tokens.size();
    const json infill = json::parse(call("/infill", {{"input_prefix", prefix}, {"input_suffix", suffix},
                                                     {"n_predict", 8}, {"temperature", 0}}, &status));
    ASSERT_EQ(status, 200) << infill;
    EXPECT_EQ(infill["stop"], true);
    EXPECT_EQ(infill["tokens_evaluated"], prompt_tokens);
    EXPECT_GT(infill["tokens_predicted"].get<int>(), 0);
    EXPECT_EQ(infill["truncated"], false);
    const std::string content = infill["content"].get<std::string>();

    // OpenAI's 'suffix' asks for the same, in the completions format.
    const json openai = json::parse(call("/v1/completions", {{"prompt", prefix}, {"suffix", suffix}, {"max_tokens", 8},
                                                             {"temperature", 0}}, &status));
    ASSERT_EQ(status, 200) << openai;
    EXPECT_EQ(openai["choices"][0]["text"], content);
    EXPECT_EQ(openai["usage"]["prompt_tokens"], prompt_tokens);

    // Streamed: pieces with stop false, then one event with stop true.
    const std::string body = call("/infill", {{"input_prefix", prefix}, {"input_suffix", suffix}, {"n_predict", 8},
                                              {"temperature", 0}, {"stream", true}}, &status);
    ASSERT_EQ(status, 200);
    bool done = false;
    const std::vector<json> events = sse_events(body, &done);
    EXPECT_FALSE(done);  // llama.cpp's streams end without [DONE]
    ASSERT_FALSE(events.empty());
    std::string streamed;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        EXPECT_EQ(events[i]["stop"], false);
        streamed += events[i]["content"].get<std::string>();
    }
    EXPECT_EQ(events.back()["stop"], true);
    EXPECT_EQ(events.back()["content"], "");
    EXPECT_EQ(streamed, content);

    // Text already written of the middle goes after the middle marker; other
    // files go first; a prompt too long for the context is cut, and says so.
    std::string long_prefix;
    for (int i = 0; i < 400; ++i) long_prefix += std::string("x") + std::to_string(i) + " = " + std::to_string(i) + "\n";
    const json cut = json::parse(call("/infill", {{"input_prefix", long_prefix}, {"input_suffix", suffix},
                                                  {"input_extra", {{{"filename", "util.py"}, {"text", "def g(): pass\n"}}}},
                                                  {"prompt", "return"}, {"n_predict", 4}, {"temperature", 0}}, &status));
    ASSERT_EQ(status, 200) << cut;
    EXPECT_EQ(cut["truncated"], true);
    EXPECT_LT(cut["tokens_evaluated"].get<int>(), 256);
    for (const json& b : {json{{"input_prefix", "a"}, {"n", 2}}, json{{"input_prefix", "a"}, {"logprobs", 2}},
                          json{{"input_prefix", "a"}, {"input_extra", "file"}}}) {
        e = json::parse(call("/infill", b, &status));
        EXPECT_EQ(status, 400) << b;
    }
    e = json::parse(call("/v1/completions", {{"prompt", "a"}, {"suffix", "b"}, {"echo", true}}, &status));
    EXPECT_EQ(status, 400);

    http.stop();
    serving.join();
    std::remove(copy.c_str());
}

// llama.cpp's /completion: its format, the text /v1/completions gives for
// the same prompt, why the answer stopped (the limit, a stop string, the
// end-of-generation token), timings, each token's probabilities, and
// prompts given as token ids or as texts and ids mixed.
TEST_F(Server, NativeCompletion) {
    const std::string prompt = "The capital of France is";
    int status = 0;
    const json a = post("/completion", {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}, {"n_probs", 3}},
                        &status);
    ASSERT_EQ(status, 200) << a;
    EXPECT_EQ(a["stop"], true);
    EXPECT_EQ(a["stop_type"], "limit");
    EXPECT_EQ(a["stopping_word"], "");
    EXPECT_EQ(a["tokens_predicted"], 8);
    const std::string content = a["content"].get<std::string>();
    ASSERT_GT(content.size(), 8u);

    // Timings: the prompt tokens decoded (not those found cached) and the
    // tokens generated, with their times.
    const json& t = a["timings"];
    EXPECT_EQ(t["predicted_n"], 8);
    EXPECT_EQ(t["prompt_n"].get<int>(), a["tokens_evaluated"].get<int>() - a["tokens_cached"].get<int>());
    EXPECT_EQ(t["cache_n"], a["tokens_cached"]);
    EXPECT_GT(t["prompt_ms"].get<double>(), 0.0);
    EXPECT_GT(t["predicted_ms"].get<double>(), 0.0);
    EXPECT_NEAR(t["predicted_per_second"].get<double>(), 8e3 / t["predicted_ms"].get<double>(), 1e-6);
    const json& g = a["generation_settings"];
    EXPECT_EQ(g["n_ctx"], 384);
    EXPECT_EQ(g["n_predict"], 8);
    EXPECT_EQ(g["n_probs"], 3);
    EXPECT_EQ(g["temperature"], 0.0);

    // One entry per token: greedy picks the most likely, the texts make up
    // the content, each with its bytes and three alternatives.
    const json& probs = a["completion_probabilities"];
    ASSERT_EQ(probs.size(), 8u);
    std::string joined;
    for (const json& p : probs) {
        joined += p["token"].get<std::string>();
        ASSERT_EQ(p["top_logprobs"].size(), 3u) << p;
        EXPECT_EQ(p["id"], p["top_logprobs"][0]["id"]) << p;
        EXPECT_FLOAT_EQ(p["logprob"].get<float>(), p["top_logprobs"][0]["logprob"].get<float>());
        EXPECT_LE(p["logprob"].get<float>(), 0.0f);
        EXPECT_EQ(p["bytes"].size(), p["token"].get<std::string>().size());
        EXPECT_EQ(model_->token_to_piece(p["id"].get<int32_t>()), p["token"].get<std::string>());
    }
    EXPECT_EQ(joined, content);

    // OpenAI's route gives the same text (decoding the whole prompt again:
    // cache_prompt false), and llama.cpp's timings beside it.
    const json o = post("/v1/completions",
                        {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}, {"cache_prompt", false}}, &status);
    ASSERT_EQ(status, 200) << o;
    EXPECT_EQ(o["choices"][0]["text"], content);
    EXPECT_EQ(o["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    EXPECT_EQ(o["timings"]["predicted_n"], 8);
    EXPECT_EQ(o["timings"]["prompt_n"], o["usage"]["prompt_tokens"]);

    // A stop string: the content ends before it, and says which it was.
    const std::string stop = content.substr(content.size() / 2, 3);
    const json w = post("/completion", {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0}, {"stop", {stop}}});
    EXPECT_EQ(w["stop_type"], "word") << w;
    EXPECT_EQ(w["stopping_word"], stop);
    EXPECT_EQ(w["content"], content.substr(0, content.find(stop)));
    // The end-of-generation token forced (llama.cpp's [[id, bias]] form).
    const json e = post("/completion", {{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0},
                                        {"logit_bias", json::array({json::array({model_->eos_token(), 100})})}});
    EXPECT_EQ(e["stop_type"], "eos") << e;
    EXPECT_EQ(e["content"], "");
    EXPECT_EQ(e["tokens_predicted"], 0);

    // Token ids in place of the text, on either route.
    const std::vector<int32_t> ids = model_->tokenize(prompt, true, false);
    const json by_ids = post("/completion", {{"prompt", ids}, {"n_predict", 8}, {"temperature", 0}});
    EXPECT_EQ(by_ids["content"], content);
    EXPECT_EQ(by_ids["tokens_evaluated"], ids.size());
    EXPECT_EQ(post("/v1/completions", {{"prompt", ids}, {"max_tokens", 8}, {"temperature", 0}})["choices"][0]["text"],
              content);
    // Texts and ids mixed: each text tokenized where it stands, a BOS only
    // in front of a first text; both routes read special tokens' names.
    const std::vector<int32_t> tail = model_->tokenize(" is", false, false);
    const json mixed = post("/completion", {{"prompt", {"The capital of France", tail[0]}}, {"n_predict", 1}});
    EXPECT_EQ(mixed["tokens_evaluated"], model_->tokenize("The capital of France", true, false).size() + 1) << mixed;
    const std::string chat_text = "<|im_start|>user\nHi<|im_end|>\n";
    const json special = post("/completion", {{"prompt", chat_text}, {"n_predict", 1}});
    EXPECT_EQ(special["tokens_evaluated"], model_->tokenize(chat_text, true, true).size());
    EXPECT_LT(model_->tokenize(chat_text, true, true).size(), model_->tokenize(chat_text, true, false).size());
    const json special_v1 = post("/v1/completions", {{"prompt", chat_text}, {"max_tokens", 1}});
    EXPECT_EQ(special_v1["usage"]["prompt_tokens"], model_->tokenize(chat_text, true, true).size()) << special_v1;

    // Streamed: pieces with their tokens' probabilities, then the last event
    // with the counts, why it stopped and the timings.
    auto res = client().Post("/completion", json{{"prompt", prompt}, {"n_predict", 8}, {"temperature", 0},
                                                 {"n_probs", 1}, {"stream", true}}.dump(), "application/json");
    ASSERT_TRUE(res);
    const std::vector<json> events = sse_events(res->body);
    ASSERT_GE(events.size(), 2u);
    std::string streamed;
    size_t tokens = 0;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
        EXPECT_EQ(events[i]["stop"], false);
        streamed += events[i]["content"].get<std::string>();
        tokens += events[i]["completion_probabilities"].size();
    }
    EXPECT_EQ(streamed, content);
    EXPECT_EQ(tokens, 8u);
    const json& last = events.back();
    EXPECT_EQ(last["stop"], true);
    EXPECT_EQ(last["content"], "");
    EXPECT_EQ(last["stop_type"], "limit");
    EXPECT_EQ(last["timings"]["predicted_n"], 8);
    EXPECT_FALSE(last.contains("completion_probabilities"));
    // OpenAI's stream: the last chunk of a single choice has the timings.
    res = client().Post("/v1/completions", json{{"prompt", prompt}, {"max_tokens", 4}, {"stream", true}}.dump(),
                        "application/json");
    ASSERT_TRUE(res);
    const std::vector<json> chunks = sse_events(res->body);
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(chunks.back()["timings"]["predicted_n"], 4) << chunks.back();

    // t_max_predict_ms: out of time, the answer ends at the first token
    // after its first line break (each token takes well over 1 ms here).
    const std::string list = "Fruits:\n1. Apple\n2. Banana\n3.";
    const json full = post("/completion", {{"prompt", list}, {"n_predict", 16}, {"temperature", 0}, {"n_probs", 1}});
    size_t first_break = 0;
    while (first_break < full["completion_probabilities"].size() &&
           full["completion_probabilities"][first_break]["token"].get<std::string>().find('\n') == std::string::npos) {
        ++first_break;
    }
    ASSERT_LT(first_break + 2, full["tokens_predicted"].get<size_t>()) << full["content"];
    const json timed = post("/completion", {{"prompt", list}, {"n_predict", 16}, {"temperature", 0}, {"t_max_predict_ms", 1}});
    EXPECT_EQ(timed["stop_type"], "limit");
    EXPECT_LE(timed["tokens_predicted"].get<size_t>(), first_break + 2) << timed["content"];
    EXPECT_NE(timed["content"].get<std::string>().find('\n'), std::string::npos);
    EXPECT_EQ(full["content"].get<std::string>().rfind(timed["content"].get<std::string>(), 0), 0u);

    // n_predict 0 reads the prompt into a slot's cache and generates
    // nothing: a longer prompt that starts with it then finds it there.
    const std::string warm = "A long preamble about rivers, lakes and the sea, read once";
    const json w0 = post("/completion", {{"prompt", warm}, {"n_predict", 0}}, &status);
    ASSERT_EQ(status, 200) << w0;
    EXPECT_EQ(w0["content"], "");
    EXPECT_EQ(w0["tokens_predicted"], 0);
    const json w1 = post("/completion", {{"prompt", warm + ", and then a question:"}, {"n_predict", 1}});
    EXPECT_GE(w1["tokens_cached"].get<int>(), w0["tokens_evaluated"].get<int>() - 1) << w1;
    // response_fields: only those, each under its path (llama.vim reads
    // "timings/prompt_n" so); one the answer lacks is left out.
    const json fields = post("/completion", {{"prompt", prompt}, {"n_predict", 2}, {"temperature", 0},
                                             {"response_fields", {"content", "timings/predicted_n", "tokens_cached", "no/such"}}});
    EXPECT_EQ(fields.size(), 3u) << fields;
    EXPECT_EQ(fields["timings/predicted_n"], 2);
    EXPECT_EQ(fields["content"], content.substr(0, fields["content"].get<std::string>().size()));
    EXPECT_TRUE(fields.contains("tokens_cached"));

    // n_indent: a line after the first that starts less indented ends the
    // answer before it (a completion that closed its block), whole or
    // streamed (the streamed pieces never include the cut line's spaces).
    // The cut line here starts with spaces (fewer than 8), which a stream
    // must not have sent.
    const std::string code = "def add(a, b):\n    return a + b\n\ndef sub(a, b):";
    const std::string free_text = post("/completion", {{"prompt", code}, {"n_predict", 40}, {"temperature", 0}})["content"];
    const size_t cut = server::dedent_at(free_text, 8);
    ASSERT_NE(cut, std::string::npos) << free_text;
    ASSERT_EQ(free_text[cut], ' ') << free_text;
    const json indented = post("/completion", {{"prompt", code}, {"n_predict", 40}, {"temperature", 0}, {"n_indent", 8}});
    EXPECT_EQ(indented["content"], free_text.substr(0, cut));
    EXPECT_EQ(indented["stop_type"], "limit");
    res = client().Post("/completion", json{{"prompt", code}, {"n_predict", 40}, {"temperature", 0}, {"n_indent", 8},
                                            {"stream", true}}.dump(), "application/json");
    ASSERT_TRUE(res);
    std::string pieces;
    for (const json& ev : sse_events(res->body)) pieces += ev["content"].get<std::string>();
    EXPECT_EQ(pieces, free_text.substr(0, cut));

    // json_schema (llama.cpp's field): the answer follows the schema.
    const json schema = json::parse(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                                        "required": ["city"], "additionalProperties": false})");
    const json held = post("/completion", {{"prompt", "The capital of France as JSON:"}, {"n_predict", 40},
                                           {"temperature", 0}, {"json_schema", schema}}, &status);
    ASSERT_EQ(status, 200) << held;
    const json reply = json::parse(held["content"].get<std::string>(), nullptr, false);
    ASSERT_TRUE(reply.is_object()) << held["content"];
    EXPECT_EQ(reply.size(), 1u) << reply;
    EXPECT_TRUE(reply["city"].is_string()) << reply;

    // A prompt found in a slot's cache, unless the request says not to.
    EXPECT_GT(post("/completion", {{"prompt", prompt}, {"n_predict", 1}})["tokens_cached"].get<int>(), 0);
    EXPECT_EQ(post("/completion", {{"prompt", prompt}, {"n_predict", 1}, {"cache_prompt", false}})["tokens_cached"], 0);

    for (const json& b : {json{{"prompt", {{"a", 1}}}}, json{{"prompt", json::array({1, json::array({2})})}},
                          json{{"prompt", json::array({99999999})}}, json{{"prompt", json::array({-1})}},
                          json{{"prompt", json::array()}}, json{{"prompt", "x"}, {"n_probs", -1}},
                          json{{"prompt", "x"}, {"n_probs", 1001}}, json{{"prompt", "x"}, {"logprobs", 2}},
                          json{{"prompt", "x"}, {"n", 2}}, json{{"prompt", "x"}, {"logit_bias", {{1}}}},
                          json{{"prompt", "x"}, {"repeat_last_n", 2000000000}}, json{{"prompt", "x"}, {"t_max_predict_ms", -1}},
                          json{{"prompt", "x"}, {"n_predict", -2}}, json{{"prompt", "x"}, {"response_fields", "content"}},
                          json{{"prompt", "x"}, {"n_indent", -1}}, json{{"prompt", "x"}, {"json_schema", "object"}},
                          json{{"prompt", "x"}, {"json_schema", {{"type", "string"}, {"format", "iri"}}}}}) {
        const json err = post("/completion", b, &status);
        EXPECT_EQ(status, 400) << b << err;
    }
    EXPECT_NE(post("/completion", {{"prompt", "x"}, {"logprobs", 2}})["error"]["message"].get<std::string>().find("n_probs"),
              std::string::npos);
    for (const json& b : {json{{"prompt", json::array({"a", 1})}}, json{{"prompt", json::array({1})}, {"suffix", "x"}},
                          json{{"prompt", {"a", "b"}}, {"stream", true}}, json{{"prompt", {"a", "b"}}, {"n", 16}, {"max_tokens", 1},
                          {"seed", 1}, {"temperature", 1}, {"echo", false}, {"logprobs", 30}}}) {
        post("/v1/completions", b, &status);
        EXPECT_EQ(status, 400) << b;
    }
}

// OpenAI's completions with several prompts (texts or token lists, as
// evaluation harnesses batch them): one response whose choices follow the
// prompts, n each, each the answer its prompt gets alone; the usage summed.
TEST_F(Server, SeveralPromptsInOneCompletionsRequest) {
    const std::vector<std::string> prompts = {"The capital of France is", "Water boils at", "My favourite colour is"};
    std::vector<json> alone;
    int prompt_tokens = 0, completion_tokens = 0;
    for (const std::string& p : prompts) {
        alone.push_back(post("/v1/completions", {{"prompt", p}, {"max_tokens", 6}, {"temperature", 0}}));
        prompt_tokens += alone.back()["usage"]["prompt_tokens"].get<int>();
        completion_tokens += 2 * alone.back()["usage"]["completion_tokens"].get<int>();
    }
    int status = 0;
    const json all = post("/v1/completions", {{"prompt", prompts}, {"max_tokens", 6}, {"temperature", 0}, {"n", 2}}, &status);
    ASSERT_EQ(status, 200) << all;
    ASSERT_EQ(all["choices"].size(), 6u) << all;
    for (size_t i = 0; i < 6; ++i) {
        EXPECT_EQ(all["choices"][i]["index"], i);
        EXPECT_EQ(all["choices"][i]["text"], alone[i / 2]["choices"][0]["text"]) << i;
    }
    EXPECT_EQ(all["usage"]["prompt_tokens"], prompt_tokens);
    EXPECT_EQ(all["usage"]["completion_tokens"], completion_tokens);
    EXPECT_FALSE(all.contains("timings"));
    // Token lists, with echo and logprobs: each choice starts with its prompt.
    json lists = json::array();
    for (const std::string& p : prompts) lists.push_back(model_->tokenize(p, true, false));
    const json echoed = post("/v1/completions", {{"prompt", lists}, {"max_tokens", 2}, {"temperature", 0}, {"echo", true},
                                                 {"logprobs", 1}}, &status);
    ASSERT_EQ(status, 200) << echoed;
    ASSERT_EQ(echoed["choices"].size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        const std::string text = echoed["choices"][i]["text"];
        EXPECT_EQ(text.rfind(prompts[i], 0), 0u) << text;
        const size_t scored = echoed["choices"][i]["logprobs"]["tokens"].size();
        EXPECT_GT(scored, lists[i].size());  // the prompt's tokens, then the answer's
        EXPECT_LE(scored, lists[i].size() + 2);
    }
}

// Slots whose caches share nothing with a prompt go by age: requests with
// other prompts take the slots used longest ago, and a conversation's cache
// lasts until every other slot has been taken since.
TEST_F(Server, IdleSlotsAreTakenLeastRecentlyUsedFirst) {
    const std::string prompt = "Quantum physics explains how";
    auto ask = [](const std::string& p) { return post("/completion", {{"prompt", p}, {"n_predict", 1}}); };
    ask(prompt);
    for (const char* other : {"Apples grow on", "Bright stars shine over", "Cold rivers run through"}) ask(other);
    const json again = ask(prompt);
    EXPECT_EQ(again["tokens_cached"].get<int>(), again["tokens_evaluated"].get<int>() - 1) << again;
}

// Where n_indent cuts: the first line after the first that starts within
// the indent (spaces and tabs one column each), blank lines skipped.
// `lantern serve -ctk q8_0 -ctv q8_0`: the slots' cache takes the types and
// answers as the f16 one does (greedy); an unknown type stops the engine
// from starting, naming it.
TEST_F(Server, CacheTypesReachTheSlots) {
    auto answer = [&](const std::string& k, const std::string& v, std::string* summary) {
        server::EngineParams ep;
        ep.n_slots = 2;
        ep.n_ctx = 128;
        ep.cache_type_k = k;
        ep.cache_type_v = v;
        server::Engine engine(*model_, ep);
        *summary = engine.cache_summary();
        auto req = std::make_shared<server::GenerationRequest>();
        req->prompt = model_->tokenize(model_->apply_chat_template({{"user", "What is the capital of France?"}}, true),
                                       false, true);
        req->sampling.temperature = 0.0f;
        req->max_tokens = 10;
        std::promise<server::GenerationResult> done;
        req->on_done = [&](const server::GenerationResult& r) { done.set_value(r); };
        engine.submit(req);
        return done.get_future().get().text;
    };
    std::string q8, f16;
    EXPECT_EQ(answer("q8_0", "q8_0", &q8), answer("f16", "f16", &f16));
    EXPECT_NE(q8.find("K q8_0, V q8_0, 2 x 128 cells"), std::string::npos) << q8;
    EXPECT_NE(f16.find("K f16, V f16, 2 x 128 cells"), std::string::npos) << f16;
    server::EngineParams bad;
    bad.cache_type_v = "q6_K";
    try {
        server::Engine engine(*model_, bad);
        ADD_FAILURE() << "an engine started with a q6_K cache";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("q6_K"), std::string::npos) << e.what();
    }
}

TEST(ServerEngine, DedentAt) {
    EXPECT_EQ(server::dedent_at("x = 1", 4), std::string::npos);  // one line: the cursor's own
    EXPECT_EQ(server::dedent_at("x\n    y\n\t\tz\n   ", 2), std::string::npos);  // a last line of spaces waits
    EXPECT_EQ(server::dedent_at("x\n    y\n\n  \r\nz = 2", 4), 13u);
    EXPECT_EQ(server::dedent_at("x\n    y\n\t\tz\n", 4), 8u);
    EXPECT_EQ(server::dedent_at("x\n\tz\n", 2), 2u);
    EXPECT_EQ(server::dedent_at("\nreturn", 1), 1u);
    EXPECT_EQ(server::dedent_at("\nreturn", 0), std::string::npos);
}

// The engine's side of a client that left: a request whose client is gone
// before it takes a slot never takes one (the slot's cache stays as it
// was), and one that leaves while generating ends at the next step, its
// text so far kept; the request beside them runs on.
TEST_F(Server, EngineCancelsRequestsWhoseClientLeft) {
    server::EngineParams ep;
    ep.n_slots = 1;
    ep.n_ctx = 256;
    server::Engine engine(*model_, ep);
    auto request = [&](int max_tokens) {
        auto r = std::make_shared<server::GenerationRequest>();
        r->prompt = model_->tokenize("Once upon a time", true, false);
        r->max_tokens = max_tokens;
        r->ignore_eos = true;
        return r;
    };
    std::vector<std::future<server::GenerationResult>> results;
    auto watch = [&](server::GenerationRequest& r) {
        auto done = std::make_shared<std::promise<server::GenerationResult>>();
        results.push_back(done->get_future());
        r.on_done = [done](const server::GenerationResult& g) { done->set_value(g); };
    };
    // Holds the one slot while the other two wait behind it.
    auto first = request(40);
    watch(*first);
    auto never_waited = request(40);
    watch(*never_waited);
    never_waited->client_gone = [] { return true; };
    auto leaves = request(200);
    watch(*leaves);
    auto asked = std::make_shared<std::atomic<int>>(0);
    leaves->client_gone = [asked] { return ++*asked > 10; };  // gone after some steps
    engine.submit(first);
    engine.submit(never_waited);
    engine.submit(leaves);
    const server::GenerationResult a = results[0].get(), b = results[1].get(), c = results[2].get();
    EXPECT_EQ(a.finish_reason, "length");
    EXPECT_EQ(a.completion_tokens, 40);
    EXPECT_EQ(b.finish_reason, "error");
    EXPECT_NE(b.error.find("cancelled"), std::string::npos) << b.error;
    EXPECT_EQ(b.completion_tokens, 0);
    EXPECT_EQ(b.cached_tokens, 0);  // admitted, it would have found its prompt in the slot's cache
    EXPECT_EQ(c.finish_reason, "error");
    EXPECT_NE(c.error.find("cancelled"), std::string::npos) << c.error;
    EXPECT_GT(c.completion_tokens, 0);
    EXPECT_LT(c.completion_tokens, 200);
    EXPECT_FALSE(c.text.empty());
    const server::EngineStats st = engine.stats();
    EXPECT_EQ(st.requests_done, 3u);
    EXPECT_EQ(st.requests_cancelled, 2u);
    EXPECT_EQ(st.generated_tokens, static_cast<uint64_t>(40 + c.completion_tokens));
    EXPECT_EQ(st.prompt_tokens_cached, static_cast<uint64_t>(a.cached_tokens + c.cached_tokens));
    EXPECT_GT(c.cached_tokens, 0);
}

// llama.cpp's /props: the defaults a request gets, the slots, the template.
TEST_F(Server, Props) {
    auto res = client().Get("/props");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200);
    const json p = json::parse(res->body);
    EXPECT_EQ(p["total_slots"], 4);
    EXPECT_EQ(p["default_generation_settings"]["n_ctx"], 384);
    const json& d = p["default_generation_settings"]["params"];
    const SamplerParams defaults;
    EXPECT_FLOAT_EQ(d["temperature"].get<float>(), defaults.temperature);
    EXPECT_EQ(d["top_k"], defaults.top_k);
    EXPECT_EQ(d["n_predict"], 256);
    EXPECT_EQ(d["seed"], -1);
    EXPECT_NE(p["chat_template"].get<std::string>().find("im_start"), std::string::npos);
    EXPECT_EQ(p["eos_token"], model_->token_to_piece(model_->eos_token(), true));
}

// llama.cpp's /apply-template gives the prompt /v1/chat/completions would
// decode; /v1/models carries the model's shape.
TEST_F(Server, ApplyTemplateAndModelMeta) {
    const json messages = {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}};
    int status = 0;
    const json t = post("/apply-template", {{"messages", messages}}, &status);
    ASSERT_EQ(status, 200) << t;
    EXPECT_EQ(t["prompt"], model_->apply_chat_template({{"system", "Be brief."}, {"user", "Hi"}}, true));
    // Its prompt through /completion (special tokens read as such) answers
    // as the chat route does.
    const json a = post("/completion", {{"prompt", t["prompt"]}, {"n_predict", 8}, {"temperature", 0}});
    const json c = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}});
    EXPECT_EQ(a["content"], c["choices"][0]["message"]["content"]);
    EXPECT_EQ(a["tokens_evaluated"], c["usage"]["prompt_tokens"]);
    post("/apply-template", {{"messages", "Hi"}}, &status);
    EXPECT_EQ(status, 400);

    auto m = client().Get("/v1/models");
    ASSERT_TRUE(m);
    const json meta = json::parse(m->body)["data"][0]["meta"];
    EXPECT_EQ(meta["n_vocab"], model_->n_vocab());
    EXPECT_EQ(meta["n_embd"], model_->info().n_embd);
    EXPECT_EQ(meta["n_ctx"], 384);
    EXPECT_GT(meta["size"].get<uint64_t>(), 0u);
}

TEST_F(Server, MalformedRequestsGet400) {
    auto bad_json = client().Post("/v1/chat/completions", "{not json", "application/json");
    ASSERT_TRUE(bad_json);
    EXPECT_EQ(bad_json->status, 400);
    EXPECT_NE(json::parse(bad_json->body)["error"]["message"].get<std::string>().find("JSON"), std::string::npos);
    int status = 0;
    json e = post("/v1/chat/completions", {{"messages", "hello"}}, &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("messages"), std::string::npos);
    e = post("/v1/completions", {{"prompt", "hi"}, {"temperature", "hot"}}, &status);
    EXPECT_EQ(status, 400);
    std::string huge;
    for (int i = 0; i < 500; ++i) huge += "word ";
    e = post("/v1/completions", {{"prompt", huge}}, &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(e["error"]["message"].get<std::string>().find("tokens"), std::string::npos);
    const json user = {{{"role", "user"}, {"content", "hi"}}};
    for (const json& b : {json{{"messages", user}, {"top_logprobs", 2}},
                          json{{"messages", user}, {"logprobs", true}, {"top_logprobs", 21}},
                          json{{"messages", user}, {"logit_bias", {{"abc", 5}}}},
                          json{{"messages", user}, {"logit_bias", {{"15", 500}}}},
                          json{{"messages", user}, {"logit_bias", {{"15", "up"}}}},
                          json{{"messages", user}, {"logit_bias", json::array({15})}},
                          json{{"messages", user}, {"logit_bias", {{"99999999", 1}}}}}) {
        e = post("/v1/chat/completions", b, &status);
        EXPECT_EQ(status, 400) << b;
        EXPECT_NE(e["error"]["message"].get<std::string>().find("log"), std::string::npos) << e;
    }
    for (const json& b : {json{{"prompt", "hi"}, {"logprobs", -2}}, json{{"prompt", "hi"}, {"echo", true}, {"stream", true}},
                          json{{"prompt", "hi"}, {"max_tokens", 0}}, json{{"prompt", "hi"}, {"echo", true}, {"max_tokens", -1}},
                          json{{"prompt", "hi"}, {"n", 0}}, json{{"prompt", "hi"}, {"n", 17}},
                          json{{"prompt", "hi"}, {"tools", json::array({{{"type", "function"}}})}},
                          json{{"prompt", "hi"}, {"repeat_penalty", 0}}, json{{"prompt", "hi"}, {"min_p", 2}},
                          json{{"prompt", "hi"}, {"frequency_penalty", 1e39}}}) {
        e = post("/v1/completions", b, &status);
        EXPECT_EQ(status, 400) << b;
    }
    auto missing = client().Get("/v2/nothing");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    // An empty tool list (some clients always send one) is no request for tools.
    post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 1}, {"tools", json::array()}}, &status);
    EXPECT_EQ(status, 200);
    // The server still answers after all that.
    EXPECT_EQ(chat("What is the capital of France? Answer in one sentence.")["choices"][0]["message"]["content"],
              "The capital of France is Paris.");
}

// Function calling with the default model, whose template renders no tools
// (lantern's instructions stand in): a required call is constrained to a
// valid call of one of the tools, a named one to that function; streamed,
// the call comes as one delta; offered but not required, a plain question
// gets text; the conversation's calls and answers go back into the prompt.
const json kWeatherTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Current time in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");

TEST_F(Server, ToolCallsRequiredAndNamed) {
    const json user = {{{"role", "user"}, {"content", "What is the weather in Paris?"}}};
    json body = {{"messages", user}, {"tools", kWeatherTools}, {"tool_choice", "required"},
                 {"temperature", 0}, {"max_tokens", 96}};
    for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "get_time"}}}}}) {
        body["tool_choice"] = choice;
        const json r = post("/v1/chat/completions", body);
        const json& c = r["choices"][0];
        EXPECT_EQ(c["finish_reason"], "tool_calls") << r;
        EXPECT_TRUE(c["message"]["content"].is_null()) << r;
        ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r;
        const json& call = c["message"]["tool_calls"][0];
        EXPECT_EQ(call["type"], "function");
        EXPECT_EQ(call["id"].get<std::string>().size(), 9u);
        const std::string name = call["function"]["name"];
        EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
        if (choice.is_object()) {
            EXPECT_EQ(name, "get_time");
        }
        EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>()).is_object()) << call;
    }
    // One function allowed: its call also follows the parameters' schema.
    json one = body;
    one["tools"] = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}}])");
    one["tool_choice"] = "required";
    const json w = post("/v1/chat/completions", one);
    ASSERT_EQ(w["choices"][0]["message"]["tool_calls"].size(), 1u) << w;
    const json args = json::parse(w["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    EXPECT_EQ(args.size(), 2u) << args;
    EXPECT_TRUE(args["city"].is_string()) << args;
    EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << args;
    // Streamed: no text deltas, the call in one delta, then tool_calls.
    const json full = post("/v1/chat/completions", body);
    json sbody = body;
    sbody["stream"] = true;
    auto res = client().Post("/v1/chat/completions", sbody.dump(), "application/json");
    ASSERT_TRUE(res);
    json call;
    std::string text, finish;
    for (const json& chunk : sse_events(res->body)) {
        const json& c = chunk["choices"][0];
        if (c["delta"].contains("tool_calls")) call = c["delta"]["tool_calls"][0];
        if (c["delta"].contains("content") && c["delta"]["content"].is_string()) text += c["delta"]["content"].get<std::string>();
        if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    }
    EXPECT_EQ(text, "");
    EXPECT_EQ(finish, "tool_calls");
    EXPECT_EQ(call["index"], 0);
    EXPECT_EQ(call["function"], full["choices"][0]["message"]["tool_calls"][0]["function"]) << res->body;
}

// The older "functions"/"function_call": the call comes back as
// message.function_call (delta.function_call streamed), finish_reason
// function_call, as OpenAI answered such requests.
TEST_F(Server, LegacyFunctionCall) {
    json functions = json::array();
    for (const json& t : kWeatherTools) functions.push_back(t["function"]);
    json body = {{"messages", {{{"role", "user"}, {"content", "What time is it in Rome?"}}}},
                 {"functions", functions}, {"function_call", {{"name", "get_time"}}}, {"temperature", 0}, {"max_tokens", 64}};
    const json r = post("/v1/chat/completions", body);
    const json& c = r["choices"][0];
    EXPECT_EQ(c["finish_reason"], "function_call") << r;
    EXPECT_FALSE(c["message"].contains("tool_calls")) << r;
    EXPECT_EQ(c["message"]["function_call"]["name"], "get_time") << r;
    EXPECT_TRUE(json::parse(c["message"]["function_call"]["arguments"].get<std::string>()).is_object());
    body["stream"] = true;
    auto res = client().Post("/v1/chat/completions", body.dump(), "application/json");
    ASSERT_TRUE(res);
    json call;
    for (const json& chunk : sse_events(res->body)) {
        if (chunk["choices"][0]["delta"].contains("function_call")) call = chunk["choices"][0]["delta"]["function_call"];
    }
    EXPECT_EQ(call, c["message"]["function_call"]) << res->body;
}

TEST_F(Server, ToolsOfferedButNotCalled) {
    const json user = {{{"role", "user"}, {"content", "What is the capital of France? Answer in one sentence."}}};
    const json body = {{"messages", user}, {"tools", kWeatherTools}, {"temperature", 0}, {"max_tokens", 24}};
    const json r = post("/v1/chat/completions", body);
    const json& c = r["choices"][0];
    EXPECT_FALSE(c["message"].contains("tool_calls")) << r;
    ASSERT_TRUE(c["message"]["content"].is_string()) << r;
    EXPECT_NE(c["message"]["content"].get<std::string>(), "");
    // The tools are in the prompt.
    EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), chat("What is the capital of France? Answer in one sentence.")["usage"]["prompt_tokens"].get<int>() + 50);
    // Streamed text equals the full text (held-back text comes at the end).
    json sbody = body;
    sbody["stream"] = true;
    auto res = client().Post("/v1/chat/completions", sbody.dump(), "application/json");
    ASSERT_TRUE(res);
    std::string text, finish;
    for (const json& chunk : sse_events(res->body)) {
        const json& d = chunk["choices"][0]["delta"];
        if (d.contains("content") && d["content"].is_string()) text += d["content"].get<std::string>();
        if (!chunk["choices"][0]["finish_reason"].is_null()) finish = chunk["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(text, c["message"]["content"].get<std::string>());
    EXPECT_EQ(finish, c["finish_reason"].get<std::string>());
    // tool_choice none: the tools are not offered.
    json none = body;
    none["tool_choice"] = "none";
    EXPECT_EQ(post("/v1/chat/completions", none)["choices"][0]["message"]["content"], "The capital of France is Paris.");
}

TEST_F(Server, ToolConversationsAndBadToolRequests) {
    const json convo = json::parse(R"([
      {"role": "user", "content": "What is the weather in Paris?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "abcdefghi", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "abcdefghi", "content": "{\"sky\": \"clear\", \"celsius\": 21}"}])");
    int status = 0;
    const json r = post("/v1/chat/completions",
                        {{"messages", convo}, {"tools", kWeatherTools}, {"temperature", 0}, {"max_tokens", 8}}, &status);
    EXPECT_EQ(status, 200) << r;
    const json first = post("/v1/chat/completions", {{"messages", json::array({convo[0]})}, {"tools", kWeatherTools},
                                                     {"temperature", 0}, {"max_tokens", 8}});
    EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), first["usage"]["prompt_tokens"].get<int>() + 20);

    const json user = {{{"role", "user"}, {"content", "hi"}}};
    struct Bad {
        json body;
        const char* says;
    };
    for (const Bad& b : {
             Bad{{{"messages", user}, {"tool_choice", "required"}}, "no tools"},
             Bad{{{"messages", user}, {"tools", kWeatherTools}, {"tool_choice", "sometimes"}}, "tool_choice"},
             Bad{{{"messages", user}, {"tools", kWeatherTools},
                  {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_stock"}}}}}},
                 "get_stock"},
             Bad{{{"messages", user}, {"tools", json::array({{{"type", "function"}}})}}, "tools[0]"},
             Bad{{{"messages", user}, {"tools", "get_weather"}}, "tools"},
             Bad{{{"messages", {{{"role", "user"}, {"content", "hi"}, {"tool_calls", json::array()}}}}}, "tool_calls"},
             Bad{{{"messages", {{{"role", "assistant"}, {"content", nullptr},
                                 {"tool_calls", {{{"type", "function"}, {"function", {{"arguments", "{}"}}}}}}}}}},
                 "name"},
             // Found by fuzz/chat_request: a 500, or undefined behaviour, before.
             Bad{{{"messages", user}, {"tools", json::array({{{"type", {{"name", "f"}}}, {"function", {{"name", "f"}}}}})}},
                 "tools[0]"},
             Bad{{{"messages", user}, {"max_tokens", 1e30}}, "'max_tokens' must be a whole number in range"},
             Bad{{{"messages", user}, {"max_tokens", 8.5}}, "'max_tokens' must be a whole number in range"},
             Bad{{{"messages", user}, {"temperature", 1e300}}, "'temperature' is out of range"},
         }) {
        const json e = post("/v1/chat/completions", b.body, &status);
        EXPECT_EQ(status, 400) << b.body;
        EXPECT_NE(e["error"]["message"].get<std::string>().find(b.says), std::string::npos) << e;
    }
}

TEST_F(Server, TokenizeRoundTrip) {
    const json t = post("/tokenize", {{"content", "Hello world"}});
    ASSERT_TRUE(t["tokens"].is_array());
    EXPECT_GE(t["tokens"].size(), 2u);
    EXPECT_EQ(post("/detokenize", {{"tokens", t["tokens"]}})["content"], "Hello world");
    // with_pieces: each id with its text, or its bytes where the text is
    // part of a character (this byte-level vocabulary splits "😀").
    const json p = post("/tokenize", {{"content", "Hello 😀"}, {"with_pieces", true}});
    std::string bytes;
    bool split = false;
    for (const json& x : p["tokens"]) {
        EXPECT_EQ(x["piece"].is_string() ? x["piece"].get<std::string>() : std::string("?"),
                  x["piece"].is_string() ? model_->token_to_piece(x["id"].get<int32_t>(), true) : std::string("?"));
        if (x["piece"].is_string()) {
            bytes += x["piece"].get<std::string>();
        } else {
            split = true;
            for (const json& b : x["piece"]) bytes += static_cast<char>(b.get<int>());
        }
    }
    EXPECT_EQ(bytes, "Hello 😀");
    EXPECT_TRUE(split) << p;
    // A field of the wrong type is the client's error (it was a 500).
    int status = 0;
    const json e = post("/tokenize", {{"content", "Hi"}, {"add_special", "yes"}}, &status);
    EXPECT_EQ(status, 400) << e;
    EXPECT_NE(e.dump().find("add_special"), std::string::npos) << e;
}

// Slots: a slot's cache saved to a file, erased, and restored into another
// slot, where the same request then finds its whole prompt but the last
// token and gives the same greedy text; bad requests get 4xx, a server
// without --slot-save-path 501.
TEST_F(Server, SlotsSaveRestoreAndErase) {
    auto get_slots = [] {
        auto res = client().Get("/slots");
        EXPECT_TRUE(res && res->status == 200);
        return res ? json::parse(res->body) : json::array();
    };
    for (int i = 0; i < 4; ++i) {
        const json r = post("/slots/" + std::to_string(i) + "?action=erase", json::object());
        EXPECT_EQ(r["id_slot"], i) << r;
    }
    for (const json& sl : get_slots()) EXPECT_EQ(sl["n_cached_tokens"], 0) << sl;
    const json req = {{"prompt", "The lighthouse keeper counted the ships that passed"}, {"temperature", 0}, {"max_tokens", 6}};
    const json first = post("/v1/completions", req);
    int used = -1, held = 0;
    for (const json& sl : get_slots()) {
        EXPECT_EQ(sl["is_processing"], false);
        if (sl["n_cached_tokens"].get<int>() > 0) used = sl["id"], held = sl["n_cached_tokens"];
    }
    ASSERT_GE(used, 0);
    // The prompt and the generated tokens but the last sampled one.
    EXPECT_GE(held, first["usage"]["prompt_tokens"].get<int>());
    EXPECT_LE(held, first["usage"]["prompt_tokens"].get<int>() + first["usage"]["completion_tokens"].get<int>());
    const std::string at = "/slots/" + std::to_string(used);
    const json saved = post(at + "?action=save", {{"filename", "lighthouse.bin"}});
    EXPECT_EQ(saved["n_saved"], held) << saved;
    EXPECT_GT(saved["n_written"].get<int64_t>(), 1000) << saved;
    EXPECT_EQ(post(at + "?action=erase", json::object())["n_erased"], held);
    for (const json& sl : get_slots()) EXPECT_EQ(sl["n_cached_tokens"], 0) << sl;
    const int other = (used + 1) % 4;
    const json restored = post("/slots/" + std::to_string(other) + "?action=restore", {{"filename", "lighthouse.bin"}});
    EXPECT_EQ(restored["n_restored"], held) << restored;
    const json again = post("/v1/completions", req);
    EXPECT_EQ(again["choices"][0]["text"], first["choices"][0]["text"]);
    EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
              first["usage"]["prompt_tokens"].get<int>() - 1) << again;

    int status = 0;
    post(at + "?action=fly", json::object(), &status);
    EXPECT_EQ(status, 400);
    post(at + "?action=save", {{"filename", "../escape.bin"}}, &status);
    EXPECT_EQ(status, 400);
    post(at + "?action=restore", {{"filename", "missing.bin"}}, &status);
    EXPECT_EQ(status, 404);
    post("/slots/99?action=erase", json::object(), &status);
    EXPECT_EQ(status, 400);
    std::ofstream(slot_dir() + "/damaged.bin") << "LNTS and then nonsense";
    const json bad = post(at + "?action=restore", {{"filename", "damaged.bin"}}, &status);
    EXPECT_EQ(status, 400);
    EXPECT_NE(bad["error"]["message"].get<std::string>().find("sequence state"), std::string::npos) << bad;
    EXPECT_FALSE(std::filesystem::exists(slot_dir() + "/../escape.bin"));

    server::ServerOptions so;
    so.port = 0;
    server::HttpServer plain(*model_, *engine_, so);
    plain.bind();
    std::thread t([&] { plain.serve(); });
    httplib::Client c("127.0.0.1", plain.port());
    auto res = c.Post(at + "?action=save", json{{"filename", "x.bin"}}.dump(), "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 501);
    plain.stop();
    t.join();
    std::filesystem::remove_all(slot_dir());
}

}  // namespace
}  // namespace lantern::test
