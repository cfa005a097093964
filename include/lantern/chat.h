// Chat messages and tool calls, as chat templates and OpenAI's API see them.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lantern {

// A function call the assistant made (OpenAI's tool_calls entry).
struct ToolCall {
    std::string id;         // the call's id, echoed by the tool's answer (tool_call_id)
    std::string name;       // the function's name
    std::string arguments;  // its arguments: a JSON object's text
};

struct ChatMessage {
    ChatMessage() = default;
    ChatMessage(std::string role_, std::string content_) : role(std::move(role_)), content(std::move(content_)) {}

    std::string role;  // "system", "user", "assistant", "tool", ...
    std::string content;
    std::vector<ToolCall> tool_calls;  // assistant: the calls it made
    std::string tool_call_id;          // tool: the call this answers
    std::string name;                  // tool: the function's name (optional)
    // assistant: its reasoning (the <think> text of Qwen3, DeepSeek-R1 and
    // the like; OpenAI-style servers' "reasoning_content"), for templates
    // that render it.
    std::string reasoning_content;
};

// Which tool calls a reply may make (OpenAI's tool_choice).
enum class ToolChoice {
    Auto,      // the model decides; its reply is searched for calls
    None,      // no tools offered, no calls
    Required,  // the reply is one call (sampling is constrained to it)
};

struct ChatTools {
    // OpenAI's "tools": [{"type": "function", "function": {"name": ...,
    // "description": ..., "parameters": {JSON schema}}}, ...] as JSON text.
    // Empty: no tools.
    std::string json;
    ToolChoice choice = ToolChoice::Auto;
    std::string function;  // Required: this function ("": any of the tools)
};

// A prompt rendered with tools. When a call is required the prompt ends
// where the template's call begins, and the call's JSON object must begin
// with one of call_prefixes: pass them as SamplerParams::json_prefixes with
// json_object on.
struct ChatPrompt {
    std::string text;
    std::vector<std::string> call_prefixes;
    // With one function allowed: the JSON schema its call's object follows
    // (its name and its parameters' schema), for SamplerParams::json_schema;
    // empty when the parameters use a keyword the sampler cannot enforce.
    std::string call_schema;
};

// A generated reply split into its text and its tool calls (and, from
// split_reasoning, its reasoning).
struct ChatReply {
    std::string content;
    std::vector<ToolCall> tool_calls;
    std::string reasoning_content;
};

// An OpenAI chat request's conversation and tools: "messages" (content a
// string or text parts; an assistant's "tool_calls" or older
// "function_call"; a tool answer's "tool_call_id"), "tools" (or the older
// "functions"), "tool_choice" (or "function_call": "auto", "none",
// "required" or {"type": "function", "function": {"name": ...}}) and
// "parallel_tool_calls". Other fields are left to the caller. Throws
// Error(InvalidArgument) naming the field that is wrong.
struct ChatRequest {
    std::vector<ChatMessage> messages;
    ChatTools tools;
    bool parallel_tool_calls = true;
    // The request used the older "functions" (not "tools"): its client
    // expects a reply's call as message.function_call, one at most.
    bool legacy_functions = false;
    // "chat_template_kwargs": more template variables as a JSON object's
    // text (e.g. {"enable_thinking": false} for Qwen3); empty: none.
    std::string template_kwargs;
};
ChatRequest parse_chat_request(std::string_view json);

// Finds the tool calls in a reply, in any of the common formats:
// <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks (Hermes,
// Qwen), [TOOL_CALLS][{...}] (Mistral), DeepSeek's <｜tool▁calls▁begin｜>
// blocks, a reply that is one such JSON object
// or a list of them, with "arguments" or "parameters" (Llama 3.1). Only
// calls of functions in `tools` count; a reply with any other stays text.
// Each call gets a fresh id of 9 letters and digits. Throws
// Error(InvalidArgument) when tools.json is not a valid tool list.
ChatReply parse_chat_reply(std::string_view text, const ChatTools& tools);

// How much of a reply being generated is certainly text, not the start of
// a tool call: streaming sends that much and holds the rest back.
size_t chat_reply_text_prefix(std::string_view text);

// Reasoning models (Qwen3, DeepSeek-R1 and their distillations) think
// first, in a <think>...</think> block at the start of the reply, then
// answer. split_reasoning returns {reasoning, answer}: the block's text and
// what follows it, each without the whitespace around it. `opened`: the
// prompt already opened the block (prompt_opens_reasoning), so the reply
// starts inside it. A reply without a block is all answer; one whose block
// never closes (cut short) is all reasoning.
std::pair<std::string, std::string> split_reasoning(std::string_view reply, bool opened);
// The rendered prompt ends inside an open <think> block (DeepSeek-R1's
// templates, and others, write it after the assistant's header).
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace lantern
