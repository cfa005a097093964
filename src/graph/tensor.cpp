#include "graph/tensor.h"

namespace lantern {

size_t Tensor::nbytes() const {
    if (n_elements() == 0) return 0;
    // First row's bytes plus the offset of the last row.
    size_t bytes = row_bytes();
    for (int d = 1; d < kMaxDims; ++d) bytes += static_cast<size_t>(ne[d] - 1) * nb[d];
    return bytes;
}

bool Tensor::is_contiguous() const {
    const DTypeTraits& tr = dtype_traits(type);
    if (nb[0] != tr.type_size) return false;
    size_t expect = dtype_row_size(type, ne[0]);
    for (int d = 1; d < kMaxDims; ++d) {
        if (ne[d] != 1 && nb[d] != expect) return false;
        expect *= static_cast<size_t>(ne[d]);
    }
    return true;
}

const Tensor* Tensor::storage_root() const {
    const Tensor* t = this;
    while (t->view_src != nullptr) t = t->view_src;
    return t;
}

void Tensor::set_contiguous_strides() {
    nb[0] = dtype_type_size(type);
    nb[1] = dtype_row_size(type, ne[0]);
    for (int d = 2; d < kMaxDims; ++d) nb[d] = nb[d - 1] * static_cast<size_t>(ne[d - 1]);
}

}  // namespace lantern
