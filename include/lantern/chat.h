// A chat message, as chat templates see it.
#pragma once

#include <string>

namespace lantern {

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", "tool", ...
    std::string content;
};

}  // namespace lantern
