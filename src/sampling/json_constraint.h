// Constrained sampling for JSON output (OpenAI's response_format
// {"type": "json_object"}): the generated text is one JSON object (RFC 8259)
// and generation may end only once it is complete.
//
// JsonState checks text byte by byte: a pushdown automaton over objects,
// arrays, strings (escapes and \uXXXX; bytes >= 0x80 pass as UTF-8 without
// decoding), numbers and the three literals. Runs of whitespace are capped
// (kMaxSpaces) so that a model cannot stall in indentation forever, and so
// is nesting (kMaxDepth).
//
// JsonConstraint applies it to tokens: a token is allowed when its whole
// piece keeps the text a valid JSON prefix (an empty piece never is), an
// end-of-generation token when the object is complete. Given prefixes, the
// object must also begin with one of them (a forced tool call's
// `{"name": "f", "arguments": {`): each must be a JSON prefix itself. Given
// a schema (json_schema.h), the text is a value the schema allows instead. Sampling draws with
// the caller's TokenSampler among the allowed tokens (constrained_draw.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memory>
#include <optional>

#include "sampling/json_schema.h"
#include "sampling/sampler.h"
#include "sampling/token_texts.h"

namespace lantern {

class JsonState {
public:
    static constexpr int kMaxSpaces = 40;
    static constexpr int kMaxDepth = 64;

    // Consumes one byte; false (and the state unchanged) if the text would
    // no longer be a prefix of a JSON object.
    bool feed(unsigned char c);
    bool feed(const std::string& text);  // all or nothing
    // The top-level object is closed.
    bool complete() const { return mode_ == Mode::Done; }
    static constexpr int kMaxNumber = 24;  // bytes of a number after its first (a model may write digits for ever)

private:
    enum class Mode : uint8_t {
        Start,        // before the top-level '{'
        Value,        // a value must come (after ':' or ',' in an array)
        ArrayFirst,   // after '[': a value or ']'
        KeyFirst,     // after '{': a key or '}'
        Key,          // after ',' in an object: a key
        Colon,        // after a key
        After,        // after a value: ',' or the closing bracket
        String,       // inside a string (key_ tells which kind)
        Escape,       // after a backslash
        Unicode,      // in \uXXXX (hex_ digits read)
        Minus,        // after '-' (Minus .. ExpInt: in a number, in this order)
        Zero,         // after a leading 0
        Int,          // in the integer digits
        Dot,          // after '.'
        Frac,         // in the fraction digits
        Exp,          // after 'e'
        ExpSign,      // after 'e+' / 'e-'
        ExpInt,       // in the exponent digits
        Literal,      // in true / false / null
        Done,         // the object is closed: only whitespace
    };
    bool step(unsigned char c);
    bool end_value();                 // a value ended: After, or Done at the top
    bool open(char bracket);          // '{' or '['
    bool close(char bracket);         // '}' or ']'
    bool start_value(unsigned char c);
    bool space(unsigned char c);

    Mode mode_ = Mode::Start;
    bool key_ = false;         // the string being read is a key
    uint8_t hex_ = 0;          // \uXXXX: hex digits read; an exponent: its digits
    uint32_t code_ = 0;        // \uXXXX: the digits read (json_chars::unicode_digit)
    uint8_t num_ = 0;          // a number's bytes after its first (at most kMaxNumber)
    bool low_due_ = false;     // a high surrogate's escape came: its low one must follow
    unsigned utf8_ = 0;        // String: continuation bytes its UTF-8 sequence still needs
    uint8_t spaces_ = 0;       // whitespace bytes in a row
    const char* literal_ = nullptr;  // the rest of the literal being read
    std::string stack_;        // open brackets, innermost last
};

class JsonConstraint {
public:
    // texts: every token's text and end flag (shared, not copied). Throws
    // Error(InvalidArgument) for a prefix that is not the start of a JSON object.
    JsonConstraint(SharedTokenTexts texts, std::vector<std::string> prefixes = {},
                   std::shared_ptr<const JsonSchema> schema = nullptr);
    JsonConstraint(std::vector<std::string> pieces, std::vector<bool> eog, std::vector<std::string> prefixes = {},
                   std::shared_ptr<const JsonSchema> schema = nullptr)
        : JsonConstraint(share_token_texts(std::move(pieces), std::move(eog)), std::move(prefixes), std::move(schema)) {}

    bool allows(int32_t token) const;
    // Records a token that allows() accepted.
    void advance(int32_t token);
    void reset() {
        state_ = JsonState{};
        if (schema_) schema_state_.emplace(schema_);
        head_.clear();
    }
    bool complete() const { return schema_state_ ? schema_state_->complete() : state_.complete(); }

    // The next token: sampler's pick from `logits` (n_vocab floats, not
    // modified) among the allowed tokens; the state advances past it. Not
    // recorded in the sampler's penalty history (the caller accepts it).
    int32_t sample(TokenSampler& sampler, const float* logits);

private:
    // The text with piece appended still agrees with a prefix: it is the
    // start of one, or one is its start.
    bool prefix_allows(const std::string& piece) const;

    SharedTokenTexts texts_;
    std::vector<std::string> prefixes_;
    size_t longest_prefix_ = 0;
    std::string head_;  // the output's first bytes, while a prefix may still reject one
    JsonState state_;
    std::shared_ptr<const JsonSchema> schema_;
    std::optional<SchemaState> schema_state_;  // with a schema: checked instead of state_
    std::vector<float> masked_;  // [n_vocab] logits with rejected tokens at -inf
};

}  // namespace lantern
