// Constrained sampling for a GBNF grammar (grammar.h): the generated text is
// a prefix of a text the grammar's root matches, and generation may end only
// once it matches whole.
//
// GrammarState recognises the text as a set of parse stacks, each the grammar
// positions still to match, innermost last: a pushdown automaton run on every
// parse at once. A character advances each stack whose next element is a
// character set that holds it; rule references are expanded at once (one stack
// per alternative) until every stack's next element is a character set, or
// the stack is empty, which means the text so far matches root. A reference
// that ends its alternative does not stay on the stack, so right recursion
// (x* as r ::= x r | "") keeps stacks short; equal stacks are merged.
//
// Text comes as bytes and is decoded as UTF-8: a character's first bytes are
// taken when some stack can take a character that begins with them.
//
// GrammarConstraint applies it to tokens: a token is allowed when its whole
// piece keeps the text a prefix of the grammar's language (an empty piece
// never is), an end-of-generation token when the text is complete. Before
// feeding a piece it checks the piece's first byte against a table of the
// bytes the state takes, so a scan of the whole vocabulary copies the state
// only for the few tokens that may fit.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/grammar.h"
#include "sampling/sampler.h"
#include "sampling/token_texts.h"

namespace lantern {

class GrammarState {
public:
    // A grammar can be ambiguous enough for its stacks to multiply; past
    // kMaxStacks after one character the state refuses that character, and
    // so it does when expanding the references on top takes more than
    // kMaxExpansions steps (("a"? "b"*){500} nested in another {500} has a
    // quarter of a million ways to begin).
    static constexpr size_t kMaxStacks = 4096;
    static constexpr size_t kMaxExpansions = 16 * kMaxStacks;

    // Throws Error(InvalidArgument) when the grammar's start takes more than
    // kMaxExpansions steps (its stacks may be more than kMaxStacks: a
    // choice among many first characters narrows at the first one).
    explicit GrammarState(std::shared_ptr<const Grammar> grammar);

    // Consumes one byte; false (and the state unchanged) if the text would
    // no longer be a prefix of one the grammar matches.
    bool feed(unsigned char c);
    bool feed(std::string_view text);  // all or nothing
    // Whether feed(c) would succeed, without changing anything; it does not
    // expand the parses, so past the bounds above feed(c) may still refuse.
    bool takes(unsigned char c) const;
    // The text so far matches the grammar whole.
    bool complete() const;
    // Some text can still follow.
    bool can_continue() const;

private:
    using Stack = std::vector<uint32_t>;
    // The stacks `work` become once every reference on top is expanded:
    // sorted and distinct, each topped by a character set or empty; false
    // (and `out` unspecified) past kMaxExpansions.
    bool expand(std::vector<Stack> work, std::vector<Stack>& out) const;
    // Some stack's next character set meets [lo, hi].
    bool reaches(uint32_t lo, uint32_t hi) const;
    bool advance(uint32_t c);
    // The code points a character may still be after its bytes so far:
    // `bits` (the payload read) with `more` continuation bytes to come.
    static bool span(uint32_t bits, int more, int length, uint32_t& lo, uint32_t& hi);

    std::shared_ptr<const Grammar> grammar_;
    std::vector<Stack> stacks_;  // sorted, distinct
    uint32_t bits_ = 0;          // a character's payload so far
    uint8_t more_ = 0;           // its continuation bytes still to come
    uint8_t length_ = 0;         // its length in bytes
};

class GrammarConstraint {
public:
    // texts: every token's text and end flag (shared, not copied).
    GrammarConstraint(SharedTokenTexts texts, std::shared_ptr<const Grammar> grammar);
    GrammarConstraint(std::vector<std::string> pieces, std::vector<bool> eog, std::shared_ptr<const Grammar> grammar)
        : GrammarConstraint(share_token_texts(std::move(pieces), std::move(eog)), std::move(grammar)) {}

    bool allows(int32_t token) const;
    // Records a token that allows() accepted.
    void advance(int32_t token);
    void reset();
    bool complete() const { return state_.complete(); }

    // The next token: sampler's pick from `logits` (n_vocab floats, not
    // modified) among the allowed tokens; the state advances past it. Not
    // recorded in the sampler's penalty history (the caller accepts it).
    int32_t sample(TokenSampler& sampler, const float* logits);

private:
    void refresh_first_bytes();

    SharedTokenTexts texts_;
    std::shared_ptr<const Grammar> grammar_;
    GrammarState state_;
    std::array<bool, 256> first_byte_{};  // the bytes state_ takes
    std::vector<float> masked_;           // draw scratch
};

}  // namespace lantern
