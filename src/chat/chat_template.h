// Chat templates: turn a conversation into the prompt text a model was
// trained on.
//
// Models ship a Jinja2 template in the GGUF key `tokenizer.chat_template`.
// ChatTemplate renders it with lantern's own Jinja interpreter (src/chat/jinja_*),
// byte for byte as Hugging Face's apply_chat_template does with Python's jinja2:
// trim_blocks and lstrip_blocks on, the loopcontrols extension, the
// `{% generation %}` block, raise_exception(), strftime_now() and a tojson filter
// that keeps non-ASCII text (json.dumps(ensure_ascii=False)). The variables are
// HF's: messages, tools (none when absent), documents (none),
// add_generation_prompt, bos_token, eos_token, plus any extras the caller adds.
//
// Built-in formats (ChatTemplate::builtin) are the published templates of the
// common families, for models whose file carries none:
//   chatml        ChatML (<|im_start|>role ... <|im_end|>), OpenHermes' template
//   qwen2.5       ChatML with Qwen2.5's default system prompt and tool calling
//   llama2        Llama 2 chat ([INST] <<SYS>> ... [/INST])
//   llama3        Llama 3 (<|start_header_id|>role<|end_header_id|> ... <|eot_id|>)
//   llama3.1      Llama 3.1/3.3, with its date preamble and tool calling
//   mistral       Mistral Instruct v0.3 ([INST] ... [/INST], tools)
//   gemma         Gemma 3 (<start_of_turn>user ... <end_of_turn>); the system
//                 prompt is folded into the first user turn
//   phi3          Phi-3.5 (<|system|> <|user|> <|assistant|> ... <|end|>)
//   zephyr        Zephyr (<|user|>\n ... </s>)
//   deepseek      DeepSeek LLM / V2 chat (User: ... Assistant:)
//   deepseek-r1   DeepSeek R1 and V3 (<｜User｜> ... <｜Assistant｜>)
//   command-r     Cohere Command R (<|START_OF_TURN_TOKEN|>...)
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lantern/chat.h"

namespace lantern {

// ChatMessage: include/lantern/chat.h.

// Everything a template can see, for callers that need more than role/content
// pairs (tool calls, tool definitions, template switches such as enable_thinking).
struct ChatTemplateInputs {
    // OpenAI-style message objects: {"role": ..., "content": ..., "tool_calls": [...]}.
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    // Tool definitions ([{"type": "function", "function": {...}}]); null = no tools.
    nlohmann::ordered_json tools;
    bool add_generation_prompt = true;
    // More template variables (e.g. {"enable_thinking": false}); they override the above.
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    // The clock strftime_now() reads; nullopt = local time when rendering.
    std::optional<std::tm> now;
};

class ChatTemplate {
public:
    // Parses a Jinja template. Throws Error(Template) with the line, column and
    // reason when it does not parse.
    static ChatTemplate from_string(std::string source, std::string bos_token, std::string eos_token);

    // A built-in format by name (see the list above), with the family's usual
    // BOS/EOS strings, or the given ones. nullopt for an unknown name.
    static std::optional<ChatTemplate> builtin(std::string_view name);
    static std::optional<ChatTemplate> builtin(std::string_view name, std::string bos_token, std::string eos_token);
    static std::vector<std::string> builtin_names();

    // The built-in format a vocabulary suggests (has <|im_start|> -> "chatml",
    // <|start_header_id|> -> "llama3", <start_of_turn> -> "gemma", ...), if any.
    static std::optional<std::string> guess_builtin(const std::function<bool(std::string_view)>& has_token);

    // Chooses a model's template, first match wins:
    //   1. `override_spec` (e.g. --chat-template): a built-in name, or Jinja source;
    //   2. `file_template`: the GGUF's tokenizer.chat_template;
    //   3. the built-in guessed from the vocabulary (`has_token` may be empty).
    // Empty strings mean "not given". Throws Error(InvalidArgument) for an
    // override that is neither a built-in name nor a template, Error(Template)
    // when nothing matches or the chosen template does not parse.
    static ChatTemplate select(std::string_view override_spec, std::string_view file_template,
                               const std::function<bool(std::string_view)>& has_token, std::string bos_token,
                               std::string eos_token);

    // Renders a conversation. Throws Error(Template) when the template fails
    // (raise_exception, a type error, ...), naming the line and the reason.
    std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
    std::string apply(const ChatTemplateInputs& inputs) const;

    const std::string& source() const;
    // The built-in's name, or "" for a template from a string or file.
    const std::string& name() const;
    const std::string& bos_token() const;
    const std::string& eos_token() const;

private:
    struct Impl;
    explicit ChatTemplate(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    static ChatTemplate parse(std::string source, std::string bos_token, std::string eos_token, std::string name);
    std::shared_ptr<const Impl> impl_;  // parsed once; copies share it
};

}  // namespace lantern
