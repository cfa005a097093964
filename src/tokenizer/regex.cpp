// Regex matching: a backtracking run of the program regex_compiler.cpp
// emits, leftmost-first. See regex.h for the dialect.
#include "tokenizer/regex.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace lantern::tok {

void CodepointText::assign(std::string_view utf8) {
    cps.clear();
    props.clear();
    offsets.clear();
    cps.reserve(utf8.size());
    props.reserve(utf8.size());
    offsets.reserve(utf8.size() + 1);
    size_t pos = 0;
    while (pos < utf8.size()) {
        uint32_t cp = 0;
        const size_t len = unicode::decode_utf8(utf8, pos, cp);
        cps.push_back(cp);
        props.push_back(unicode::properties(cp));
        offsets.push_back(static_cast<uint32_t>(pos));
        pos += len;
    }
    offsets.push_back(static_cast<uint32_t>(utf8.size()));
}

bool Regex::CharClass::matches(uint32_t cp, uint32_t props) const {
    bool hit = (props & any_props) != 0;
    for (size_t i = 0; !hit && i < lacks_props.size(); ++i) hit = (props & lacks_props[i]) == 0;
    if (!hit && !ranges.empty()) {
        // First range whose end is >= cp.
        auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                                   [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) {
                                       return r.second < v;
                                   });
        hit = it != ranges.end() && it->first <= cp;
    }
    return hit != negated;
}

// --- matching ------------------------------------------------------------------

struct Regex::Bounds {
    uint32_t begin;
    uint32_t end;
};

bool Regex::run(uint32_t pc, uint32_t pos, const CodepointText& text, const Bounds& b,
                uint32_t& match_end, Scratch& scratch) const {
    auto& stack = scratch.stack;
    const size_t base = stack.size();
    const uint32_t* cps = text.cps.data();
    const uint32_t* props = text.props.data();
    for (;;) {
        const Inst& in = prog_[pc];
        bool ok = false;
        switch (in.op) {
            case Op::Char:
                if (pos < b.end && cps[pos] == in.a) ++pos, ++pc, ok = true;
                break;
            case Op::Class:
                if (pos < b.end && classes_[in.a].matches(cps[pos], props[pos])) ++pos, ++pc, ok = true;
                break;
            case Op::Split:
                stack.emplace_back(in.y, pos);
                pc = in.x, ok = true;
                break;
            case Op::Jmp: pc = in.x, ok = true; break;
            case Op::LineBegin:
                if (pos == b.begin || cps[pos - 1] == '\n') ++pc, ok = true;
                break;
            case Op::LineEnd:
                if (pos == b.end || cps[pos] == '\n') ++pc, ok = true;
                break;
            case Op::TextBegin:
                if (pos == b.begin) ++pc, ok = true;
                break;
            case Op::TextEnd:
                if (pos == b.end) ++pc, ok = true;
                break;
            case Op::TextEndNl:
                if (pos == b.end || (pos + 1 == b.end && cps[pos] == '\n')) ++pc, ok = true;
                break;
            case Op::LookAhead:
            case Op::NegLookAhead:
            case Op::Atomic: {
                uint32_t sub_end = 0;
                const bool found = run(pc + 1, pos, text, b, sub_end, scratch);
                if (in.op == Op::NegLookAhead ? !found : found) {
                    if (in.op == Op::Atomic) pos = sub_end;
                    pc = in.x, ok = true;
                }
                break;
            }
            case Op::SubMatch:
            case Op::Match:
                match_end = pos;
                stack.resize(base);
                return true;
        }
        if (ok) continue;
        if (stack.size() == base) return false;
        pc = stack.back().first;
        pos = stack.back().second;
        stack.pop_back();
    }
}

bool Regex::find(const CodepointText& text, size_t begin, size_t end, size_t from,
                 size_t& match_begin, size_t& match_end, Scratch& scratch) const {
    const Bounds b{static_cast<uint32_t>(begin), static_cast<uint32_t>(end)};
    for (size_t start = from; start < end; ++start) {
        uint32_t e = 0;
        if (run(0, static_cast<uint32_t>(start), text, b, e, scratch) && e > start) {
            match_begin = start;
            match_end = e;
            return true;
        }
    }
    return false;
}

}  // namespace lantern::tok
