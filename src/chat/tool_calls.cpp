#include "chat/tool_calls.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <random>

#include "lantern/error.h"
#include "sampling/json_chars.h"
#include "sampling/json_schema.h"

namespace lantern {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
// DeepSeek (V3, R1): <｜tool▁calls▁begin｜> then per call <｜tool▁call▁begin｜>
// function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜> (V3.1:
// NAME<｜tool▁sep｜>ARGS), then <｜tool▁calls▁end｜>.
constexpr std::string_view kDsCalls = "<\uff5ctool\u2581calls\u2581begin\uff5c>";
constexpr std::string_view kDsCall = "<\uff5ctool\u2581call\u2581begin\uff5c>";
constexpr std::string_view kDsCallEnd = "<\uff5ctool\u2581call\u2581end\uff5c>";
constexpr std::string_view kDsSep = "<\uff5ctool\u2581sep\uff5c>";

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// `word` appears in `s` as a whole identifier.
bool has_word(std::string_view s, std::string_view word) {
    for (size_t at = s.find(word); at != std::string_view::npos; at = s.find(word, at + 1)) {
        const bool before = at > 0 && is_word_char(s[at - 1]);
        const bool after = at + word.size() < s.size() && is_word_char(s[at + word.size()]);
        if (!before && !after) return true;
    }
    return false;
}

using json_chars::trim;

// OpenAI's function names: letters, digits, '_', '-' (and '.', which some
// clients use), at most 64.
bool valid_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(), [](char c) { return is_word_char(c) || c == '-' || c == '.'; });
}

std::string call_id(std::mt19937& rng) {
    static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::uniform_int_distribution<size_t> pick(0, sizeof(kChars) - 2);
    std::string id(9, ' ');
    for (char& c : id) c = kChars[pick(rng)];
    return id;
}

// One call from {"name": ..., "arguments"|"parameters": {...}} (or the same
// under "function"): nullopt unless it names one of the tools and its
// arguments are an object (or its text).
std::optional<ToolCall> call_of(const ojson& j, const std::vector<std::string>& names) {
    if (!j.is_object()) return std::nullopt;
    const ojson& fn = j.contains("function") && j["function"].is_object() ? j["function"] : j;
    if (!fn.contains("name") || !fn["name"].is_string()) return std::nullopt;
    ToolCall call;
    call.name = fn["name"].get<std::string>();
    if (std::find(names.begin(), names.end(), call.name) == names.end()) return std::nullopt;
    auto args = fn.find("arguments");
    if (args == fn.end()) args = fn.find("parameters");
    if (args == fn.end() || args->is_null()) {
        call.arguments = "{}";
    } else if (args->is_object()) {
        call.arguments = args->dump();
    } else if (args->is_string()) {
        const ojson parsed = ojson::parse(args->get<std::string>(), nullptr, false);
        if (!parsed.is_object()) return std::nullopt;
        call.arguments = args->get<std::string>();
    } else {
        return std::nullopt;
    }
    return call;
}

// Calls in <tool_call> blocks (a last block may lack its closing tag: the
// reply ended there); the text outside them is the content. nullopt when
// there is no block or one does not hold a call.
std::optional<ChatReply> hermes_calls(std::string_view text, const std::vector<std::string>& names) {
    if (text.find(kCallOpen) == std::string_view::npos) return std::nullopt;
    ChatReply r;
    std::string content;
    size_t at = 0;
    while (at < text.size()) {
        const size_t open = text.find(kCallOpen, at);
        if (open == std::string_view::npos) {
            content += text.substr(at);
            break;
        }
        content += text.substr(at, open - at);
        const size_t body = open + kCallOpen.size();
        size_t close = text.find(kCallClose, body);
        const std::string_view inner = text.substr(body, close == std::string_view::npos ? text.size() - body : close - body);
        auto call = call_of(ojson::parse(trim(inner), nullptr, false), names);
        if (!call) return std::nullopt;
        r.tool_calls.push_back(std::move(*call));
        at = close == std::string_view::npos ? text.size() : close + kCallClose.size();
    }
    r.content = std::string(trim(content));
    return r;
}

// DeepSeek's calls (kDsCalls): the text before them is the content. A last
// call may lack its end (the reply ended there). nullopt when there are
// none or one does not hold a call.
std::optional<ChatReply> deepseek_calls(std::string_view text, const std::vector<std::string>& names) {
    const size_t begin = text.find(kDsCalls);
    if (begin == std::string_view::npos) return std::nullopt;
    ChatReply r;
    r.content = std::string(trim(text.substr(0, begin)));
    std::string_view rest = text.substr(begin + kDsCalls.size());
    for (size_t at = rest.find(kDsCall); at != std::string_view::npos; at = rest.find(kDsCall)) {
        rest.remove_prefix(at + kDsCall.size());
        const size_t end = rest.find(kDsCallEnd);
        std::string_view body = rest.substr(0, end);
        rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + kDsCallEnd.size());
        // "function<sep>NAME\n```json\nARGS\n```" or "NAME<sep>ARGS".
        const size_t sep = body.find(kDsSep);
        if (sep == std::string_view::npos) return std::nullopt;
        std::string_view name = body.substr(0, sep), args = body.substr(sep + kDsSep.size());
        if (trim(name) == "function") {
            const size_t nl = args.find('\n');
            name = args.substr(0, nl);
            args = nl == std::string_view::npos ? std::string_view() : args.substr(nl + 1);
        }
        args = trim(args);
        if (args.starts_with("```")) {
            const size_t nl = args.find('\n');
            args = nl == std::string_view::npos ? std::string_view() : args.substr(nl + 1);
            if (const size_t fence = args.rfind("```"); fence != std::string_view::npos) args = args.substr(0, fence);
        }
        ojson call = {{"name", std::string(trim(name))}};
        call["arguments"] = ojson::parse(trim(args), nullptr, false);
        auto c = call_of(call, names);
        if (!c) return std::nullopt;
        r.tool_calls.push_back(std::move(*c));
    }
    if (r.tool_calls.empty()) return std::nullopt;
    return r;
}

// A reply that is one call object or a list of them, after Mistral's or
// Llama's marker if any.
std::optional<ChatReply> json_calls(std::string_view text, const std::vector<std::string>& names) {
    std::string_view t = trim(text);
    for (std::string_view marker : {kMistralCalls, kPythonTag}) {
        if (t.starts_with(marker)) t = trim(t.substr(marker.size()));
    }
    if (t.empty() || (t.front() != '{' && t.front() != '[')) return std::nullopt;
    const ojson j = ojson::parse(t, nullptr, false);
    ChatReply r;
    for (const ojson& item : j.is_array() ? j : ojson::array({j})) {
        auto call = call_of(item, names);
        if (!call) return std::nullopt;
        r.tool_calls.push_back(std::move(*call));
    }
    if (r.tool_calls.empty()) return std::nullopt;
    return r;
}

// Lantern's instructions for a template that does not render tools (its
// model may still follow them; small ones seldom do unless the call is
// required, which constrains the output).
std::string instructions(const ToolList& list) {
    std::string s =
        "# Tools\n\nThese functions are available. Each is described by a JSON object:\n<tools>\n";
    for (const ojson& t : list.tools) s += t.dump() + "\n";
    s += "</tools>\n\nTo call one, reply with a block like this for each call and nothing else:\n";
    s += "<tool_call>\n{\"name\": \"the function's name\", \"arguments\": {\"argument\": \"value\"}}\n</tool_call>\n";
    s += "Each call's result comes back in a <tool_response> block.";
    return s;
}

std::string call_text(const ToolCall& c) {
    const ojson args = ojson::parse(c.arguments, nullptr, false);
    ojson j = {{"name", c.name}, {"arguments", args.is_discarded() ? ojson(c.arguments) : args}};
    return std::string(kCallOpen) + "\n" + j.dump() + "\n" + std::string(kCallClose);
}

// The conversation for a template that renders no calls: an assistant's
// calls as <tool_call> blocks in its text, tool answers as user turns of
// <tool_response> blocks (consecutive ones in one turn).
std::vector<ChatMessage> calls_as_text(const std::vector<ChatMessage>& messages) {
    std::vector<ChatMessage> out;
    for (const ChatMessage& m : messages) {
        if (m.role == "tool") {
            const std::string block = "<tool_response>\n" + m.content + "\n</tool_response>";
            if (!out.empty() && out.back().role == "user" && out.back().content.starts_with("<tool_response>")) {
                out.back().content += "\n" + block;
            } else {
                out.push_back({"user", block});
            }
            continue;
        }
        ChatMessage copy{m.role, m.content};
        for (const ToolCall& c : m.tool_calls) {
            if (!copy.content.empty()) copy.content += '\n';
            copy.content += call_text(c);
        }
        out.push_back(std::move(copy));
    }
    return out;
}

// The schema of a call of `name`: {"name": its name, key: an object its
// parameters allow}; "" when they hold what the sampler cannot enforce.
std::string call_schema(const ToolList& list, const std::string& name, const std::string& key) {
    const size_t i = static_cast<size_t>(std::find(list.names.begin(), list.names.end(), name) - list.names.begin());
    const ojson& fn = list.tools[i]["function"];
    ojson params = fn.contains("parameters") && fn["parameters"].is_object() ? fn["parameters"] : ojson::object();
    if (!params.contains("type") && !params.contains("properties")) params["type"] = "object";
    const ojson schema = {{"type", "object"},
                          {"properties", {{"name", {{"const", name}}}, {key, params}}},
                          {"required", {"name", key}}};
    try {
        SchemaState state(JsonSchema::parse(schema.dump()));
        if (!state.feed("{\"name\": \"" + name + "\", \"" + key + "\": {")) return "";  // e.g. parameters not an object
    } catch (const Error&) {
        return "";
    }
    return schema.dump();
}

std::string call_opener(ToolStyle style) {
    switch (style) {
        case ToolStyle::Hermes: return std::string(kCallOpen) + "\n";
        case ToolStyle::Mistral: return std::string(kMistralCalls) + "[";
        case ToolStyle::Llama3:
        case ToolStyle::Generic: return "";
    }
    return "";
}

}  // namespace

TemplateToolSupport tool_support(std::string_view source) {
    TemplateToolSupport s;
    s.definitions = has_word(source, "tools");
    s.history = source.find("tool_calls") != std::string_view::npos;
    if (source.find(kCallOpen) != std::string_view::npos || !s.definitions) {
        s.style = ToolStyle::Hermes;  // or lantern's instructions, which use its tags
    } else if (source.find(kMistralCalls) != std::string_view::npos) {
        s.style = ToolStyle::Mistral;
    } else if (source.find("<|start_header_id|>") != std::string_view::npos) {
        s.style = ToolStyle::Llama3;
    } else {
        s.style = ToolStyle::Generic;
    }
    return s;
}

ToolList parse_tool_list(const ChatTools& tools) {
    ToolList list;
    if (tools.json.empty()) return list;
    const ojson j = ojson::parse(tools.json, nullptr, false);
    if (j.is_discarded() || !j.is_array()) throw Error(ErrorCode::InvalidArgument, "tools must be a JSON list");
    for (size_t i = 0; i < j.size(); ++i) {
        const ojson& t = j[i];
        const std::string at = "tools[" + std::to_string(i) + "]";
        // (json == "function" is false for a non-string, where value() would throw.)
        if (!t.is_object() || (t.contains("type") && t["type"] != "function") || !t.contains("function") ||
            !t["function"].is_object()) {
            throw Error(ErrorCode::InvalidArgument, at + " must be {\"type\": \"function\", \"function\": {...}}");
        }
        const ojson& fn = t["function"];
        if (!fn.contains("name") || !fn["name"].is_string() || !valid_name(fn["name"].get<std::string>())) {
            throw Error(ErrorCode::InvalidArgument,
                        at + ".function.name must be 1 to 64 letters, digits, '_', '-' or '.'");
        }
        if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object()) {
            throw Error(ErrorCode::InvalidArgument, at + ".function.parameters must be a JSON schema object");
        }
        const std::string name = fn["name"].get<std::string>();
        if (std::find(list.names.begin(), list.names.end(), name) != list.names.end()) {
            throw Error(ErrorCode::InvalidArgument, "tools: '" + name + "' is defined twice");
        }
        list.names.push_back(name);
        list.tools.push_back({{"type", "function"}, {"function", fn}});
    }
    return list;
}

ojson template_message(const ChatMessage& m, bool object_arguments) {
    ojson j = {{"role", m.role}, {"content", m.content}};
    if (!m.tool_calls.empty()) {
        if (m.content.empty()) j["content"] = nullptr;
        ojson calls = ojson::array();
        for (const ToolCall& c : m.tool_calls) {
            ojson args = object_arguments ? ojson::parse(c.arguments, nullptr, false) : ojson(c.arguments);
            if (args.is_discarded()) args = c.arguments;
            calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", args}}}});
        }
        j["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) j["name"] = m.name;
    if (!m.reasoning_content.empty()) j["reasoning_content"] = m.reasoning_content;
    return j;
}

ChatPrompt render_with_tools(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages, const ChatTools& tools,
                             bool add_generation_prompt, const ojson& extra) {
    const ToolList list = tools.choice == ToolChoice::None ? ToolList{} : parse_tool_list(tools);
    const bool required = tools.choice == ToolChoice::Required;
    if (required && list.names.empty()) throw Error(ErrorCode::InvalidArgument, "a required tool call needs tools");
    if (required && !tools.function.empty() &&
        std::find(list.names.begin(), list.names.end(), tools.function) == list.names.end()) {
        throw Error(ErrorCode::InvalidArgument, "the required function '" + tools.function + "' is not among the tools");
    }
    const TemplateToolSupport support = tool_support(tmpl.source());
    const bool offer = !list.names.empty();

    std::vector<ChatMessage> convo = support.history ? messages : calls_as_text(messages);
    if (offer && !support.definitions) {
        if (!convo.empty() && convo.front().role == "system") {
            convo.front().content += "\n\n" + instructions(list);
        } else {
            convo.insert(convo.begin(), ChatMessage{"system", instructions(list)});
        }
    }
    ChatTemplateInputs in;
    in.add_generation_prompt = add_generation_prompt;
    if (extra.is_object()) in.extra = extra;
    if (offer && support.definitions) in.tools = list.tools;
    auto render = [&](bool object_arguments) {
        in.messages = ojson::array();
        for (const ChatMessage& m : convo) in.messages.push_back(template_message(m, object_arguments));
        return tmpl.apply(in);
    };
    ChatPrompt out;
    const bool any_calls = std::any_of(convo.begin(), convo.end(), [](const ChatMessage& m) { return !m.tool_calls.empty(); });
    try {
        out.text = render(true);
    } catch (const Error&) {
        // Templates that concatenate a call's arguments want them as text.
        if (!any_calls) throw;
        out.text = render(false);
    }
    if (required) {
        const ToolStyle style = support.definitions ? support.style : ToolStyle::Hermes;
        out.text += call_opener(style);
        const std::string key = style == ToolStyle::Llama3 ? "parameters" : "arguments";
        for (const std::string& name : list.names) {
            if (tools.function.empty() || name == tools.function) {
                out.call_prefixes.push_back("{\"name\": \"" + name + "\", \"" + key + "\": {");
            }
        }
        if (out.call_prefixes.size() == 1) out.call_schema = call_schema(list, tools.function.empty() ? list.names[0] : tools.function, key);
    }
    return out;
}

ChatReply parse_chat_reply(std::string_view text, const ChatTools& tools) {
    ChatReply plain{std::string(text), {}, {}};
    if (tools.json.empty() || tools.choice == ToolChoice::None) return plain;
    const ToolList list = parse_tool_list(tools);
    std::optional<ChatReply> r = hermes_calls(text, list.names);
    if (!r) r = deepseek_calls(text, list.names);
    if (!r) r = json_calls(text, list.names);
    if (!r) return plain;
    std::mt19937 rng(std::random_device{}());
    for (ToolCall& c : r->tool_calls) c.id = call_id(rng);
    return *r;
}

size_t chat_reply_text_prefix(std::string_view text) {
    const std::string_view rest = trim(text);
    if (rest.empty() || rest.front() == '{' || rest.front() == '[') return 0;
    for (std::string_view marker : {kCallOpen, kMistralCalls, kPythonTag, kDsCalls}) {
        if (marker.starts_with(rest.substr(0, marker.size())) || rest.starts_with(marker)) return 0;
    }
    // Calls may also follow text: everything from the first marker on, or
    // a tail that may be the start of one, is held back.
    size_t keep = text.size();
    for (std::string_view marker : {kCallOpen, kDsCalls}) {
        const size_t open = text.find(marker);
        if (open != std::string_view::npos) {
            keep = std::min(keep, open);
            continue;
        }
        for (size_t k = std::min(text.size(), marker.size() - 1); k > 0; --k) {
            if (text.substr(text.size() - k) == marker.substr(0, k)) {
                keep = std::min(keep, text.size() - k);
                break;
            }
        }
    }
    return keep;
}

void put_reply_calls(nlohmann::json& message, const std::vector<ToolCall>& calls, bool parallel, bool legacy, bool stream) {
    using nlohmann::json;
    auto function = [](const ToolCall& c) { return json{{"name", c.name}, {"arguments", c.arguments}}; };
    if (calls.empty()) return;
    if (legacy) {
        message["function_call"] = function(calls.front());
        return;
    }
    json out = json::array();
    for (size_t i = 0; i < calls.size() && (parallel || i == 0); ++i) {
        json c = {{"id", calls[i].id}, {"type", "function"}, {"function", function(calls[i])}};
        if (stream) c["index"] = i;
        out.push_back(std::move(c));
    }
    message["tool_calls"] = std::move(out);
}

nlohmann::json reply_message(const ChatReply& reply, bool parallel, bool legacy) {
    nlohmann::json m = {{"role", "assistant"}, {"content", reply.content}};
    if (reply.tool_calls.empty()) return m;
    if (reply.content.empty()) m["content"] = nullptr;
    put_reply_calls(m, reply.tool_calls, parallel, legacy, false);
    return m;
}

}  // namespace lantern
