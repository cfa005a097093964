#include "tokenizer/pretokenizer.h"

namespace lantern::tok {

PreTokenizer::PreTokenizer(std::span<const std::string_view> patterns) {
    rules_.reserve(patterns.size());
    for (std::string_view p : patterns) rules_.emplace_back(p);
}

void PreTokenizer::split(std::string_view text, std::vector<std::pair<size_t, size_t>>& out,
                         Scratch& s) const {
    if (text.empty()) return;
    s.text.assign(text);
    s.current.assign(1, {0, s.text.size()});
    for (const Regex& rule : rules_) {
        s.next.clear();
        for (const auto& [begin, end] : s.current) {
            size_t pos = begin, match_begin = 0, match_end = 0;
            while (pos < end && rule.find(s.text, begin, end, pos, match_begin, match_end, s.regex)) {
                if (match_begin > pos) s.next.emplace_back(pos, match_begin);
                s.next.emplace_back(match_begin, match_end);
                pos = match_end;
            }
            if (pos < end) s.next.emplace_back(pos, end);
        }
        s.current.swap(s.next);
    }
    for (const auto& [begin, end] : s.current) {
        out.emplace_back(s.text.offsets[begin], s.text.offsets[end]);
    }
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
    Scratch scratch;
    std::vector<std::pair<size_t, size_t>> ranges;
    split(text, ranges, scratch);
    std::vector<std::string> pieces;
    pieces.reserve(ranges.size());
    for (const auto& [begin, end] : ranges) pieces.emplace_back(text.substr(begin, end - begin));
    return pieces;
}

}  // namespace lantern::tok
