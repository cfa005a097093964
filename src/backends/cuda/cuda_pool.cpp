#include "backends/cuda/cuda_pool.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "lantern/error.h"

namespace lantern::cuda {

size_t DevicePool::size_class(size_t bytes) {
    constexpr size_t kSmall = size_t{1} << 20;
    constexpr size_t kLargeStep = size_t{2} << 20;
    if (bytes <= 512) return 512;
    if (bytes <= kSmall) {
        size_t c = 512;
        while (c < bytes) c <<= 1;
        return c;
    }
    return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

DevicePool::~DevicePool() {
    std::lock_guard<std::mutex> lock(mu_);
    trim_locked();
}

DevicePool::Block DevicePool::allocate(size_t bytes) {
    const size_t cls = size_class(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    // Exact class, or for large blocks one at most 1/8 larger.
    auto it = free_.lower_bound(cls);
    if (it != free_.end() && it->first <= cls + (cls >= (size_t{1} << 20) ? cls / 8 : 0)) {
        Block b{it->second, it->first};
        free_.erase(it);
        in_use_ += b.size;
        peak_ = std::max(peak_, in_use_);
        return b;
    }
    cudaSetDevice(device_);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, cls);
    if (err == cudaErrorMemoryAllocation && !free_.empty()) {
        cudaGetLastError();  // clear the sticky-free error before retrying
        trim_locked();
        err = cudaMalloc(&p, cls);
    }
    if (err != cudaSuccess) {
        cudaGetLastError();
        size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        throw Error(err == cudaErrorMemoryAllocation ? ErrorCode::OutOfMemory : ErrorCode::Backend,
                    "cuda: cudaMalloc of " + std::to_string(cls) + " bytes failed: " + cudaGetErrorString(err) +
                        " (pool: " + std::to_string(in_use_ >> 20) + " MiB in use; device: " +
                        std::to_string(free_bytes >> 20) + " of " + std::to_string(total >> 20) + " MiB free)");
    }
    reserved_ += cls;
    in_use_ += cls;
    peak_ = std::max(peak_, in_use_);
    return Block{p, cls};
}

void DevicePool::release(Block b) {
    if (b.ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= b.size;
    free_.emplace(b.size, b.ptr);
}

void DevicePool::trim() {
    std::lock_guard<std::mutex> lock(mu_);
    trim_locked();
}

void DevicePool::trim_locked() {
    if (free_.empty()) return;
    cudaSetDevice(device_);
    // Blocks may still be read by queued work.
    cudaDeviceSynchronize();
    for (auto& [size, p] : free_) {
        cudaFree(p);
        reserved_ -= size;
    }
    free_.clear();
}

size_t DevicePool::in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_;
}
size_t DevicePool::peak() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
}
size_t DevicePool::reserved() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reserved_;
}

}  // namespace lantern::cuda
