// Offsets for the intermediates of a step within one compute buffer.
//
// Each request is an interval of node indices [first, last] during which the
// bytes must stay intact; requests are placed first-fit in address order,
// reusing space whose interval has ended. The same sequence of requests
// always yields the same offsets, so a repeated step sees the same addresses
// (which is what lets a recorded GPU graph replay).
#pragma once

#include <cstddef>
#include <vector>

namespace lantern {

class IntervalAllocator {
public:
    explicit IntervalAllocator(size_t alignment) : alignment_(alignment) {}

    // Registers a request; returns its handle. Intervals are node indices.
    size_t request(size_t bytes, int first, int last);
    // Places every request; afterwards offset(h) and total() are valid.
    void place();
    size_t offset(size_t handle) const { return items_[handle].offset; }
    // Bytes the buffer must have.
    size_t total() const { return total_; }

private:
    struct Item {
        size_t bytes;
        int first;
        int last;
        size_t offset = 0;
    };
    size_t alignment_;
    std::vector<Item> items_;
    size_t total_ = 0;
};

}  // namespace lantern
