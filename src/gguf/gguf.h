// GGUF files (versions 2 and 3): a memory-mapped reader that validates
// everything it is given, and a writer.
//
// Layout (little endian): magic "GGUF", u32 version, u64 tensor count,
// u64 metadata count, metadata key/value pairs, tensor infos (name, n_dims,
// dims, type, offset), padding to `general.alignment` (default 32), then the
// tensor data section; tensor offsets are relative to that section.
// Versions 2 and 3 are identical for little-endian files (3 added big-endian
// support, which Lantern does not take); version 1 used 32-bit counts and is
// rejected.
//
// Every failure of File::open is a lantern::Error whose message names the
// file and the field ("tensor 'blk.0.attn_q.weight': offset ... lies outside
// the file"): Io when the file cannot be read, Format when it is malformed,
// Unsupported for a tensor type id Lantern does not know, version 1, or a
// big-endian file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace lantern::gguf {

inline constexpr size_t kDefaultAlignment = 32;
inline constexpr size_t kMaxDims = 4;
// Arrays nested deeper than this are rejected (a guard for the recursive
// reader; real files nest at most once, and llama.cpp not at all).
inline constexpr int kMaxArrayDepth = 16;

// Value types as numbered in the file.
enum class ValueType : uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

const char* value_type_name(ValueType t);
// Bytes of one element of a numeric or bool type; 0 for STRING and ARRAY
// and for ids outside the enum.
size_t value_type_size(ValueType t);

// An array value. Strings live in `strings`, nested arrays in `arrays`,
// numbers and bools packed little-endian in `raw` (element size by elem_type).
struct Array {
    ValueType elem_type = ValueType::U8;
    std::vector<std::string> strings;
    std::vector<Array> arrays;
    std::vector<uint8_t> raw;

    size_t size() const;
    // Numeric (or bool) element i converted to the asked type; int_at
    // truncates floats. Throws Error(InvalidArgument) when i is out of range
    // or the elements are strings or arrays, and int_at throws Error(Format)
    // for a u64 above INT64_MAX.
    int64_t int_at(size_t i) const;
    double float_at(size_t i) const;

    // Builders. T is one of the C++ types of Value's numeric alternatives or bool.
    template <typename T>
    static Array of(const std::vector<T>& values);
    static Array of(std::vector<std::string> values);
    static Array of(std::vector<Array> values);

    bool operator==(const Array&) const = default;
};

// The variant's index equals the ValueType number.
using Value = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                           std::string, Array, uint64_t, int64_t, double>;

inline ValueType value_type(const Value& v) { return static_cast<ValueType>(v.index()); }

struct TensorInfo {
    std::string name;
    DType type = DType::F32;
    std::vector<int64_t> shape;  // ne[0] first (innermost, contiguous), 1 to 4 dims, each > 0
    uint64_t offset = 0;         // from the start of the data section
    size_t nbytes = 0;
    const uint8_t* data = nullptr;  // into the mapping

    int64_t n_elements() const;
};

class File {
public:
    // Maps and validates `path`. Throws lantern::Error (see above).
    static std::unique_ptr<File> open(const std::string& path);
    ~File();
    File(const File&) = delete;
    File& operator=(const File&) = delete;

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    size_t alignment() const { return alignment_; }
    // Start of the data section. In a file without tensors this may equal
    // size() or lie past it (writers need not pad a file that ends there).
    size_t data_offset() const { return data_offset_; }
    const uint8_t* base() const { return map_.data(); }
    size_t size() const { return map_.size(); }
    // MappedFile::drop_pages of the file's mapping.
    void drop_pages(const void* p, size_t n) const noexcept { map_.drop_pages(p, n); }

    // Metadata in file order.
    const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
    const Value* find(std::string_view key) const;

    // Typed getters: nullopt when absent; Format error when present with an
    // incompatible type (any integer type converts to int64, any integer or
    // float type to double; a u64 above INT64_MAX is a Format error).
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string> get_string(std::string_view key) const;
    const Array* get_array(std::string_view key) const;

    // Tensors in file order.
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;

private:
    File() = default;
    void parse();

    std::string path_;
    MappedFile map_;
    uint32_t version_ = 0;
    size_t alignment_ = kDefaultAlignment;
    size_t data_offset_ = 0;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> kv_index_;      // key -> index in kv_
    std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index in tensors_
};

// Builds a GGUF file (version 3 unless told) that File::open and llama.cpp's
// loader accept: tensors are laid out in the order added, each at an offset
// that is a multiple of the alignment, the last one padded too.
// Invalid input (bad shape, duplicate tensor name, wrong byte count, an Array
// whose storage disagrees with its elem_type) throws Error(InvalidArgument)
// when it is given, not when the file is written.
class Writer {
public:
    // Produces a tensor's bytes into dst[0..nbytes) when the file is written;
    // called exactly once per write()/serialize(), in tensor order.
    using TensorSource = std::function<void(uint8_t* dst, size_t nbytes)>;

    // Replaces an existing key (keeping its position). Setting
    // "general.alignment" is the same as set_alignment (it must be a u32).
    void set(std::string key, Value value);
    // Copies `data` (nbytes must equal the row size times the row count).
    void add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                    const void* data, size_t nbytes);
    // Streaming form: the bytes come from `source` while writing, so a file
    // larger than memory can be written one tensor at a time.
    void add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                    TensorSource source);
    void set_version(uint32_t v);  // 2 or 3
    void set_alignment(size_t a);  // a nonzero power of two; also written as general.alignment

    // The whole file in memory (for tests and small files).
    std::vector<uint8_t> serialize() const;
    // Streams the file to `path` through a temporary file beside it, renamed
    // into place when complete; holds at most one tensor's bytes in memory.
    // Throws Error(Io) naming the path on failure (and leaves no file behind).
    void write(const std::string& path) const;

private:
    struct PendingTensor {
        std::string name;
        DType type;
        std::vector<int64_t> shape;
        size_t nbytes = 0;
        std::vector<uint8_t> data;  // when added with bytes
        TensorSource source;        // when added with a source
    };
    void add_tensor_impl(std::string name, DType type, std::vector<int64_t> shape,
                         size_t nbytes, std::vector<uint8_t> data, TensorSource source);
    // Everything before the data section, padding included.
    std::vector<uint8_t> header() const;
    // Calls sink(bytes, n) for the header, each tensor and its padding.
    void emit(const std::function<void(const uint8_t*, size_t)>& sink) const;

    uint32_t version_ = 3;
    size_t alignment_ = kDefaultAlignment;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<PendingTensor> tensors_;
};

// --- template definitions ---------------------------------------------------

namespace detail {
template <typename T>
constexpr ValueType value_type_of() {
    if constexpr (std::is_same_v<T, bool>) return ValueType::BOOL;
    else if constexpr (std::is_same_v<T, uint8_t>) return ValueType::U8;
    else if constexpr (std::is_same_v<T, int8_t>) return ValueType::I8;
    else if constexpr (std::is_same_v<T, uint16_t>) return ValueType::U16;
    else if constexpr (std::is_same_v<T, int16_t>) return ValueType::I16;
    else if constexpr (std::is_same_v<T, uint32_t>) return ValueType::U32;
    else if constexpr (std::is_same_v<T, int32_t>) return ValueType::I32;
    else if constexpr (std::is_same_v<T, float>) return ValueType::F32;
    else if constexpr (std::is_same_v<T, uint64_t>) return ValueType::U64;
    else if constexpr (std::is_same_v<T, int64_t>) return ValueType::I64;
    else if constexpr (std::is_same_v<T, double>) return ValueType::F64;
    else static_assert(sizeof(T) == 0, "not a GGUF numeric type");
}
}  // namespace detail

template <typename T>
Array Array::of(const std::vector<T>& values) {
    Array a;
    a.elem_type = detail::value_type_of<T>();
    a.raw.resize(values.size() * sizeof(T));
    size_t at = 0;
    for (T v : values) {  // by value: also works for std::vector<bool>
        std::memcpy(a.raw.data() + at, &v, sizeof(T));
        at += sizeof(T);
    }
    return a;
}

}  // namespace lantern::gguf
