#include "backends/opencl/memory_pool.h"

#include <algorithm>

#include "lantern/error.h"

namespace lantern::ocl {

PoolBlock::~PoolBlock() { pool_.release(mem_, size_, requested_, exact_); }

MemoryPool::~MemoryPool() { trim(); }

size_t MemoryPool::size_class(size_t bytes) {
    constexpr size_t kSmall = 64 << 10;
    constexpr size_t kPage = 4 << 10;
    if (bytes == 0) return kPage;
    if (bytes <= kSmall) return (bytes + kPage - 1) / kPage * kPage;
    size_t p = kSmall;
    while (p * 2 <= bytes) p *= 2;
    const size_t step = p / 4;
    return (bytes + step - 1) / step * step;
}

cl_mem MemoryPool::create(size_t bytes) {
    if (bytes > max_alloc_ && max_alloc_ > 0) {
        throw Error(ErrorCode::OutOfMemory, "opencl: a buffer of " + std::to_string(bytes >> 20) +
                                                " MiB exceeds the device's largest allocation (" +
                                                std::to_string(max_alloc_ >> 20) + " MiB)");
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
        cl_int err = CL_SUCCESS;
        cl_mem m = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
        if (err == CL_SUCCESS) {
            reserved_ += bytes;
            return m;
        }
        if (attempt == 0 && (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES)) {
            trim();
            continue;
        }
        fail(err, ("clCreateBuffer of " + std::to_string(bytes) + " bytes").c_str());
    }
    return nullptr;
}

std::unique_ptr<PoolBlock> MemoryPool::acquire(size_t bytes, bool exact) {
    const size_t size = exact ? std::max<size_t>(bytes, 1) : size_class(bytes);
    cl_mem mem = nullptr;
    if (!exact) {
        auto it = free_.find(size);
        if (it != free_.end() && !it->second.empty()) {
            mem = it->second.back();
            it->second.pop_back();
            ++reuses_;
        }
    }
    if (mem == nullptr) mem = create(size);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return std::make_unique<PoolBlock>(*this, mem, size, bytes, exact);
}

void MemoryPool::release(cl_mem mem, size_t size, size_t requested, bool exact) {
    in_use_ -= requested;
    if (exact) {
        clReleaseMemObject(mem);
        reserved_ -= size;
        return;
    }
    free_[size].push_back(mem);
}

void MemoryPool::trim() {
    for (auto& [size, list] : free_) {
        for (cl_mem m : list) {
            clReleaseMemObject(m);
            reserved_ -= size;
        }
        list.clear();
    }
    free_.clear();
}

}  // namespace lantern::ocl
