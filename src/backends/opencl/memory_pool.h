// Device memory of the OpenCL backend: a pool of cl_mem blocks in size
// classes, reused instead of returned to the driver.
//
// Requests round up to a class: multiples of 4 KiB up to 64 KiB, then four
// classes per power of two (at most 25% over the request). A released block
// waits in its class's free list and serves the next request of that class;
// when the driver refuses an allocation, the free lists are emptied and the
// allocation tried once more. Exact-size blocks (weights: uploaded once,
// never released until the model goes) skip the classes.
//
// Reuse right after release is safe because the backend has one in-order
// queue: anything enqueued later runs after every use of the old owner.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <vector>

#include "backends/opencl/cl_api.h"

namespace lantern::ocl {

class MemoryPool;

// A block from the pool; returns itself on destruction.
class PoolBlock {
public:
    PoolBlock(MemoryPool& pool, cl_mem mem, size_t size, size_t requested, bool exact)
        : pool_(pool), mem_(mem), size_(size), requested_(requested), exact_(exact) {}
    ~PoolBlock();
    PoolBlock(const PoolBlock&) = delete;
    PoolBlock& operator=(const PoolBlock&) = delete;

    cl_mem mem() const { return mem_; }
    size_t size() const { return size_; }  // the class size (>= requested)

private:
    MemoryPool& pool_;
    cl_mem mem_;
    size_t size_;
    size_t requested_;
    bool exact_;
};

class MemoryPool {
public:
    MemoryPool(cl_context context, size_t max_alloc) : context_(context), max_alloc_(max_alloc) {}
    ~MemoryPool();
    MemoryPool(const MemoryPool&) = delete;
    MemoryPool& operator=(const MemoryPool&) = delete;

    // A block of at least `bytes` (exactly `bytes` when `exact`). Throws
    // Error(OutOfMemory) when the device has no room.
    std::unique_ptr<PoolBlock> acquire(size_t bytes, bool exact);
    // Releases the cached free blocks to the driver.
    void trim();

    static size_t size_class(size_t bytes);

    size_t in_use() const { return in_use_; }      // bytes requested by live blocks
    size_t peak() const { return peak_; }          // highest in_use so far
    size_t reserved() const { return reserved_; }  // bytes held from the driver (live + cached)
    size_t reuses() const { return reuses_; }      // requests served from a free list

private:
    friend class PoolBlock;
    void release(cl_mem mem, size_t size, size_t requested, bool exact);
    cl_mem create(size_t bytes);

    cl_context context_;
    size_t max_alloc_;
    std::map<size_t, std::vector<cl_mem>> free_;  // class size -> cached blocks
    size_t in_use_ = 0;
    size_t peak_ = 0;
    size_t reserved_ = 0;
    size_t reuses_ = 0;
};

}  // namespace lantern::ocl
