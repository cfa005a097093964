#include "chat/reasoning.h"

#include <algorithm>

#include "sampling/json_chars.h"

namespace lantern {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

using json_chars::ltrim;
using json_chars::rtrim;

// The length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
    for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
        if (tag.starts_with(s.substr(s.size() - n))) return n;
    }
    return 0;
}

}  // namespace

std::pair<std::string, std::string> split_reasoning(std::string_view reply, bool opened) {
    std::string_view rest = reply;
    if (!opened) {
        rest = ltrim(reply);
        if (!rest.starts_with(kOpen)) return {"", std::string(reply)};
        rest.remove_prefix(kOpen.size());
    }
    const size_t end = rest.find(kClose);
    if (end == std::string_view::npos) return {std::string(rtrim(ltrim(rest))), ""};
    return {std::string(rtrim(ltrim(rest.substr(0, end)))), std::string(ltrim(rest.substr(end + kClose.size())))};
}

bool prompt_opens_reasoning(std::string_view prompt) { return rtrim(prompt).ends_with(kOpen); }

ReasoningStream::Parts ReasoningStream::feed(std::string_view piece) {
    Parts out;
    held_ += piece;
    if (state_ == State::Start) {
        const std::string_view t = ltrim(held_);
        if (t.size() < kOpen.size() && kOpen.starts_with(t)) return out;  // "", or a tag on its way
        if (!t.starts_with(kOpen)) {
            state_ = State::Plain;
        } else {
            held_ = std::string(t.substr(kOpen.size()));
            state_ = State::Thinking;
        }
    }
    if (state_ == State::Plain) {
        out.answer = std::move(held_);
        held_.clear();
        return out;
    }
    if (state_ == State::Thinking) {
        if (!thought_) held_ = std::string(ltrim(held_));
        const size_t end = held_.find(kClose);
        if (end != std::string::npos) {
            out.reasoning = std::string(rtrim(std::string_view(held_).substr(0, end)));
            held_ = held_.substr(end + kClose.size());
            state_ = State::Answering;
        } else {
            // Up to the last non-space byte before a tag that may be on its way.
            const std::string_view h = held_;
            const std::string_view give = rtrim(h.substr(0, h.size() - partial_tag(h, kClose)));
            out.reasoning = std::string(give);
            held_ = held_.substr(give.size());
        }
        if (!out.reasoning.empty()) thought_ = true;
        if (state_ == State::Thinking) return out;
    }
    // Answering: the answer without the whitespace that leads it.
    if (!answered_) held_ = std::string(ltrim(held_));
    if (!held_.empty()) answered_ = true;
    out.answer = std::move(held_);
    held_.clear();
    return out;
}

ReasoningStream::Parts ReasoningStream::finish() {
    Parts out;
    if (state_ == State::Start) {
        out.answer = std::move(held_);  // a reply that was only spaces, or "<thi"
    } else if (state_ == State::Thinking) {
        out.reasoning = std::string(rtrim(held_));  // an unclosed block: its partial tag is text
    }
    held_.clear();
    return out;
}

}  // namespace lantern
