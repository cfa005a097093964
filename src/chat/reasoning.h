// The <think> blocks of reasoning models: split_reasoning and
// prompt_opens_reasoning (lantern/chat.h), and ReasoningStream, which
// splits a reply the same way while it is generated.
#pragma once

#include <string>
#include <string_view>

#include "lantern/chat.h"

namespace lantern {

// A reply's reasoning and answer as its pieces arrive: what feed() returns,
// over the whole reply and finish(), adds up to split_reasoning's result.
// Held back meanwhile: what may still be a tag ("<thi" at the start,
// "</thin" inside the block) and whitespace that split_reasoning would trim
// (before the block's text, at its end so far, and before the answer).
class ReasoningStream {
public:
    struct Parts {
        std::string reasoning;
        std::string answer;
    };
    explicit ReasoningStream(bool opened) : state_(opened ? State::Thinking : State::Start) {}
    Parts feed(std::string_view piece);
    Parts finish();

private:
    enum class State { Start, Thinking, Answering, Plain };
    State state_;
    std::string held_;         // not yet given out
    bool thought_ = false;     // Thinking: some reasoning given out (whitespace no longer leads)
    bool answered_ = false;    // Answering: some answer given out
};

}  // namespace lantern
