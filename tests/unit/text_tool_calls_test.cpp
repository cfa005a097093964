// Tool calling (chat/tool_calls.h, lantern/chat.h): the calls found in
// replies of each family's format, what streaming may send before a reply
// ends, prompts with tools for templates that render them and for ones that
// do not, a required call's opening and prefixes, and the JSON constraint
// holding a forced call to its prefixes.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_calls.h"
#include "lantern/error.h"
#include "sampling/json_constraint.h"
#include "sampling/json_schema.h"

namespace lantern {
namespace {

using json = nlohmann::json;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
])";

ChatTools tools(ToolChoice choice = ToolChoice::Auto, std::string function = "") {
    return ChatTools{kTools, choice, std::move(function)};
}

json args(const ToolCall& c) { return json::parse(c.arguments); }

TEST(ToolCallParse, HermesBlocks) {
    const ChatReply r = parse_chat_reply(
        "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        tools());
    ASSERT_EQ(r.tool_calls.size(), 2u);
    EXPECT_EQ(r.content, "Let me check.");
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(args(r.tool_calls[0]), json({{"city", "Paris"}}));
    EXPECT_EQ(r.tool_calls[1].name, "get_time");
    EXPECT_EQ(args(r.tool_calls[1]), json::object());
    // Ids: 9 letters and digits (Mistral's templates insist), distinct.
    for (const ToolCall& c : r.tool_calls) {
        EXPECT_EQ(c.id.size(), 9u);
        EXPECT_EQ(c.id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"), std::string::npos);
    }
    EXPECT_NE(r.tool_calls[0].id, r.tool_calls[1].id);
    // A reply that ended inside its block (the forced call stops at its object).
    const ChatReply open = parse_chat_reply("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}", tools());
    ASSERT_EQ(open.tool_calls.size(), 1u);
    EXPECT_EQ(open.content, "");
}

TEST(ToolCallParse, JsonFormsOfMistralAndLlama) {
    const ChatReply m = parse_chat_reply(
        "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, {\"name\": \"get_time\", "
        "\"arguments\": {}}]",
        tools());
    ASSERT_EQ(m.tool_calls.size(), 2u);
    EXPECT_EQ(args(m.tool_calls[0])["city"], "Oslo");
    // Llama 3.1: "parameters"; the arguments may also come as their text.
    const ChatReply l = parse_chat_reply(" {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}\n", tools());
    ASSERT_EQ(l.tool_calls.size(), 1u);
    EXPECT_EQ(args(l.tool_calls[0])["city"], "Rome");
    EXPECT_EQ(l.content, "");
    const ChatReply s = parse_chat_reply(R"({"name": "get_weather", "arguments": "{\"city\": \"Lima\"}"})", tools());
    ASSERT_EQ(s.tool_calls.size(), 1u);
    EXPECT_EQ(args(s.tool_calls[0])["city"], "Lima");
}

// DeepSeek's own format (V3 and R1, and V3.1's shorter one), which its
// models may write even when the prompt asked for <tool_call> blocks.
TEST(ToolCallParse, DeepSeekCalls) {
    const std::string b = "<\uff5ctool\u2581calls\u2581begin\uff5c>", c = "<\uff5ctool\u2581call\u2581begin\uff5c>",
                      sep = "<\uff5ctool\u2581sep\uff5c>", e = "<\uff5ctool\u2581call\u2581end\uff5c>",
                      end = "<\uff5ctool\u2581calls\u2581end\uff5c>";
    const ChatReply r = parse_chat_reply("I will look it up." + b + c + "function" + sep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" +
                                             e + "\n" + c + "function" + sep + "get_time\n```json\n{}\n```" + e + end,
                                         tools());
    ASSERT_EQ(r.tool_calls.size(), 2u);
    EXPECT_EQ(r.content, "I will look it up.");
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(args(r.tool_calls[0]), json({{"city", "Paris"}}));
    EXPECT_EQ(r.tool_calls[1].name, "get_time");
    const ChatReply v31 = parse_chat_reply(b + c + "get_weather" + sep + "{\"city\": \"Oslo\"}" + e + end, tools());
    ASSERT_EQ(v31.tool_calls.size(), 1u);
    EXPECT_EQ(args(v31.tool_calls[0])["city"], "Oslo");
    const ChatReply cut = parse_chat_reply(b + c + "function" + sep + "get_time\n```json\n{}\n```", tools());  // ended early
    EXPECT_EQ(cut.tool_calls.size(), 1u);
    for (const std::string& bad : {b + c + "function" + sep + "launch\n```json\n{}\n```" + e,  // not a tool
                                   b + c + "get_time" + sep + "not json" + e, b + "nothing"}) {
        const ChatReply t = parse_chat_reply(bad, tools());
        EXPECT_TRUE(t.tool_calls.empty()) << bad;
        EXPECT_EQ(t.content, bad);
    }
    // Streaming holds back from the marker, and a tail that may begin it.
    EXPECT_EQ(chat_reply_text_prefix("Sure." + b + c), 5u);
    EXPECT_EQ(chat_reply_text_prefix("Sure." + b.substr(0, 6)), 5u);
    EXPECT_EQ(chat_reply_text_prefix(b.substr(0, 4)), 0u);
}

TEST(ToolCallParse, WhatIsNotACallStaysText) {
    for (const char* text : {
             "The weather is fine.",
             "{\"name\": \"launch_rockets\", \"arguments\": {}}",                        // not a tool
             "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1]}\n</tool_call>",  // arguments not an object
             "<tool_call>\nnot json\n</tool_call>",
             "{\"answer\": 42}",
             "[1, 2, 3]",
         }) {
        const ChatReply r = parse_chat_reply(text, tools());
        EXPECT_TRUE(r.tool_calls.empty()) << text;
        EXPECT_EQ(r.content, text);
    }
    // No tools, or tool_choice none: never a call.
    const std::string call = "{\"name\": \"get_time\", \"arguments\": {}}";
    EXPECT_TRUE(parse_chat_reply(call, ChatTools{}).tool_calls.empty());
    EXPECT_TRUE(parse_chat_reply(call, tools(ToolChoice::None)).tool_calls.empty());
    EXPECT_EQ(parse_chat_reply(call, tools()).tool_calls.size(), 1u);
}

TEST(ToolCallParse, StreamingHoldsBackWhatMayBeACall) {
    EXPECT_EQ(chat_reply_text_prefix("Hello there"), 11u);
    EXPECT_EQ(chat_reply_text_prefix(""), 0u);
    EXPECT_EQ(chat_reply_text_prefix("  "), 0u);
    EXPECT_EQ(chat_reply_text_prefix("{\"na"), 0u);
    EXPECT_EQ(chat_reply_text_prefix(" [TOOL_"), 0u);
    EXPECT_EQ(chat_reply_text_prefix("<tool"), 0u);
    EXPECT_EQ(chat_reply_text_prefix("<tool_call>\n{"), 0u);
    EXPECT_EQ(chat_reply_text_prefix("<tool_response>"), 15u);  // diverged from the tag: text
    EXPECT_EQ(chat_reply_text_prefix("Sure. <tool_call>{"), 6u);
    EXPECT_EQ(chat_reply_text_prefix("Sure. <too"), 6u);  // may become the tag
    EXPECT_EQ(chat_reply_text_prefix("a < b"), 5u);
}

TEST(ToolCallPrompt, TemplatesThatRenderToolsGetThem) {
    const ChatTemplate qwen = *ChatTemplate::builtin("qwen2.5");
    std::vector<ChatMessage> convo = {{"user", "Weather in Paris?"}};
    ChatMessage call("assistant", "");
    call.tool_calls.push_back({"abcdefghi", "get_weather", "{\"city\": \"Paris\"}"});
    convo.push_back(call);
    ChatMessage answer("tool", "{\"temperature\": 21}");
    answer.tool_call_id = "abcdefghi";
    convo.push_back(answer);
    const ChatPrompt p = render_with_tools(qwen, convo, tools(), true);
    EXPECT_NE(p.text.find("<tools>"), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("\"get_time\""), std::string::npos);
    // The call as the template writes it: its arguments an object (tojson).
    EXPECT_NE(p.text.find("{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("<tool_response>\n{\"temperature\": 21}\n</tool_response>"), std::string::npos) << p.text;
    EXPECT_TRUE(p.call_prefixes.empty());
    // tool_choice none: no tools offered.
    EXPECT_EQ(render_with_tools(qwen, convo, tools(ToolChoice::None), true).text.find("<tools>"), std::string::npos);
}

TEST(ToolCallPrompt, OtherTemplatesGetInstructionsAndTextualCalls) {
    const ChatTemplate chatml = *ChatTemplate::builtin("chatml");
    std::vector<ChatMessage> convo = {{"system", "Be brief."}, {"user", "Weather in Paris?"}};
    ChatMessage call("assistant", "");
    call.tool_calls.push_back({"abcdefghi", "get_weather", "{\"city\":\"Paris\"}"});
    convo.push_back(call);
    convo.push_back({"tool", "sunny"});
    const ChatPrompt p = render_with_tools(chatml, convo, tools(), true);
    // The instructions join the system message; the tools are listed.
    EXPECT_NE(p.text.find("<|im_start|>system\nBe brief.\n\n# Tools"), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("\"name\":\"get_weather\""), std::string::npos) << p.text;
    EXPECT_NE(p.text.find("<|im_start|>assistant\n<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>"),
              std::string::npos)
        << p.text;
    EXPECT_NE(p.text.find("<|im_start|>user\n<tool_response>\nsunny\n</tool_response>"), std::string::npos) << p.text;
    // No system message: one is added.
    const ChatPrompt q = render_with_tools(chatml, {{"user", "Hi"}}, tools(), true);
    EXPECT_EQ(q.text.rfind("<|im_start|>system\n# Tools", 0), 0u) << q.text;
    // Without tools the conversation renders as before.
    EXPECT_EQ(render_with_tools(chatml, {{"user", "Hi"}}, ChatTools{}, true).text, chatml.apply({{"user", "Hi"}}, true));
}

TEST(ToolCallPrompt, RequiredCallsOpenTheTemplatesFormat) {
    const std::vector<ChatMessage> convo = {{"user", "Weather in Paris?"}};
    struct Case {
        const char* tmpl;
        const char* opener;
        const char* key;
    };
    for (const Case& c : {Case{"qwen2.5", "<tool_call>\n", "arguments"}, Case{"chatml", "<tool_call>\n", "arguments"},
                          Case{"llama3.1", "", "parameters"}, Case{"mistral", "[TOOL_CALLS][", "arguments"}}) {
        const ChatTemplate t = *ChatTemplate::builtin(c.tmpl);
        const std::string plain = render_with_tools(t, convo, tools(), true).text;
        const ChatPrompt any = render_with_tools(t, convo, tools(ToolChoice::Required), true);
        EXPECT_EQ(any.text, plain + c.opener) << c.tmpl;
        ASSERT_EQ(any.call_prefixes.size(), 2u) << c.tmpl;
        EXPECT_EQ(any.call_prefixes[0], std::string("{\"name\": \"get_weather\", \"") + c.key + "\": {") << c.tmpl;
        const ChatPrompt one = render_with_tools(t, convo, tools(ToolChoice::Required, "get_time"), true);
        ASSERT_EQ(one.call_prefixes.size(), 1u);
        EXPECT_EQ(one.call_prefixes[0], std::string("{\"name\": \"get_time\", \"") + c.key + "\": {");
        // One function: its call's schema too (name and parameters), which
        // the prefix fits; several: none.
        EXPECT_TRUE(any.call_schema.empty());
        ASSERT_FALSE(one.call_schema.empty()) << c.tmpl;
        SchemaState state(JsonSchema::parse(one.call_schema));
        EXPECT_TRUE(state.feed(one.call_prefixes[0] + "}}"));
        EXPECT_TRUE(state.complete());
        SchemaState wrong(JsonSchema::parse(one.call_schema));
        EXPECT_FALSE(wrong.feed(std::string("{\"name\": \"get_weather\"")));
    }
    // Parameters the sampler cannot enforce: no schema (the call is still a JSON object).
    const ChatTools fancy{R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
        "properties": {"link": {"type": "string", "format": "iri"}}}}}])", ToolChoice::Required, ""};
    const ChatPrompt p = render_with_tools(*ChatTemplate::builtin("chatml"), convo, fancy, true);
    EXPECT_EQ(p.call_prefixes.size(), 1u);
    EXPECT_TRUE(p.call_schema.empty());
}

TEST(ToolCallPrompt, CallsAsTextForTemplatesThatConcatenateThem) {
    // DeepSeek R1's template adds a call's arguments to strings: an object
    // there is a template error, so they go as their text.
    const ChatTemplate r1 = *ChatTemplate::builtin("deepseek-r1");
    ChatMessage call("assistant", "");
    call.tool_calls.push_back({"abcdefghi", "get_weather", "{\"city\": \"Paris\"}"});
    const ChatPrompt p = render_with_tools(r1, {{"user", "Weather?"}, call, {"tool", "sunny"}}, tools(), true);
    EXPECT_NE(p.text.find("get_weather\n```json\n{\"city\": \"Paris\"}\n```"), std::string::npos) << p.text;
}

TEST(ToolCallPrompt, BadToolsAreNamed) {
    const ChatTemplate t = *ChatTemplate::builtin("qwen2.5");
    auto message_of = [&](const ChatTools& tl) {
        try {
            render_with_tools(t, {{"user", "Hi"}}, tl, true);
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_NE(message_of(ChatTools{"{\"not\": \"a list\"}", ToolChoice::Auto, ""}).find("list"), std::string::npos);
    EXPECT_NE(message_of(ChatTools{"[{\"type\": \"function\"}]", ToolChoice::Auto, ""}).find("tools[0]"), std::string::npos);
    EXPECT_NE(message_of(ChatTools{"[{\"type\": \"function\", \"function\": {\"name\": \"has space\"}}]", ToolChoice::Auto, ""}).find("tools[0].function.name"),
              std::string::npos);
    EXPECT_NE(message_of(ChatTools{R"([{"function": {"name": "a"}}, {"function": {"name": "a"}}])", ToolChoice::Auto, ""}).find("twice"), std::string::npos);
    EXPECT_NE(message_of(tools(ToolChoice::Required, "get_stock")).find("get_stock"), std::string::npos);
    EXPECT_NE(message_of(ChatTools{"", ToolChoice::Required, ""}).find("needs tools"), std::string::npos);
}

// A forced call's object must begin with one of the prefixes: the toy
// vocabulary's logits prefer a wrong name, the constraint refuses it.
TEST(ToolCallConstraint, PrefixesChooseTheFunction) {
    const std::vector<std::string> pieces = {"{\"name\": \"", "launch", "get_time", "get_weather", "\", \"arguments\": {",
                                             "}", "}}", "\"x\": 1", ""};
    std::vector<bool> eog(pieces.size(), false);
    eog.back() = true;
    JsonConstraint c(pieces, eog,
                     {"{\"name\": \"get_weather\", \"arguments\": {", "{\"name\": \"get_time\", \"arguments\": {"});
    EXPECT_TRUE(c.allows(0));
    c.advance(0);
    EXPECT_FALSE(c.allows(1));  // valid JSON, but not a tool
    EXPECT_TRUE(c.allows(2));
    EXPECT_TRUE(c.allows(3));
    c.advance(3);
    EXPECT_TRUE(c.allows(4));
    c.advance(4);
    // Past the prefix the arguments are any JSON.
    EXPECT_TRUE(c.allows(7));
    EXPECT_TRUE(c.allows(6));
    c.advance(6);
    EXPECT_TRUE(c.complete());
    EXPECT_TRUE(c.allows(8));
    // A prefix must begin an object.
    EXPECT_THROW(JsonConstraint(pieces, eog, {"[1"}), Error);
    EXPECT_THROW(JsonConstraint(pieces, eog, {"{}"}), Error);
}

}  // namespace
}  // namespace lantern
