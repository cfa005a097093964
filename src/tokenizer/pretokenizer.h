// Pre-tokenizers of byte-level BPE vocabularies: the published split rules
// of each model family, looked up by the `tokenizer.ggml.pre` name.
//
// A rule set is a sequence of regex patterns applied in turn, each with the
// "isolated" behaviour of tokenizer.json Split pre-tokenizers: every match
// becomes a piece of its own and so does every stretch between matches; a
// later pattern splits each piece of the earlier ones separately (the piece
// is the whole text for its anchors and lookaheads).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/regex.h"

namespace lantern::tok {

struct PreTokenizerSpec {
    std::string_view rule_set;                  // e.g. "gpt2", "llama3"
    std::span<const std::string_view> patterns;  // applied in order
    // Take a whole piece as one token when the vocabulary has it, before any
    // merging (tokenizer.json "ignore_merges", tiktoken's behaviour).
    bool ignore_merges = false;
    // Normalise the text to NFC before splitting it (the family's
    // tokenizer.json normalizer; GGUF files do not carry it).
    bool nfc = false;
};

// The spec for a `tokenizer.ggml.pre` name, or nullptr when it is unknown.
// "default" (the key absent) is the GPT-2 rule set.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view name);
const PreTokenizerSpec& gpt2_pre_tokenizer();
std::vector<std::string_view> known_pre_tokenizer_names();

class PreTokenizer {
public:
    // Compiles the patterns (throws Error(InvalidArgument) on a bad one).
    explicit PreTokenizer(std::span<const std::string_view> patterns);

    struct Scratch {
        CodepointText text;
        std::vector<std::pair<size_t, size_t>> current, next;  // codepoint ranges
        Regex::Scratch regex;
    };

    // Appends the pieces of `text` to `out` as byte ranges [begin, end) of
    // `text`, in order and covering it. Empty text gives no piece.
    void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& out,
               Scratch& scratch) const;

    // The pieces as strings (for tests and tools).
    std::vector<std::string> split(std::string_view text) const;

private:
    std::vector<Regex> rules_;
};

}  // namespace lantern::tok
