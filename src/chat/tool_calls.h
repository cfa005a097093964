// Tool calling around a chat template: the tools and the conversation's
// calls handed to the template in the shape templates expect, lantern's own
// instructions for templates that take no tools, the opening of a forced
// call, and the calls found in a reply (parse_chat_reply, lantern/chat.h).
//
// Templates write calls in their family's format, which decides how a
// forced call starts:
//   Hermes   <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//            (Qwen2.5, Hermes; also lantern's instructions)
//   Llama3   {"name": ..., "parameters": {...}} as the whole reply
//   Mistral  [TOOL_CALLS][{"name": ..., "arguments": {...}}]
//   Generic  a template that takes tools in a format not known here: the
//            reply is parsed for any of the above
//   DeepSeek <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//            ```json ... ```<｜tool▁call▁end｜>... (parsed in replies; its
//            templates get lantern's instructions, and calls as text)
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "lantern/chat.h"

namespace lantern {

enum class ToolStyle { Hermes, Llama3, Mistral, Generic };

struct TemplateToolSupport {
    bool definitions = false;  // renders the `tools` variable
    bool history = false;      // renders assistant tool_calls and tool messages
    ToolStyle style = ToolStyle::Hermes;
};
TemplateToolSupport tool_support(std::string_view template_source);

// The tools of a request, checked: a list of {"type": "function",
// "function": {"name": ..., ...}} with distinct names. Throws
// Error(InvalidArgument) naming what is wrong.
struct ToolList {
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();
    std::vector<std::string> names;
};
ToolList parse_tool_list(const ChatTools& tools);

// A message as templates see it: OpenAI's object, a call's arguments as a
// JSON object when `object_arguments` (Qwen's and Llama's templates write
// them with tojson) or as the text (DeepSeek's concatenate them), content
// null for an assistant turn that only calls tools.
nlohmann::ordered_json template_message(const ChatMessage& m, bool object_arguments);

// Renders a conversation with tools (ChatTools::json may be empty: then as
// ChatTemplate::apply does), `extra` its more template variables (an
// object: ChatTemplateInputs::extra). A template that does not render the tools gets
// lantern's instructions in the system message, and one that does not
// render calls gets the conversation's calls and answers as text. Throws
// Error(Template) when the template fails, Error(InvalidArgument) for bad
// tools or a required function that is not among them.
ChatPrompt render_with_tools(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                             const ChatTools& tools, bool add_generation_prompt,
                             const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

// A reply's calls in OpenAI's message (or streamed delta) `message`:
// tool_calls (in a delta each with its index), at most one unless
// `parallel`; or the older function_call (the first call) when the request
// used "functions" (`legacy`).
void put_reply_calls(nlohmann::json& message, const std::vector<ToolCall>& calls, bool parallel, bool legacy, bool stream);

// A whole reply as OpenAI's assistant message: its content (null when the
// reply is only calls) and its calls (put_reply_calls).
nlohmann::json reply_message(const ChatReply& reply, bool parallel, bool legacy);

}  // namespace lantern
