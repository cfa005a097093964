// SentencePiece-style BPE encoding ("llama" vocabularies): the text is split
// into UTF-8 characters, then the adjacent pair whose concatenation is the
// highest-scoring vocabulary piece is merged, repeatedly (ties: leftmost).
// Characters left without a piece are spelled with byte tokens <0xNN>, or
// become the unknown token when the vocabulary has no byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"

namespace lantern::tok {

class SpmModel {
public:
    // `mergeable[id]`: the piece may be produced by encoding (normal pieces;
    // control, user-defined, unused and byte pieces may not). `scores` may be
    // empty (all equal).
    SpmModel(const std::vector<std::string>& tokens, std::vector<float> scores, std::vector<uint8_t> mergeable,
             const TokenIndex& index);

    struct Scratch {
        std::vector<uint32_t> start, len;  // [symbols] byte range in the text; len 0 = merged away
        std::vector<int32_t> prev, next;
        struct Candidate {
            float score;
            uint32_t left;
            uint32_t size;  // bytes of the merged piece (detects stale entries)
        };
        std::vector<Candidate> heap;
    };

    // Appends the ids for `text`, already escaped ("▁" for each space).
    // Throws Error(Tokenizer) when a character has neither a piece, byte
    // tokens nor an unknown token.
    void encode(std::string_view text, const TokenIndex& index, int32_t unk, std::vector<int32_t>& out,
                Scratch& scratch) const;

    int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }
    // Whether encode() may work word by word (see spm.cpp).
    bool splits_words() const { return split_words_; }

private:
    void encode_segment(std::string_view text, const TokenIndex& index, int32_t unk, std::vector<int32_t>& out,
                        Scratch& scratch) const;

    std::vector<float> scores_;
    std::vector<uint8_t> mergeable_;
    std::array<int32_t, 256> byte_tokens_{};
    bool split_words_ = false;
};

}  // namespace lantern::tok
