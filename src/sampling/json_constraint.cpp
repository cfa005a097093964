#include "sampling/json_constraint.h"

#include <algorithm>
#include <utility>

#include "lantern/error.h"
#include "sampling/constrained_draw.h"
#include "sampling/json_chars.h"

namespace lantern {

using json_chars::is_digit;
using json_chars::is_hex;
using json_chars::is_space;

bool JsonState::feed(unsigned char c) {
    JsonState next = *this;
    if (!next.step(c)) return false;
    *this = std::move(next);
    return true;
}

bool JsonState::feed(const std::string& text) {
    JsonState next = *this;
    for (char c : text) {
        if (!next.step(static_cast<unsigned char>(c))) return false;
    }
    *this = std::move(next);
    return true;
}

bool JsonState::end_value() {
    mode_ = stack_.empty() ? Mode::Done : Mode::After;
    return true;
}

bool JsonState::open(char bracket) {
    if (static_cast<int>(stack_.size()) >= kMaxDepth) return false;
    stack_.push_back(bracket);
    mode_ = bracket == '{' ? Mode::KeyFirst : Mode::ArrayFirst;
    return true;
}

bool JsonState::close(char bracket) {
    const char opener = bracket == '}' ? '{' : '[';
    if (stack_.empty() || stack_.back() != opener) return false;
    stack_.pop_back();
    return end_value();
}

bool JsonState::start_value(unsigned char c) {
    switch (c) {
        case '{':
        case '[': return open(static_cast<char>(c));
        case '"': mode_ = Mode::String, key_ = false; return true;
        case '-': mode_ = Mode::Minus, num_ = 0; return true;
        case '0': mode_ = Mode::Zero, num_ = 0; return true;
        case 't': mode_ = Mode::Literal, literal_ = "rue"; return true;
        case 'f': mode_ = Mode::Literal, literal_ = "alse"; return true;
        case 'n': mode_ = Mode::Literal, literal_ = "ull"; return true;
        default:
            if (c < '1' || c > '9') return false;
            mode_ = Mode::Int, num_ = 0;
            return true;
    }
}

bool JsonState::space(unsigned char c) {
    if (!is_space(c) || spaces_ >= kMaxSpaces) return false;
    ++spaces_;
    return true;
}

bool JsonState::step(unsigned char c) {
    // Inside a token: strings, escapes, numbers, literals. A number ends at
    // the first byte that cannot continue it, which then counts as what
    // comes after the value; before that, it has kMaxNumber bytes of room.
    if (mode_ >= Mode::Minus && mode_ <= Mode::ExpInt && !json_chars::number_room(c, ++num_, kMaxNumber)) return false;
    switch (mode_) {
        case Mode::String: {
            // UTF-8 sequences whole: a continuation byte goes on one.
            const bool continuation = utf8_ > 0;
            if (low_due_ && c != '\\') return false;  // a high surrogate's low one
            if (!json_chars::utf8_byte(c, utf8_)) return false;
            if (continuation || c >= 0x80) return true;
            if (c == '"') {
                if (!key_) return end_value();
                mode_ = Mode::Colon;
                return true;
            }
            if (c == '\\') mode_ = Mode::Escape;
            return c >= 0x20;  // control characters must be escaped
        }
        case Mode::Escape:
            if (c == 'u') {
                mode_ = Mode::Unicode, hex_ = 0, code_ = 0;
                return true;
            }
            if (low_due_) return false;
            mode_ = Mode::String;
            return json_chars::unescape(c) >= 0;
        case Mode::Unicode:
            if (!json_chars::unicode_digit(c, hex_, code_, low_due_)) return false;
            if (++hex_ == 4) mode_ = Mode::String;
            return true;
        case Mode::Literal:
            if (c != static_cast<unsigned char>(*literal_)) return false;
            if (*++literal_ == '\0') return end_value();
            return true;
        case Mode::Minus:
            if (!is_digit(c)) return false;
            mode_ = c == '0' ? Mode::Zero : Mode::Int;
            return true;
        case Mode::Zero:
        case Mode::Int:
        case Mode::Frac:
        case Mode::ExpInt:
            // An exponent of at most two digits: the number stays a finite
            // double (31E813 is JSON that most parsers overflow on).
            if (is_digit(c) && mode_ != Mode::Zero) return mode_ != Mode::ExpInt || ++hex_ <= 2;
            if (c == '.' && (mode_ == Mode::Zero || mode_ == Mode::Int)) {
                mode_ = Mode::Dot;
                return true;
            }
            if ((c == 'e' || c == 'E') && mode_ != Mode::ExpInt) {
                mode_ = Mode::Exp;
                return true;
            }
            end_value();
            return step(c);
        case Mode::Dot:
            if (!is_digit(c)) return false;
            mode_ = Mode::Frac;
            return true;
        case Mode::Exp:
            if (c == '+' || c == '-') {
                mode_ = Mode::ExpSign;
                return true;
            }
            [[fallthrough]];
        case Mode::ExpSign:
            if (!is_digit(c)) return false;
            mode_ = Mode::ExpInt, hex_ = 1;
            return true;
        default:
            break;
    }
    // Between tokens.
    if (is_space(c)) return space(c);
    spaces_ = 0;
    switch (mode_) {
        case Mode::Start: return c == '{' && open('{');
        case Mode::Value: return start_value(c);
        case Mode::ArrayFirst: return c == ']' ? close(']') : start_value(c);
        case Mode::KeyFirst:
            if (c == '}') return close('}');
            [[fallthrough]];
        case Mode::Key:
            if (c != '"') return false;
            mode_ = Mode::String, key_ = true;
            return true;
        case Mode::Colon:
            if (c != ':') return false;
            mode_ = Mode::Value;
            return true;
        case Mode::After:
            if (c == ',') {
                mode_ = stack_.back() == '{' ? Mode::Key : Mode::Value;
                return true;
            }
            return (c == '}' || c == ']') && close(static_cast<char>(c));
        default:
            return false;  // Done: whitespace only
    }
}

JsonConstraint::JsonConstraint(SharedTokenTexts texts, std::vector<std::string> prefixes,
                               std::shared_ptr<const JsonSchema> schema)
    : texts_(std::move(texts)), prefixes_(std::move(prefixes)),
      schema_(std::move(schema)) {
    if (schema_) schema_state_.emplace(schema_);
    if (!texts_ || texts_->pieces.empty() || texts_->eog.size() != texts_->pieces.size()) {
        throw Error(ErrorCode::InvalidArgument, "JSON constraint: one piece and one end flag per token");
    }
    for (const std::string& p : prefixes_) {
        JsonState s;
        if (p.empty() || !s.feed(p) || s.complete()) {
            throw Error(ErrorCode::InvalidArgument, "JSON constraint: '" + p + "' does not begin a JSON object");
        }
        if (schema_state_) {
            SchemaState t = *schema_state_;
            if (!t.feed(p)) throw Error(ErrorCode::InvalidArgument, "JSON constraint: '" + p + "' does not fit the schema");
        }
        longest_prefix_ = std::max(longest_prefix_, p.size());
    }
}

bool JsonConstraint::prefix_allows(const std::string& piece) const {
    if (prefixes_.empty() || head_.size() >= longest_prefix_) return true;
    const std::string text = head_ + piece;
    for (const std::string& p : prefixes_) {
        const size_t n = std::min(p.size(), text.size());
        if (text.compare(0, n, p, 0, n) == 0) return true;
    }
    return false;
}

bool JsonConstraint::allows(int32_t token) const {
    if (token < 0 || static_cast<size_t>(token) >= texts_->pieces.size()) return false;
    if (texts_->eog[static_cast<size_t>(token)]) return complete();
    const std::string& piece = texts_->pieces[static_cast<size_t>(token)];
    if (piece.empty() || !prefix_allows(piece)) return false;
    if (schema_state_) {
        SchemaState s = *schema_state_;
        return s.feed(piece);
    }
    JsonState s = state_;
    return s.feed(piece);
}

void JsonConstraint::advance(int32_t token) {
    if (texts_->eog[static_cast<size_t>(token)]) return;
    const std::string& piece = texts_->pieces[static_cast<size_t>(token)];
    if (schema_state_) {
        schema_state_->feed(piece);
    } else {
        state_.feed(piece);
    }
    if (head_.size() < longest_prefix_) head_ += piece;
}

int32_t JsonConstraint::sample(TokenSampler& sampler, const float* logits) {
    const int32_t t = draw_allowed(
        sampler, logits, [this](int32_t token) { return allows(token); }, texts_->eog, masked_, "JSON constraint");
    advance(t);
    return t;
}

}  // namespace lantern
