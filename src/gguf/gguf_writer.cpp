// GGUF writer: checks what it is given, lays tensors out aligned, streams.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <limits>

#include "gguf/gguf.h"
#include "lantern/error.h"

namespace lantern::gguf {
namespace {

// llama.cpp keeps tensor names in a 64-byte buffer (terminator included).
constexpr size_t kMaxTensorName = 63;

[[noreturn]] void invalid(const std::string& what) {
    throw Error(ErrorCode::InvalidArgument, "gguf writer: " + what);
}

void check_array(const Array& a, const std::string& key) {
    const auto t = static_cast<uint32_t>(a.elem_type);
    if (t > static_cast<uint32_t>(ValueType::F64)) {
        invalid("'" + key + "': array element type " + std::to_string(t) + " is not a GGUF type");
    }
    const bool strings = a.elem_type == ValueType::STRING;
    const bool arrays = a.elem_type == ValueType::ARRAY;
    if ((!strings && !a.strings.empty()) || (!arrays && !a.arrays.empty()) ||
        ((strings || arrays) && !a.raw.empty())) {
        invalid("'" + key + "': array of " + value_type_name(a.elem_type) +
                " holds elements in storage of another type");
    }
    const size_t es = value_type_size(a.elem_type);
    if (es != 0 && a.raw.size() % es != 0) {
        invalid("'" + key + "': array of " + value_type_name(a.elem_type) + " has " +
                std::to_string(a.raw.size()) + " raw bytes, not a multiple of " + std::to_string(es));
    }
    for (const Array& inner : a.arrays) check_array(inner, key);
}

// Appends little-endian encodings to a byte vector.
class Bytes {
public:
    template <typename T>
    void put(T v) {
        const size_t at = out_.size();
        out_.resize(at + sizeof(T));
        std::memcpy(out_.data() + at, &v, sizeof(T));
    }
    void put_bytes(const uint8_t* p, size_t n) {
        if (n == 0) return;
        const size_t at = out_.size();
        out_.resize(at + n);
        std::memcpy(out_.data() + at, p, n);
    }
    void put_string(const std::string& s) {
        put<uint64_t>(s.size());
        put_bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
    void put_array(const Array& a) {
        put<uint32_t>(static_cast<uint32_t>(a.elem_type));
        put<uint64_t>(a.size());
        if (a.elem_type == ValueType::STRING) {
            for (const std::string& s : a.strings) put_string(s);
        } else if (a.elem_type == ValueType::ARRAY) {
            for (const Array& inner : a.arrays) put_array(inner);
        } else {
            put_bytes(a.raw.data(), a.raw.size());
        }
    }
    void put_value(const Value& v) {
        std::visit(
            [&](const auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, std::string>) put_string(x);
                else if constexpr (std::is_same_v<T, Array>) put_array(x);
                else if constexpr (std::is_same_v<T, bool>) put<uint8_t>(x ? 1 : 0);
                else put<T>(x);
            },
            v);
    }
    void pad_to(size_t alignment) { out_.resize((out_.size() + alignment - 1) / alignment * alignment); }
    std::vector<uint8_t>& vec() { return out_; }

private:
    std::vector<uint8_t> out_;
};

size_t padded(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

}  // namespace

void Writer::set_version(uint32_t v) {
    if (v != 2 && v != 3) invalid("version " + std::to_string(v) + " cannot be written (2 or 3)");
    version_ = v;
}

void Writer::set_alignment(size_t a) {
    if (a == 0 || !std::has_single_bit(a) || a > std::numeric_limits<uint32_t>::max()) {
        invalid("alignment " + std::to_string(a) + " is not a nonzero power of two that fits u32");
    }
    alignment_ = a;
    set("general.alignment", static_cast<uint32_t>(a));
}

void Writer::set(std::string key, Value value) {
    if (key.empty()) invalid("empty metadata key");
    if (const Array* a = std::get_if<Array>(&value)) check_array(*a, key);
    if (key == "general.alignment") {
        const uint32_t* a = std::get_if<uint32_t>(&value);
        if (a == nullptr) {
            invalid(std::string("'general.alignment' must be a u32, not a ") +
                    value_type_name(value_type(value)));
        }
        if (*a == 0 || !std::has_single_bit(*a)) {
            invalid("alignment " + std::to_string(*a) + " is not a nonzero power of two");
        }
        alignment_ = *a;
    }
    for (auto& kv : kv_) {
        if (kv.first == key) {
            kv.second = std::move(value);
            return;
        }
    }
    kv_.emplace_back(std::move(key), std::move(value));
}

void Writer::add_tensor(std::string name, DType type, std::vector<int64_t> shape, const void* data,
                        size_t nbytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    if (p == nullptr && nbytes != 0) invalid("tensor '" + name + "': null data");
    add_tensor_impl(std::move(name), type, std::move(shape), nbytes,
                    std::vector<uint8_t>(p, p + nbytes), nullptr);
}

void Writer::add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                        TensorSource source) {
    if (!source) invalid("tensor '" + name + "': empty source");
    add_tensor_impl(std::move(name), type, std::move(shape), std::numeric_limits<size_t>::max(), {},
                    std::move(source));
}

// nbytes is SIZE_MAX for a streamed tensor (its size follows from the shape).
void Writer::add_tensor_impl(std::string name, DType type, std::vector<int64_t> shape,
                             size_t nbytes, std::vector<uint8_t> data, TensorSource source) {
    const std::string what = "tensor '" + name + "'";
    if (name.empty()) invalid("empty tensor name");
    if (name.size() > kMaxTensorName) {
        invalid(what + ": name longer than " + std::to_string(kMaxTensorName) +
                " bytes (llama.cpp cannot load it)");
    }
    for (const PendingTensor& t : tensors_) {
        if (t.name == name) invalid(what + ": duplicate tensor name");
    }
    if (!dtype_from_id(static_cast<uint32_t>(type))) {
        invalid(what + ": unknown type id " + std::to_string(static_cast<uint32_t>(type)));
    }
    if (shape.empty() || shape.size() > kMaxDims) {
        invalid(what + ": " + std::to_string(shape.size()) + " dimensions (1 to 4 allowed)");
    }
    int64_t n = 1;
    for (int64_t d : shape) {
        if (d <= 0) invalid(what + ": dimension " + std::to_string(d) + " is not positive");
        if (n > std::numeric_limits<int64_t>::max() / d) invalid(what + ": element count overflows");
        n *= d;
    }
    const DTypeTraits& tr = dtype_traits(type);
    if (shape[0] % tr.block_size != 0) {
        invalid(what + ": ne[0] = " + std::to_string(shape[0]) + " is not a multiple of the " +
                tr.name + " block size " + std::to_string(tr.block_size));
    }
    const size_t expected = dtype_row_size(type, shape[0]) * static_cast<size_t>(n / shape[0]);
    if (nbytes == std::numeric_limits<size_t>::max()) nbytes = expected;
    if (nbytes != expected) {
        invalid(what + ": " + std::to_string(nbytes) + " bytes given, " + std::to_string(expected) +
                " expected for its shape and type");
    }
    tensors_.push_back(PendingTensor{std::move(name), type, std::move(shape), nbytes,
                                     std::move(data), std::move(source)});
}

std::vector<uint8_t> Writer::header() const {
    Bytes b;
    b.put_bytes(reinterpret_cast<const uint8_t*>("GGUF"), 4);
    b.put<uint32_t>(version_);
    b.put<uint64_t>(tensors_.size());
    b.put<uint64_t>(kv_.size());
    for (const auto& [key, value] : kv_) {
        b.put_string(key);
        b.put<uint32_t>(static_cast<uint32_t>(value_type(value)));
        b.put_value(value);
    }
    uint64_t offset = 0;
    for (const PendingTensor& t : tensors_) {
        b.put_string(t.name);
        b.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
        for (int64_t d : t.shape) b.put<uint64_t>(static_cast<uint64_t>(d));
        b.put<uint32_t>(static_cast<uint32_t>(t.type));
        b.put<uint64_t>(offset);
        offset += padded(t.nbytes, alignment_);
    }
    b.pad_to(alignment_);
    return std::move(b.vec());
}

void Writer::emit(const std::function<void(const uint8_t*, size_t)>& sink) const {
    const std::vector<uint8_t> head = header();
    sink(head.data(), head.size());

    // One scratch buffer for streamed tensors, sized to the largest of them.
    size_t scratch_size = 0;
    for (const PendingTensor& t : tensors_) {
        if (t.source) scratch_size = std::max(scratch_size, t.nbytes);
    }
    std::vector<uint8_t> scratch;
    const std::vector<uint8_t> zeros(alignment_, 0);
    for (const PendingTensor& t : tensors_) {
        if (t.source) {
            if (scratch.empty()) scratch.resize(scratch_size);
            t.source(scratch.data(), t.nbytes);
            sink(scratch.data(), t.nbytes);
        } else {
            sink(t.data.data(), t.nbytes);
        }
        sink(zeros.data(), padded(t.nbytes, alignment_) - t.nbytes);
    }
}

std::vector<uint8_t> Writer::serialize() const {
    std::vector<uint8_t> out;
    emit([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
    return out;
}

void Writer::write(const std::string& path) const {
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        throw Error(ErrorCode::Io, path + ": cannot create " + tmp + ": " + std::strerror(errno));
    }
    bool cleaned = false;
    auto cleanup = [&] {
        if (!cleaned) {
            ::close(fd);
            ::unlink(tmp.c_str());
            cleaned = true;
        }
    };
    try {
        emit([&](const uint8_t* p, size_t n) {
            while (n > 0) {
                const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
                if (w < 0) {
                    const int err = errno;
                    if (err == EINTR) continue;
                    cleanup();
                    throw Error(ErrorCode::Io, path + ": write failed: " + std::strerror(err));
                }
                p += w;
                n -= static_cast<size_t>(w);
            }
        });
    } catch (...) {
        // A failed write, or a tensor source that threw: leave nothing behind.
        cleanup();
        throw;
    }
    if (::close(fd) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw Error(ErrorCode::Io, path + ": close failed: " + std::strerror(err));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        throw Error(ErrorCode::Io, path + ": cannot rename " + tmp + " into place: " + std::strerror(err));
    }
}

}  // namespace lantern::gguf
