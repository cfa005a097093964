// The table of built-in chat formats behind ChatTemplate::builtin().
#pragma once

#include <string_view>
#include <vector>

namespace lantern {

struct BuiltinTemplate {
    std::string_view name;       // what --chat-template takes
    std::string_view test_file;  // tests/data/chat_templates/<test_file>.jinja holds the same text
    std::string_view bos_token;  // the family's usual BOS/EOS strings
    std::string_view eos_token;
    std::string_view source;     // the Jinja template
};

const std::vector<BuiltinTemplate>& builtin_templates();

}  // namespace lantern
