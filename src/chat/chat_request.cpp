// OpenAI chat requests' conversation and tools (parse_chat_request,
// lantern/chat.h): shared by the server and the C API.
#include <nlohmann/json.hpp>

#include "lantern/chat.h"
#include "lantern/error.h"

namespace lantern {
namespace {

using json = nlohmann::json;

[[noreturn]] void bad(const std::string& message) { throw Error(ErrorCode::InvalidArgument, message); }

// Message content: a string, or a list of parts of which the text parts count.
std::string content_text(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (content.is_null()) return "";
    if (content.is_array()) {
        std::string text;
        for (const json& part : content) {
            if (part.is_object() && part.contains("type") && part["type"] == "text" && part.contains("text") &&
                part["text"].is_string()) {
                text += part["text"].get<std::string>();
            } else {
                bad(where + ".content: only text parts are supported");
            }
        }
        return text;
    }
    bad(where + ".content must be a string or a list of text parts");
}

std::string string_field(const json& obj, const char* name, const std::string& where) {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return "";
    if (!it->is_string()) bad(where + "." + name + " must be a string");
    return it->get<std::string>();
}

// A call as a message gives it: {"id", "type": "function", "function":
// {"name", "arguments": JSON text (an object is taken too)}}, or the older
// function_call's {"name", "arguments"}.
ToolCall tool_call_of(const json& c, const std::string& where) {
    if (!c.is_object()) bad(where + " must be {\"type\": \"function\", \"function\": {...}}");
    const bool wrapped = c.contains("function");
    const json& fn = wrapped ? c["function"] : c;
    if (!fn.is_object()) bad(where + ".function must be an object");
    ToolCall call;
    call.id = wrapped ? string_field(c, "id", where) : "";
    call.name = string_field(fn, "name", where + ".function");
    if (call.name.empty()) bad(where + ".function.name is missing");
    const json args = fn.value("arguments", json());
    if (args.is_string()) {
        call.arguments = args.get<std::string>();
    } else if (args.is_object()) {
        call.arguments = args.dump();
    } else if (args.is_null()) {
        call.arguments = "{}";
    } else {
        bad(where + ".function.arguments must be a JSON object's text");
    }
    return call;
}

// One message: role and content, an assistant's tool calls (or the older
// function_call), a tool answer's call id ("function" answers are tool answers).
ChatMessage chat_message(const json& m, size_t i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad(where + " needs a string 'role'");
    ChatMessage msg(m["role"].get<std::string>(), content_text(m.value("content", json()), where));
    if (auto it = m.find("tool_calls"); it != m.end() && !it->is_null()) {
        if (msg.role != "assistant" || !it->is_array()) bad(where + ".tool_calls must be an assistant's list");
        for (size_t k = 0; k < it->size(); ++k) {
            msg.tool_calls.push_back(tool_call_of((*it)[k], where + ".tool_calls[" + std::to_string(k) + "]"));
        }
    }
    if (auto it = m.find("function_call"); it != m.end() && !it->is_null() && msg.role == "assistant") {
        msg.tool_calls.push_back(tool_call_of(*it, where + ".function_call"));
    }
    if (auto it = m.find("reasoning_content"); it != m.end() && !it->is_null() && msg.role == "assistant") {
        if (!it->is_string()) bad(where + ".reasoning_content must be a string");
        msg.reasoning_content = it->get<std::string>();
    }
    if (msg.role == "function") msg.role = "tool";
    if (msg.role == "tool") {
        msg.tool_call_id = string_field(m, "tool_call_id", where);
        msg.name = string_field(m, "name", where);
    }
    return msg;
}

// "tools" (or "functions", each then a tool's function) as JSON text, and
// "tool_choice" (or "function_call"): "auto", "none", "required" or one
// function by name. The tools themselves are checked when the prompt is
// rendered.
ChatTools chat_tools(const json& body, bool& legacy) {
    ChatTools t;
    json tools = body.value("tools", json());
    if (tools.is_null() || (tools.is_array() && tools.empty())) {
        const json functions = body.value("functions", json());
        if (functions.is_array() && !functions.empty()) {
            legacy = true;
            tools = json::array();
            for (const json& f : functions) tools.push_back({{"type", "function"}, {"function", f}});
        } else if (!functions.is_null() && !functions.is_array()) {
            bad("'functions' must be a list");
        }
    }
    if (!tools.is_null() && !tools.is_array()) bad("'tools' must be a list");
    const bool any = tools.is_array() && !tools.empty();
    if (any) t.json = tools.dump();

    const std::string name = body.contains("tool_choice") ? "tool_choice" : "function_call";
    const json choice = body.value(name, json());
    if (choice.is_string()) {
        const std::string c = choice.get<std::string>();
        if (c == "none") {
            t.choice = ToolChoice::None;
        } else if (c == "required") {
            t.choice = ToolChoice::Required;
        } else if (c != "auto") {
            bad("'" + name + "' must be \"auto\", \"none\", \"required\" or a function");
        }
    } else if (choice.is_object()) {
        const json& fn = choice.contains("function") ? choice["function"] : choice;
        if (!fn.is_object() || !fn.contains("name") || !fn["name"].is_string()) {
            bad("'" + name + "' must name a function: {\"type\": \"function\", \"function\": {\"name\": ...}}");
        }
        t.choice = ToolChoice::Required;
        t.function = fn["name"].get<std::string>();
    } else if (!choice.is_null()) {
        bad("'" + name + "' must be a string or an object");
    }
    if (t.choice == ToolChoice::Required && !any) bad("'" + name + "' asks for a call but there are no tools");
    return t;
}

}  // namespace

ChatRequest parse_chat_request(std::string_view text) {
    const json body = json::parse(text, nullptr, false);
    if (body.is_discarded() || !body.is_object()) bad("a chat request must be a JSON object");
    ChatRequest r;
    auto it = body.find("messages");
    if (it == body.end() || !it->is_array() || it->empty()) bad("'messages' must be a non-empty list");
    for (size_t i = 0; i < it->size(); ++i) r.messages.push_back(chat_message((*it)[i], i));
    r.tools = chat_tools(body, r.legacy_functions);
    if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
        if (!p->is_boolean()) bad("'parallel_tool_calls' must be true or false");
        r.parallel_tool_calls = p->get<bool>();
    }
    if (auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
        if (!k->is_object()) bad("'chat_template_kwargs' must be an object of template variables");
        r.template_kwargs = k->dump();
    }
    return r;
}

}  // namespace lantern
