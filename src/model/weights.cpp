#include "model/weights.h"

#include "backends/backend.h"
#include "gguf/gguf.h"
#include "lantern/error.h"

namespace lantern {
namespace {

std::string shape_str(const std::array<int64_t, kMaxDims>& ne) {
    std::string s = "[";
    int last = kMaxDims - 1;
    while (last > 0 && ne[static_cast<size_t>(last)] == 1) --last;
    for (int d = 0; d <= last; ++d) {
        if (d > 0) s += ", ";
        s += std::to_string(ne[static_cast<size_t>(d)]);
    }
    return s + "]";
}

}  // namespace

WeightTable::WeightTable(const gguf::File& file, Buffer& mapping) : WeightTable({{&file, &mapping}}) {}

WeightTable::WeightTable(const std::vector<std::pair<const gguf::File*, Buffer*>>& parts) : file_(*parts.at(0).first) {
    for (const auto& [file, mapping] : parts) {
        for (const gguf::TensorInfo& info : file->tensors()) {
            Tensor& t = tensors_.emplace_back();
            t.type = info.type;
            for (size_t d = 0; d < info.shape.size(); ++d) t.ne[d] = info.shape[d];
            t.set_contiguous_strides();
            t.buffer = mapping;
            t.offset = static_cast<size_t>(info.data - file->base());
            t.flags = kTensorWeight;
            t.name = info.name.c_str();
            if (!by_name_.emplace(info.name, &t).second) {
                throw Error(ErrorCode::Format, file->path() + ": tensor '" + info.name + "' is in two parts of the model");
            }
        }
    }
}

Tensor* WeightTable::find(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

Tensor* WeightTable::optional(const std::string& name, std::initializer_list<int64_t> shape) const {
    Tensor* t = find(name);
    if (t == nullptr) return nullptr;
    std::array<int64_t, kMaxDims> want{1, 1, 1, 1};
    size_t d = 0;
    for (int64_t n : shape) want[d++] = n;
    if (t->ne != want) {
        throw Error(ErrorCode::Format, file_.path() + ": tensor '" + name + "' has shape " + shape_str(t->ne) +
                                           ", expected " + shape_str(want));
    }
    return t;
}

Tensor* WeightTable::require(const std::string& name, std::initializer_list<int64_t> shape) const {
    Tensor* t = optional(name, shape);
    if (t == nullptr) throw Error(ErrorCode::Format, file_.path() + ": missing tensor '" + name + "'");
    return t;
}

const void* WeightTable::host_data(const Tensor* t) const {
    return static_cast<const uint8_t*>(t->buffer->base()) + t->offset;
}

size_t WeightTable::realign(Backend& host) {
    std::vector<Tensor*> moved;
    size_t bytes = 0;
    for (Tensor& t : tensors_) {
        if (reinterpret_cast<uintptr_t>(host_data(&t)) % kAlignment == 0) continue;
        moved.push_back(&t);
        bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment + t.nbytes();
    }
    if (moved.empty()) return 0;
    realigned_ = host.alloc(bytes, BufferKind::Weights);
    size_t offset = 0;
    for (Tensor* t : moved) {
        offset = (offset + kAlignment - 1) / kAlignment * kAlignment;
        realigned_->write(offset, host_data(t), t->nbytes());
        t->buffer = realigned_.get();
        t->offset = offset;
        offset += t->nbytes();
    }
    return bytes;
}

ModelWeights bind_common_weights(const WeightTable& w, const HParams& hp) {
    ModelWeights m;
    const int64_t e = hp.n_embd;
    m.tok_embd = w.require("token_embd.weight", {e, hp.n_vocab});
    m.output_norm = w.require("output_norm.weight", {e});
    m.output = w.optional("output.weight", {e, hp.n_vocab});
    if (m.output == nullptr) m.output = m.tok_embd;  // tied embeddings
    m.rope_freqs = w.optional("rope_freqs.weight", {hp.n_rot / 2});
    m.layers.resize(static_cast<size_t>(hp.n_layer));
    return m;
}

}  // namespace lantern
