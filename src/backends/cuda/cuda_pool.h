// The device memory pool: every device allocation of the CUDA backend
// (weights, KV cache, compute buffers, scratch) comes from here.
//
// Requests are rounded to a size class (powers of two up to 1 MiB, then
// multiples of 2 MiB); a released block goes to a free list and serves the
// next request of its class without a cudaMalloc. When the driver is out of
// memory the free lists are returned to it and the allocation is retried.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

namespace lantern::cuda {

class DevicePool {
public:
    struct Block {
        void* ptr = nullptr;
        size_t size = 0;  // the size class actually held
    };

    explicit DevicePool(int device) : device_(device) {}
    ~DevicePool();
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;

    // Throws Error(OutOfMemory) when the device has no room.
    Block allocate(size_t bytes);
    void release(Block b);
    // Returns every free block to the driver.
    void trim();

    size_t in_use() const;    // bytes in blocks handed out
    size_t peak() const;      // most bytes ever in use at once
    size_t reserved() const;  // bytes held from the driver (in use + free lists)

    static size_t size_class(size_t bytes);

private:
    void trim_locked();

    int device_;
    mutable std::mutex mu_;
    std::multimap<size_t, void*> free_;  // size class -> block
    size_t in_use_ = 0;
    size_t peak_ = 0;
    size_t reserved_ = 0;
};

}  // namespace lantern::cuda
