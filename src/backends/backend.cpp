#include "backends/backend.h"

#include <cstring>

namespace lantern {

Buffer::Buffer(Backend& backend, size_t size, void* base)
    : backend_(backend), size_(size), base_(base), uid_(backend.next_buffer_uid_++) {}

void Backend::upload_weight(const Tensor& w, const void* host) { w.buffer->write(w.offset, host, w.nbytes()); }

void Backend::set_tensor_async(const Tensor& t, const void* data, size_t offset, size_t n) {
    t.buffer->write(t.offset + offset, data, n);
}

void Backend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t n) {
    t.buffer->read(t.offset + offset, data, n);
}

}  // namespace lantern
