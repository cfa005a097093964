#include "chat/chat_template.h"

#include <utility>

#include "chat/builtin_templates.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_lexer.h"
#include "chat/tool_calls.h"
#include "lantern/error.h"

namespace lantern {

struct ChatTemplate::Impl {
    std::string source;
    std::string name;
    std::string bos_token;
    std::string eos_token;
    jinja::Body body;  // macros keep pointers into it: Impl never moves (shared_ptr)
};

namespace {

std::string where(const jinja::RenderError& e) {
    return e.located() ? "line " + std::to_string(e.line()) + ", column " + std::to_string(e.column()) : "unknown position";
}

std::string names_list() {
    std::string out;
    for (const std::string& n : ChatTemplate::builtin_names()) out += (out.empty() ? "" : ", ") + n;
    return out;
}

}  // namespace

ChatTemplate ChatTemplate::from_string(std::string source, std::string bos_token, std::string eos_token) {
    return parse(std::move(source), std::move(bos_token), std::move(eos_token), "");
}

ChatTemplate ChatTemplate::parse(std::string source, std::string bos_token, std::string eos_token, std::string name) {
    auto impl = std::make_shared<Impl>();
    try {
        impl->body = jinja::parse_template(jinja::tokenize(source));
    } catch (const jinja::RenderError& e) {
        throw Error(ErrorCode::Template, "chat template syntax error at " + where(e) + ": " + e.reason());
    }
    impl->source = std::move(source);
    impl->bos_token = std::move(bos_token);
    impl->eos_token = std::move(eos_token);
    impl->name = std::move(name);
    return ChatTemplate(std::move(impl));
}

std::optional<ChatTemplate> ChatTemplate::builtin(std::string_view name) {
    for (const BuiltinTemplate& b : builtin_templates()) {
        if (b.name == name) return builtin(name, std::string(b.bos_token), std::string(b.eos_token));
    }
    return std::nullopt;
}

std::optional<ChatTemplate> ChatTemplate::builtin(std::string_view name, std::string bos_token, std::string eos_token) {
    for (const BuiltinTemplate& b : builtin_templates()) {
        if (b.name == name) return parse(std::string(b.source), std::move(bos_token), std::move(eos_token), std::string(b.name));
    }
    return std::nullopt;
}

std::vector<std::string> ChatTemplate::builtin_names() {
    std::vector<std::string> names;
    for (const BuiltinTemplate& b : builtin_templates()) names.emplace_back(b.name);
    return names;
}

std::optional<std::string> ChatTemplate::guess_builtin(const std::function<bool(std::string_view)>& has_token) {
    if (!has_token) return std::nullopt;
    // Most specific markers first: several families share <|user|> or [INST].
    if (has_token("<\uff5cUser\uff5c>")) return "deepseek-r1";
    if (has_token("<|START_OF_TURN_TOKEN|>")) return "command-r";
    if (has_token("<|start_header_id|>")) return "llama3";
    if (has_token("<start_of_turn>")) return "gemma";
    if (has_token("<|im_start|>")) return "chatml";
    if (has_token("<|user|>") && has_token("<|end|>")) return "phi3";
    if (has_token("[INST]")) return "mistral";
    if (has_token("<\uff5cend\u2581of\u2581sentence\uff5c>")) return "deepseek";
    return std::nullopt;
}

ChatTemplate ChatTemplate::select(std::string_view override_spec, std::string_view file_template,
                                  const std::function<bool(std::string_view)>& has_token, std::string bos_token,
                                  std::string eos_token) {
    if (!override_spec.empty()) {
        if (auto t = builtin(override_spec, bos_token, eos_token)) return *t;
        if (override_spec.find("{{") != std::string_view::npos || override_spec.find("{%") != std::string_view::npos) {
            return from_string(std::string(override_spec), std::move(bos_token), std::move(eos_token));
        }
        throw Error(ErrorCode::InvalidArgument, "unknown chat template '" + std::string(override_spec) +
                                                    "': not a built-in (" + names_list() + ") nor a Jinja template");
    }
    if (!file_template.empty()) return from_string(std::string(file_template), std::move(bos_token), std::move(eos_token));
    if (auto name = guess_builtin(has_token)) return *builtin(*name, std::move(bos_token), std::move(eos_token));
    throw Error(ErrorCode::Template,
                "no chat template: the model has no tokenizer.chat_template and its vocabulary matches no built-in "
                "format; choose one of " + names_list() + " or pass a Jinja template");
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
    ChatTemplateInputs inputs;
    for (const ChatMessage& m : messages) inputs.messages.push_back(template_message(m, true));
    inputs.add_generation_prompt = add_generation_prompt;
    return apply(inputs);
}

std::string ChatTemplate::apply(const ChatTemplateInputs& inputs) const {
    using jinja::Value;
    try {
        Value context = Value::dict();
        auto& vars = context.dict_data();
        vars.set(Value("messages"), Value::from_json(inputs.messages));
        vars.set(Value("tools"), inputs.tools.is_null() ? Value::none() : Value::from_json(inputs.tools));
        vars.set(Value("documents"), Value::none());
        vars.set(Value("add_generation_prompt"), Value(inputs.add_generation_prompt));
        vars.set(Value("bos_token"), Value(impl_->bos_token));
        vars.set(Value("eos_token"), Value(impl_->eos_token));
        if (inputs.extra.is_object()) {
            for (const auto& [k, v] : inputs.extra.items()) vars.set(Value(k), Value::from_json(v));
        }
        jinja::Interpreter interpreter(context, jinja::RenderOptions{inputs.now});
        return interpreter.render(impl_->body);
    } catch (const jinja::RenderError& e) {
        if (e.raised()) {
            throw Error(ErrorCode::Template, "chat template raised an exception at " + where(e) + ": " + e.reason());
        }
        throw Error(ErrorCode::Template, "chat template error at " + where(e) + ": " + e.reason());
    } catch (const std::bad_alloc&) {
        throw Error(ErrorCode::Template, "chat template error: out of memory while rendering");
    }
}

const std::string& ChatTemplate::source() const { return impl_->source; }
const std::string& ChatTemplate::name() const { return impl_->name; }
const std::string& ChatTemplate::bos_token() const { return impl_->bos_token; }
const std::string& ChatTemplate::eos_token() const { return impl_->eos_token; }

}  // namespace lantern
