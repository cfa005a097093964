#include "backends/weight_store.h"

#include <map>

namespace lantern {

void WeightStore::request(const Tensor* w, const void* host, Backend* backend) {
    if (replica(w, backend) != nullptr) return;
    auto t = std::make_unique<Tensor>(*w);
    t->buffer = nullptr;
    t->offset = 0;
    index_[w].push_back(replicas_.size());
    replicas_.push_back(Replica{w, host, backend, std::move(t)});
}

void WeightStore::upload(const Progress& progress) {
    // One buffer per backend, laid out in request order.
    std::map<Backend*, size_t> sizes;
    size_t total = 0;
    for (Replica& r : replicas_) {
        if (r.tensor->buffer != nullptr) continue;
        const size_t align = r.backend->alignment();
        size_t& end = sizes[r.backend];
        end = (end + align - 1) / align * align;
        r.tensor->offset = end;
        const size_t bytes = r.backend->weight_bytes(*r.tensor);
        end += bytes;
        total += bytes;
    }
    std::map<Backend*, Buffer*> buffer_of;
    for (auto& [backend, size] : sizes) {
        buffers_.push_back(backend->alloc(size, BufferKind::Weights));
        buffer_of[backend] = buffers_.back().get();
    }
    size_t done = 0;
    for (Replica& r : replicas_) {
        if (r.tensor->buffer != nullptr) continue;
        r.tensor->buffer = buffer_of[r.backend];
        r.backend->upload_weight(*r.tensor, r.host);
        done += r.backend->weight_bytes(*r.tensor);
        if (progress) progress(done, total);
    }
    for (auto& [backend, buffer] : buffer_of) backend->synchronize();
}

Tensor* WeightStore::replica(const Tensor* w, const Backend* backend) const {
    auto it = index_.find(w);
    if (it == index_.end()) return nullptr;
    for (size_t i : it->second) {
        if (replicas_[i].backend == backend) return replicas_[i].tensor.get();
    }
    return nullptr;
}

size_t WeightStore::bytes_on(const Backend* backend) const {
    size_t n = 0;
    for (const Replica& r : replicas_) {
        if (r.backend == backend) n += r.backend->weight_bytes(*r.tensor);
    }
    return n;
}

}  // namespace lantern
