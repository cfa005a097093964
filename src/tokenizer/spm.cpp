#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "lantern/error.h"
#include "tokenizer/unicode.h"

namespace lantern::tok {
namespace {

constexpr std::string_view kEscape = "\xE2\x96\x81";  // "▁"

// Whether `piece` has a "▁" right after some other character ("a▁").
bool has_inner_word_start(std::string_view piece) {
    for (size_t at = piece.find(kEscape, 1); at != std::string_view::npos; at = piece.find(kEscape, at + 1)) {
        if (at < kEscape.size() || piece.compare(at - kEscape.size(), kEscape.size(), kEscape) != 0) return true;
    }
    return false;
}

// Max-heap order on (score, -left): the best score first, ties leftmost.
bool worse(const SpmModel::Scratch::Candidate& a, const SpmModel::Scratch::Candidate& b) {
    return a.score != b.score ? a.score < b.score : a.left > b.left;
}

}  // namespace

SpmModel::SpmModel(const std::vector<std::string>& tokens, std::vector<float> scores,
                   std::vector<uint8_t> mergeable, const TokenIndex& index)
    : scores_(std::move(scores)), mergeable_(std::move(mergeable)) {
    for (unsigned b = 0; b < 256; ++b) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        byte_tokens_[b] = index.find(name);
    }
    // When no piece the encoder may produce joins a character to a following
    // "▁", no merge can cross a word start, and merges in different words
    // never interact: encoding word by word gives the same ids as encoding
    // the whole text, with small heaps instead of one the size of the text.
    split_words_ = true;
    for (size_t i = 0; i < tokens.size() && split_words_; ++i) {
        if (mergeable_[i] && has_inner_word_start(tokens[i])) split_words_ = false;
    }
}

void SpmModel::encode(std::string_view text, const TokenIndex& index, int32_t unk,
                      std::vector<int32_t>& out, Scratch& s) const {
    if (!split_words_) {
        encode_segment(text, index, unk, out, s);
        return;
    }
    size_t begin = 0;
    for (size_t at = text.find(kEscape, 1); at != std::string_view::npos; at = text.find(kEscape, at + 1)) {
        if (at >= kEscape.size() && text.compare(at - kEscape.size(), kEscape.size(), kEscape) == 0) continue;
        encode_segment(text.substr(begin, at - begin), index, unk, out, s);
        begin = at;
    }
    encode_segment(text.substr(begin), index, unk, out, s);
}

void SpmModel::encode_segment(std::string_view text, const TokenIndex& index, int32_t unk,
                              std::vector<int32_t>& out, Scratch& s) const {
    if (text.empty()) return;
    s.start.clear();
    s.len.clear();
    for (size_t pos = 0; pos < text.size();) {
        uint32_t cp = 0;
        const size_t len = unicode::decode_utf8(text, pos, cp);  // 1 for a byte of invalid UTF-8
        s.start.push_back(static_cast<uint32_t>(pos));
        s.len.push_back(static_cast<uint32_t>(len));
        pos += len;
    }
    const size_t n = s.start.size();
    s.prev.resize(n);
    s.next.resize(n);
    for (size_t i = 0; i < n; ++i) {
        s.prev[i] = static_cast<int32_t>(i) - 1;
        s.next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    }

    auto piece_id = [&](uint32_t start, uint32_t len) {
        const int32_t id = index.find(text.substr(start, len));
        return id >= 0 && mergeable_[id] ? id : -1;
    };
    s.heap.clear();
    auto consider = [&](int32_t left) {
        if (left < 0 || s.next[left] < 0) return;
        const uint32_t size = s.len[left] + s.len[s.next[left]];
        const int32_t id = piece_id(s.start[left], size);
        if (id < 0) return;
        s.heap.push_back({scores_.empty() ? 0.0f : scores_[id], static_cast<uint32_t>(left), size});
        std::push_heap(s.heap.begin(), s.heap.end(), worse);
    };
    for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));

    while (!s.heap.empty()) {
        std::pop_heap(s.heap.begin(), s.heap.end(), worse);
        const Scratch::Candidate c = s.heap.back();
        s.heap.pop_back();
        const auto left = static_cast<int32_t>(c.left);
        const int32_t right = s.next[left];
        // Stale: either side has grown since (lengths only ever grow).
        if (s.len[left] == 0 || right < 0 || s.len[left] + s.len[right] != c.size) continue;
        s.len[left] = c.size;
        s.len[right] = 0;
        s.next[left] = s.next[right];
        if (s.next[left] >= 0) s.prev[s.next[left]] = left;
        consider(s.prev[left]);
        consider(left);
    }

    for (int32_t i = 0; i >= 0; i = s.next[i]) {
        const int32_t id = piece_id(s.start[i], s.len[i]);
        if (id >= 0) {
            out.push_back(id);
            continue;
        }
        // Only single characters can be left without a piece.
        bool spelled = true;
        for (uint32_t k = 0; k < s.len[i]; ++k) {
            if (byte_tokens_[static_cast<uint8_t>(text[s.start[i] + k])] < 0) spelled = false;
        }
        if (spelled) {
            for (uint32_t k = 0; k < s.len[i]; ++k) {
                out.push_back(byte_tokens_[static_cast<uint8_t>(text[s.start[i] + k])]);
            }
        } else if (unk >= 0) {
            out.push_back(unk);
        } else {
            throw Error(ErrorCode::Tokenizer, "character '" + std::string(text.substr(s.start[i], s.len[i])) +
                                                  "' has no piece, byte token or unknown token");
        }
    }
}

}  // namespace lantern::tok
