// GGUF files (versions 2 and 3): a memory-mapped reader that validates
// everything it is given, and a writer.
//
// Layout (little endian): magic "GGUF", u32 version, u64 tensor count,
// u64 metadata count, metadata key/value pairs, tensor infos (name, n_dims,
// dims, type, offset), padding to `general.alignment` (default 32), then the
// tensor data section; tensor offsets are relative to that section.
//
// Every failure of File::open is a lantern::Error whose message names the
// file and the field ("tensor 'blk.0.attn_q.weight': offset ... lies outside
// the file"): Io when the file cannot be read, Format when it is malformed,
// Unsupported for a tensor type id Lantern does not know.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.h"

namespace lantern::gguf {

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

// An array value. Strings live in `strings`, nested arrays in `arrays`,
// numbers and bools packed little-endian in `raw` (element size by elem_type).
struct Array {
    ValueType elem_type = ValueType::U8;
    std::vector<std::string> strings;
    std::vector<Array> arrays;
    std::vector<uint8_t> raw;

    size_t size() const;
    // Numeric element i converted to the asked type. Precondition: numeric elem_type.
    int64_t int_at(size_t i) const;
    double float_at(size_t i) const;
};

// The variant's index equals the ValueType number.
using Value = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                           std::string, Array, uint64_t, int64_t, double>;

inline ValueType value_type(const Value& v) { return static_cast<ValueType>(v.index()); }

struct TensorInfo {
    std::string name;
    DType type = DType::F32;
    std::vector<int64_t> shape;  // ne[0] first (innermost, contiguous), at most 4 dims
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
    size_t data_offset() const { return data_offset_; }
    const uint8_t* base() const { return base_; }
    size_t size() const { return size_; }

    // Metadata in file order.
    const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
    const Value* find(std::string_view key) const;

    // Typed getters: nullopt when absent; Format error when present with an
    // incompatible type (any integer type converts to int64, any integer or
    // float type to double).
    std::optional<int64_t> get_int(std::string_view key) const;
    std::optional<double> get_float(std::string_view key) const;
    std::optional<bool> get_bool(std::string_view key) const;
    std::optional<std::string> get_string(std::string_view key) const;
    const Array* get_array(std::string_view key) const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;

private:
    File() = default;
    void parse();

    std::string path_;
    int fd_ = -1;
    const uint8_t* base_ = nullptr;
    size_t size_ = 0;
    uint32_t version_ = 0;
    size_t alignment_ = 32;
    size_t data_offset_ = 0;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<TensorInfo> tensors_;
};

// Builds a GGUF file in memory and writes it (version 3 unless told).
class Writer {
public:
    void set(std::string key, Value value);  // replaces an existing key
    // Copies `data` (nbytes must equal the row size times the row count).
    void add_tensor(std::string name, DType type, std::vector<int64_t> shape,
                    const void* data, size_t nbytes);
    void set_version(uint32_t v) { version_ = v; }
    void set_alignment(size_t a);  // also written as general.alignment

    std::vector<uint8_t> serialize() const;
    void write(const std::string& path) const;  // throws Error(Io)

private:
    struct PendingTensor {
        std::string name;
        DType type;
        std::vector<int64_t> shape;
        std::vector<uint8_t> data;
    };
    uint32_t version_ = 3;
    size_t alignment_ = 32;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace lantern::gguf
