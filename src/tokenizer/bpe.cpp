#include "tokenizer/bpe.h"

#include <algorithm>

#include "lantern/error.h"
#include "tokenizer/byte_level.h"

namespace lantern::tok {
namespace {

size_t hash_key(uint64_t k) { return static_cast<size_t>((k * 0x9E3779B97F4A7C15ull) >> 20); }

// Min-heap order on (rank, left position): the lowest rank merges first and
// equal ranks merge leftmost first.
bool later(const BpeModel::Scratch::Candidate& a, const BpeModel::Scratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
}

}  // namespace

BpeModel::BpeModel(const std::vector<std::string>& merges, const TokenIndex& index) {
    for (unsigned b = 0; b < 256; ++b) {
        std::string ch;
        append_byte_chars(ch, std::string_view(reinterpret_cast<const char*>(&b), 1));
        byte_tokens_[b] = index.find(ch);
    }
    size_t capacity = 16;
    while (capacity < merges.size() * 2) capacity *= 2;
    slots_.assign(capacity, Slot{kEmpty, 0, 0});

    std::string joined;
    for (size_t i = 0; i < merges.size(); ++i) {
        const std::string& m = merges[i];
        // The separator is the first space not at the start (a part is never empty).
        const size_t space = m.find(' ', 1);
        if (space == std::string::npos || space + 1 >= m.size()) {
            throw Error(ErrorCode::Tokenizer, "tokenizer.ggml.merges[" + std::to_string(i) + "] = '" + m +
                                                  "' is not two tokens separated by a space");
        }
        const std::string_view left(m.data(), space);
        const std::string_view right(m.data() + space + 1, m.size() - space - 1);
        joined.assign(left);
        joined.append(right);
        const int32_t l = index.find(left), r = index.find(right), result = index.find(joined);
        if (l < 0 || r < 0 || result < 0) {
            ++skipped_;
            continue;
        }
        if (!find(l, r)) insert(l, r, static_cast<int32_t>(i), result);
    }
}

const BpeModel::Slot* BpeModel::find(int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return nullptr;
    const uint64_t k = key(left, right);
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash_key(k) & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (s.key == k) return &s;
        if (s.key == kEmpty) return nullptr;
    }
}

void BpeModel::insert(int32_t left, int32_t right, int32_t rank, int32_t result) {
    const uint64_t k = key(left, right);
    const size_t mask = slots_.size() - 1;
    size_t i = hash_key(k) & mask;
    while (slots_[i].key != kEmpty) i = (i + 1) & mask;
    slots_[i] = Slot{k, rank, result};
    ++size_;
}

void BpeModel::encode_piece(std::string_view bytes, const TokenIndex& index, bool ignore_merges,
                            int32_t unk, std::vector<int32_t>& out, Scratch& s) const {
    if (bytes.empty()) return;
    if (ignore_merges) {
        s.mapped.clear();
        append_byte_chars(s.mapped, bytes);
        const int32_t whole = index.find(s.mapped);
        if (whole >= 0) {
            out.push_back(whole);
            return;
        }
    }
    const size_t n = bytes.size();
    s.ids.resize(n);
    s.prev.resize(n);
    s.next.resize(n);
    for (size_t i = 0; i < n; ++i) {
        s.ids[i] = byte_tokens_[static_cast<uint8_t>(bytes[i])];
        s.prev[i] = static_cast<int32_t>(i) - 1;
        s.next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    }
    s.heap.clear();
    auto consider = [&](int32_t left) {
        if (left < 0 || s.next[left] < 0) return;
        const int32_t lid = s.ids[left], rid = s.ids[s.next[left]];
        if (const Slot* m = find(lid, rid)) {
            s.heap.push_back({m->rank, static_cast<uint32_t>(left), lid, rid});
            std::push_heap(s.heap.begin(), s.heap.end(), later);
        }
    };
    for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));

    while (!s.heap.empty()) {
        std::pop_heap(s.heap.begin(), s.heap.end(), later);
        const Scratch::Candidate c = s.heap.back();
        s.heap.pop_back();
        const auto left = static_cast<int32_t>(c.left);
        const int32_t right = s.next[left];
        // Stale: a side has merged since (a symbol's id only ever changes by growing).
        if (s.ids[left] != c.left_id || right < 0 || s.ids[right] != c.right_id) continue;
        s.ids[left] = find(c.left_id, c.right_id)->result;
        s.ids[right] = -2;
        s.next[left] = s.next[right];
        if (s.next[left] >= 0) s.prev[s.next[left]] = left;
        consider(s.prev[left]);
        consider(left);
    }

    for (int32_t i = 0; i >= 0; i = s.next[i]) {
        const int32_t id = s.ids[i] >= 0 ? s.ids[i] : unk;
        if (id >= 0) out.push_back(id);
    }
}

}  // namespace lantern::tok
