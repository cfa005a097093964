// Byte-level BPE (GPT-2 style): merge ranks and the merge loop for one
// pre-tokenized piece.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"

namespace lantern::tok {

class BpeModel {
public:
    // `merges` are "left right" in rank order. A merge whose parts or result
    // are not tokens can never apply and is counted in skipped_merges().
    // Throws Error(Tokenizer) for a merge without a separating space.
    BpeModel(const std::vector<std::string>& merges, const TokenIndex& index);

    struct Scratch {
        std::vector<int32_t> ids;  // [symbols] token id; -1 unknown byte, -2 merged away
        std::vector<int32_t> prev, next;
        struct Candidate {
            int32_t rank;
            uint32_t left;
            int32_t left_id, right_id;
        };
        std::vector<Candidate> heap;
        std::string mapped;
    };

    // Appends the ids of one piece of raw text. With ignore_merges, a piece
    // that is itself a token is emitted whole. A byte the vocabulary cannot
    // spell (vocabularies trained on UTF-8 text may lack the bytes that never
    // occur in it) becomes `unk`, or is dropped when unk < 0.
    void encode_piece(std::string_view bytes, const TokenIndex& index, bool ignore_merges,
                      int32_t unk, std::vector<int32_t>& out, Scratch& scratch) const;

    int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }
    size_t merge_count() const { return size_; }
    size_t skipped_merges() const { return skipped_; }

private:
    struct Slot {
        uint64_t key;  // left id << 32 | right id; kEmpty when free
        int32_t rank;
        int32_t result;
    };
    static constexpr uint64_t kEmpty = ~0ull;
    static uint64_t key(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    }
    const Slot* find(int32_t left, int32_t right) const;
    void insert(int32_t left, int32_t right, int32_t rank, int32_t result);

    std::vector<Slot> slots_;  // open addressing, power-of-two size
    size_t size_ = 0;
    size_t skipped_ = 0;
    std::array<int32_t, 256> byte_tokens_{};
};

}  // namespace lantern::tok
