#include "backends/allocator.h"

#include <algorithm>
#include <map>

namespace lantern {

size_t IntervalAllocator::request(size_t bytes, int first, int last) {
    const size_t aligned = (std::max<size_t>(bytes, 1) + alignment_ - 1) / alignment_ * alignment_;
    items_.push_back(Item{aligned, first, std::max(first, last)});
    return items_.size() - 1;
}

void IntervalAllocator::place() {
    // Sweep in order of first use; free blocks whose last use has passed.
    std::vector<size_t> order(items_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return items_[a].first < items_[b].first; });

    std::map<size_t, size_t> free_blocks;  // offset -> size, coalesced
    std::vector<size_t> live;              // handles currently placed
    size_t end = 0;                        // high-water mark

    auto release = [&](size_t off, size_t size) {
        auto it = free_blocks.emplace(off, size).first;
        auto next = std::next(it);
        if (next != free_blocks.end() && it->first + it->second == next->first) {
            it->second += next->second;
            free_blocks.erase(next);
        }
        if (it != free_blocks.begin()) {
            auto prev = std::prev(it);
            if (prev->first + prev->second == it->first) {
                prev->second += it->second;
                free_blocks.erase(it);
            }
        }
    };

    total_ = 0;
    for (size_t h : order) {
        Item& item = items_[h];
        // Free what ended before this one starts.
        for (size_t i = 0; i < live.size();) {
            const Item& l = items_[live[i]];
            if (l.last < item.first) {
                release(l.offset, l.bytes);
                live[i] = live.back();
                live.pop_back();
            } else {
                ++i;
            }
        }
        // Collapse a free tail into the high-water mark so it can grow.
        if (!free_blocks.empty()) {
            auto last = std::prev(free_blocks.end());
            if (last->first + last->second == end) {
                end = last->first;
                free_blocks.erase(last);
            }
        }
        bool placed = false;
        for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it) {
            if (it->second >= item.bytes) {
                item.offset = it->first;
                const size_t rest = it->second - item.bytes;
                const size_t rest_off = it->first + item.bytes;
                free_blocks.erase(it);
                if (rest > 0) free_blocks.emplace(rest_off, rest);
                placed = true;
                break;
            }
        }
        if (!placed) {
            item.offset = end;
            end += item.bytes;
        }
        total_ = std::max(total_, item.offset + item.bytes);
        live.push_back(h);
    }
}

}  // namespace lantern
