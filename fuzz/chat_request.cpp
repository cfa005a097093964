// A server request's body, and a reply to it. Input: "body\0reply\0chunks"
// (chunks: bytes giving the lengths the reply is streamed in). The body is
// parsed as a chat request, a completion request (each prompt of a batch
// too), llama.cpp's /completion and /infill: each is taken or
// refused with an ApiError or an Error the server answers with a 400; never
// another exception, which it would answer with a 500. Then the reply is searched for tool calls
// of the request's tools, and split into reasoning and answer both at once
// and as streamed: the two splits must agree (reasoning.h).
#include <string>

#include "chat/reasoning.h"
#include "fuzz_input.h"
#include "lantern/chat.h"
#include "lantern/error.h"
#include "server/openai.h"

namespace {

void check_streamed_split(std::string_view reply, std::string_view chunks, bool opened) {
    const auto whole = lantern::split_reasoning(reply, opened);
    lantern::ReasoningStream stream(opened);
    std::string reasoning, answer;
    size_t at = 0, k = 0;
    while (at < reply.size()) {
        const size_t n = chunks.empty() ? 1 : 1 + static_cast<unsigned char>(chunks[k++ % chunks.size()]) % 16;
        const auto part = stream.feed(reply.substr(at, n));
        reasoning += part.reasoning;
        answer += part.answer;
        at += n;
    }
    const auto last = stream.finish();
    reasoning += last.reasoning;
    answer += last.answer;
    if (reasoning != whole.first || answer != whole.second) __builtin_trap();
}

// The refusals http_server.cpp answers with a 400.
bool client_error(const lantern::Error& e) {
    using lantern::ErrorCode;
    return e.code() == ErrorCode::InvalidArgument || e.code() == ErrorCode::ContextFull ||
           e.code() == ErrorCode::Template || e.code() == ErrorCode::Tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using lantern::server::ApiError;
    const auto in = lantern::fuzz::parts(data, size, 3);
    const std::string body(in[0]);
    lantern::ChatTools tools;
    try {
        const auto req = lantern::server::parse_completion_request(body, true);
        tools = req.conversation.tools;
        (void)lantern::server::reply_parts(req, std::string(in[1]));
    } catch (const ApiError&) {
    } catch (const lantern::Error& e) {
        if (!client_error(e)) throw;
    }
    try {
        (void)lantern::server::parse_completion_request(body, false);
    } catch (const ApiError&) {
    } catch (const lantern::Error& e) {
        if (!client_error(e)) throw;
    }
    try {
        (void)lantern::server::parse_native_request(body);
    } catch (const ApiError&) {
    } catch (const lantern::Error& e) {
        if (!client_error(e)) throw;
    }
    for (const std::string& one : lantern::server::split_prompt_batch(body)) {
        try {
            (void)lantern::server::parse_completion_request(one, false);
        } catch (const ApiError&) {
        } catch (const lantern::Error& e) {
            if (!client_error(e)) throw;
        }
    }
    try {
        (void)lantern::server::parse_infill_request(body);
    } catch (const ApiError&) {
    } catch (const lantern::Error& e) {
        if (!client_error(e)) throw;
    }
    try {
        (void)lantern::parse_chat_reply(in[1], tools);
    } catch (const lantern::Error&) {
    }
    (void)lantern::chat_reply_text_prefix(in[1]);
    check_streamed_split(in[1], in[2], false);
    check_streamed_split(in[1], in[2], true);
    return 0;
}
