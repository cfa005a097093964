#include "sampling/grammar_constraint.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "lantern/error.h"
#include "sampling/constrained_draw.h"

namespace lantern {

using Kind = Grammar::Element::Kind;

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
    std::vector<Stack> starts;
    for (const uint32_t alt : grammar_->alternatives(grammar_->root())) starts.push_back(Stack{alt});
    if (!expand(std::move(starts), stacks_)) {
        throw Error(ErrorCode::InvalidArgument,
                    "grammar: too ambiguous (more than " + std::to_string(kMaxExpansions) +
                        " steps to find the parses of its start)");
    }
}

bool GrammarState::expand(std::vector<Stack> work, std::vector<Stack>& out) const {
    // A worklist rather than recursion, since a chain of rules can be long;
    // and each stack about to expand a reference is expanded once, since
    // paths through optional parts meet again (x{50} with x ::= y | y and
    // y ::= "a" | "" would otherwise be 2^50 paths).
    std::set<Stack> expanded;
    out.clear();
    while (!work.empty()) {
        Stack s = std::move(work.back());
        work.pop_back();
        while (!s.empty()) {
            const uint32_t pos = s.back();
            const Grammar::Element& e = grammar_->at(pos);
            if (e.kind == Kind::Chars) break;
            if (e.kind == Kind::End) {  // the alternative is done: back to its caller
                s.pop_back();
                continue;
            }
            if (!expanded.insert(s).second) break;
            if (expanded.size() > kMaxExpansions) return false;
            // A reference: come back after it, unless nothing of this
            // alternative follows it; one stack per alternative.
            s.pop_back();
            if (grammar_->at(pos + 1).kind != Kind::End) s.push_back(pos + 1);
            const std::vector<uint32_t>& alts = grammar_->alternatives(e.index);
            for (size_t i = 1; i < alts.size(); ++i) {
                Stack t = s;
                t.push_back(alts[i]);
                work.push_back(std::move(t));
            }
            s.push_back(alts[0]);
        }
        if (s.empty() || grammar_->at(s.back()).kind == Kind::Chars) out.push_back(std::move(s));
        if (out.size() > kMaxExpansions) return false;
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return true;
}

bool GrammarState::reaches(uint32_t lo, uint32_t hi) const {
    // Surrogates are not characters: only what lies either side of them.
    const auto meets = [&](uint32_t a, uint32_t b) {
        if (a > b) return false;
        for (const Stack& s : stacks_) {
            if (!s.empty() && grammar_->set(grammar_->at(s.back()).index).overlaps(a, b)) return true;
        }
        return false;
    };
    return meets(lo, std::min(hi, 0xD7FFu)) || meets(std::max(lo, 0xE000u), hi);
}

bool GrammarState::span(uint32_t bits, int more, int length, uint32_t& lo, uint32_t& hi) {
    static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    const int shift = 6 * more;
    lo = std::max(bits << shift, kLeast[length]);
    hi = std::min((bits << shift) | ((1u << shift) - 1), Grammar::kMaxCodePoint);
    return lo <= hi;
}

bool GrammarState::takes(unsigned char c) const {
    uint32_t lo = 0, hi = 0;
    if (more_ == 0) {
        if (c < 0x80) return reaches(c, c);
        if (c >= 0xC2 && c <= 0xDF) return span(c & 0x1Fu, 1, 2, lo, hi) && reaches(lo, hi);
        if (c >= 0xE0 && c <= 0xEF) return span(c & 0x0Fu, 2, 3, lo, hi) && reaches(lo, hi);
        if (c >= 0xF0 && c <= 0xF4) return span(c & 0x07u, 3, 4, lo, hi) && reaches(lo, hi);
        return false;
    }
    if ((c & 0xC0) != 0x80) return false;
    return span((bits_ << 6) | (c & 0x3Fu), more_ - 1, length_, lo, hi) && reaches(lo, hi);
}

bool GrammarState::advance(uint32_t c) {
    std::vector<Stack> moved;
    for (const Stack& s : stacks_) {
        if (s.empty() || !grammar_->set(grammar_->at(s.back()).index).contains(c)) continue;
        moved.push_back(s);
        ++moved.back().back();
    }
    std::vector<Stack> next;
    if (!expand(std::move(moved), next) || next.empty() || next.size() > kMaxStacks) return false;
    stacks_ = std::move(next);
    return true;
}

bool GrammarState::feed(unsigned char c) {
    if (!takes(c)) return false;
    if (more_ == 0 && c < 0x80) return advance(c);
    if (more_ == 0) {
        length_ = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        more_ = static_cast<uint8_t>(length_ - 1);
        bits_ = c & (0x7Fu >> length_);
        return true;
    }
    const uint32_t bits = (bits_ << 6) | (c & 0x3Fu);
    if (more_ == 1) {
        if (!advance(bits)) return false;
        more_ = 0, bits_ = 0;
        return true;
    }
    --more_;
    bits_ = bits;
    return true;
}

bool GrammarState::feed(std::string_view text) {
    GrammarState s = *this;
    for (const char c : text) {
        if (!s.feed(static_cast<unsigned char>(c))) return false;
    }
    *this = std::move(s);
    return true;
}

bool GrammarState::complete() const { return more_ == 0 && !stacks_.empty() && stacks_.front().empty(); }

bool GrammarState::can_continue() const { return more_ != 0 || (!stacks_.empty() && !stacks_.back().empty()); }

GrammarConstraint::GrammarConstraint(SharedTokenTexts texts, std::shared_ptr<const Grammar> grammar)
    : texts_(std::move(texts)), grammar_(std::move(grammar)), state_(grammar_) {
    if (!texts_ || texts_->pieces.empty() || texts_->eog.size() != texts_->pieces.size()) {
        throw Error(ErrorCode::InvalidArgument, "grammar constraint: one piece and one end flag per token");
    }
    refresh_first_bytes();
}

void GrammarConstraint::refresh_first_bytes() {
    for (int b = 0; b < 256; ++b) first_byte_[static_cast<size_t>(b)] = state_.takes(static_cast<unsigned char>(b));
}

bool GrammarConstraint::allows(int32_t token) const {
    if (token < 0 || static_cast<size_t>(token) >= texts_->pieces.size()) return false;
    if (texts_->eog[static_cast<size_t>(token)]) return state_.complete();
    const std::string& piece = texts_->pieces[static_cast<size_t>(token)];
    if (piece.empty() || !first_byte_[static_cast<unsigned char>(piece[0])]) return false;
    GrammarState s = state_;
    for (const char c : piece) {
        if (!s.feed(static_cast<unsigned char>(c))) return false;
    }
    return true;
}

void GrammarConstraint::advance(int32_t token) {
    if (texts_->eog[static_cast<size_t>(token)]) return;
    state_.feed(texts_->pieces[static_cast<size_t>(token)]);
    refresh_first_bytes();
}

void GrammarConstraint::reset() {
    state_ = GrammarState(grammar_);
    refresh_first_bytes();
}

int32_t GrammarConstraint::sample(TokenSampler& sampler, const float* logits) {
    const int32_t t = draw_allowed(
        sampler, logits, [this](int32_t token) { return allows(token); }, texts_->eog, masked_, "grammar");
    advance(t);
    return t;
}

}  // namespace lantern
