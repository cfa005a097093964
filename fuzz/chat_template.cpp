// Chat templates: the Jinja source a GGUF file carries (or --chat-template),
// rendered over a conversation with a system prompt, a tool call, its answer
// and tools. Input: the template. It parses and renders, or fails with an
// Error naming the line; nothing else.
#include <ctime>
#include <string>

#include "chat/chat_template.h"
#include "fuzz_input.h"
#include "lantern/error.h"

namespace {

lantern::ChatTemplateInputs conversation() {
    lantern::ChatTemplateInputs in;
    in.messages = nlohmann::ordered_json::parse(R"([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris? ünïcode ✓"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call1", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call1", "name": "get_weather", "content": "{\"c\": 21}"},
        {"role": "assistant", "content": "21 degrees.", "reasoning_content": "easy"},
        {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}])");
    in.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
        "description": "Current weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
    in.extra = {{"enable_thinking", false}};
    std::tm now{};
    now.tm_year = 126;
    now.tm_mon = 10;
    now.tm_mday = 27;
    in.now = now;
    return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const lantern::ChatTemplateInputs inputs = conversation();
    try {
        const auto tmpl = lantern::ChatTemplate::from_string(std::string(reinterpret_cast<const char*>(data), size),
                                                             "<s>", "</s>");
        (void)tmpl.apply(inputs);
    } catch (const lantern::Error&) {
    }
    return 0;
}
