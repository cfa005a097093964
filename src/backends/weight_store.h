// Copies of model weights on device backends, uploaded once.
//
// The model's weights are leaves whose bytes live in the memory-mapped GGUF
// file; host backends read them there. A device backend gets a replica per
// weight it runs ops on: same type and shape, its own buffer (and possibly
// its own layout, see Backend::upload_weight).
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"

namespace lantern {

class WeightStore {
public:
    using Progress = std::function<void(size_t done_bytes, size_t total_bytes)>;

    // Asks for a replica of weight `w` (host bytes at `host`) on `backend`.
    void request(const Tensor* w, const void* host, Backend* backend);
    // Allocates one weight buffer per backend and uploads every request.
    void upload(const Progress& progress);

    // The replica of `w` on `backend`, or null.
    Tensor* replica(const Tensor* w, const Backend* backend) const;
    size_t bytes_on(const Backend* backend) const;

private:
    struct Replica {
        const Tensor* source;
        const void* host;
        Backend* backend;
        std::unique_ptr<Tensor> tensor;
    };
    std::vector<Replica> replicas_;
    std::unordered_map<const Tensor*, std::vector<size_t>> index_;
    std::vector<std::unique_ptr<Buffer>> buffers_;
};

}  // namespace lantern
