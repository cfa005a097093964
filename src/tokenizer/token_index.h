// Token text -> id, looked up by string_view without allocating.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lantern::tok {

class TokenIndex {
public:
    // When a text occurs more than once, the first id keeps it.
    explicit TokenIndex(const std::vector<std::string>& tokens) {
        map_.reserve(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) map_.emplace(tokens[i], static_cast<int32_t>(i));
    }

    int32_t find(std::string_view text) const {  // -1 when absent
        auto it = map_.find(text);
        return it == map_.end() ? -1 : it->second;
    }

private:
    struct Hash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> map_;
};

}  // namespace lantern::tok
