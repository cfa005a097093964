// GGUF reader: parses and validates a mapped file.
//
// Every read goes through Cursor, which checks the bytes it takes against the
// mapping, so a malformed or truncated file ends in an Error, never an
// out-of-bounds read. Counts are checked against the bytes left before
// anything is reserved for them, so an absurd count cannot exhaust memory.
#include <algorithm>
#include <bit>
#include <limits>

#include "gguf/gguf.h"
#include "lantern/error.h"

namespace lantern::gguf {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the reader loads little-endian fields with memcpy");

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Smallest encodings, used to reject counts the remaining bytes cannot hold.
constexpr size_t kMinKvBytes = 8 + 4 + 1;              // key length, type, one-byte value
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, one dim, type, offset
constexpr size_t kMinNestedArrayBytes = 4 + 8;         // element type, count

// Reserve no more than this many elements up front: a count that passes the
// bytes-left check can still be far more items than a file holds in practice,
// and the vectors grow as real items arrive.
size_t reserve_hint(uint64_t count) { return static_cast<size_t>(std::min<uint64_t>(count, 1u << 16)); }

std::string quoted(std::string_view s) {
    std::string out = "'";
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
            out += static_cast<char>(c);
        } else {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out + "'";
}

// A bounds-checked read position in the mapping. `where` names the item being
// parsed ("metadata #3 'general.name'"), and each read names its field, so an
// error says which file, item and field it is about.
class Cursor {
public:
    Cursor(const std::string& path, const uint8_t* base, size_t size)
        : path_(path), base_(base), size_(size) {}

    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    void set_where(std::string where) { where_ = std::move(where); }

    [[noreturn]] void fail(ErrorCode code, const std::string& what) const {
        throw Error(code, path_ + ": " + where_ + ": " + what);
    }

    const uint8_t* take(size_t n, const char* field) {
        if (n > remaining()) {
            fail(ErrorCode::Format, std::string(field) + ": needs " + std::to_string(n) +
                                        " bytes at offset " + std::to_string(pos_) +
                                        " but the file ends at " + std::to_string(size_) +
                                        " (truncated?)");
        }
        const uint8_t* p = base_ + pos_;
        pos_ += n;
        return p;
    }

    template <typename T>
    T read(const char* field) {
        T v;
        std::memcpy(&v, take(sizeof(T), field), sizeof(T));
        return v;
    }

    std::string read_string(const char* field) {
        const uint64_t len = read<uint64_t>(field);
        if (len > remaining()) {
            fail(ErrorCode::Format, std::string(field) + ": string length " + std::to_string(len) +
                                        " runs past the end of the file (" +
                                        std::to_string(remaining()) + " bytes left at offset " +
                                        std::to_string(pos_) + ")");
        }
        const uint8_t* p = take(static_cast<size_t>(len), field);
        return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    }

    // Rejects `count` items of at least `min_bytes` each when the rest of the
    // file cannot hold them.
    void check_count(uint64_t count, size_t min_bytes, const char* field) const {
        if (count > remaining() / min_bytes) {
            fail(ErrorCode::Format, std::string(field) + ": count " + std::to_string(count) +
                                        " cannot fit in the " + std::to_string(remaining()) +
                                        " bytes left of the file");
        }
    }

private:
    const std::string& path_;
    const uint8_t* base_;
    size_t size_;
    size_t pos_ = 0;
    std::string where_ = "header";
};

ValueType read_value_type(Cursor& c, const char* field) {
    const uint32_t id = c.read<uint32_t>(field);
    if (id > static_cast<uint32_t>(ValueType::F64)) {
        c.fail(ErrorCode::Format,
               std::string(field) + ": " + std::to_string(id) + " is not a GGUF value type");
    }
    return static_cast<ValueType>(id);
}

Array read_array(Cursor& c, int depth) {
    if (depth > kMaxArrayDepth) {
        c.fail(ErrorCode::Format,
               "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    }
    Array a;
    a.elem_type = read_value_type(c, "array element type");
    const uint64_t count = c.read<uint64_t>("array length");
    switch (a.elem_type) {
        case ValueType::STRING:
            c.check_count(count, 8, "array length");
            a.strings.reserve(reserve_hint(count));
            for (uint64_t i = 0; i < count; ++i) a.strings.push_back(c.read_string("array string"));
            break;
        case ValueType::ARRAY:
            c.check_count(count, kMinNestedArrayBytes, "array length");
            a.arrays.reserve(reserve_hint(count));
            for (uint64_t i = 0; i < count; ++i) a.arrays.push_back(read_array(c, depth + 1));
            break;
        default: {
            const size_t es = value_type_size(a.elem_type);
            c.check_count(count, es, "array length");
            const size_t n = static_cast<size_t>(count) * es;
            const uint8_t* p = c.take(n, "array data");
            a.raw.assign(p, p + n);
        }
    }
    return a;
}

Value read_value(Cursor& c, ValueType t) {
    switch (t) {
        case ValueType::U8: return c.read<uint8_t>("value");
        case ValueType::I8: return c.read<int8_t>("value");
        case ValueType::U16: return c.read<uint16_t>("value");
        case ValueType::I16: return c.read<int16_t>("value");
        case ValueType::U32: return c.read<uint32_t>("value");
        case ValueType::I32: return c.read<int32_t>("value");
        case ValueType::F32: return c.read<float>("value");
        case ValueType::BOOL: return c.read<uint8_t>("value") != 0;
        case ValueType::STRING: return c.read_string("value");
        case ValueType::ARRAY: return read_array(c, 1);
        case ValueType::U64: return c.read<uint64_t>("value");
        case ValueType::I64: return c.read<int64_t>("value");
        case ValueType::F64: return c.read<double>("value");
    }
    c.fail(ErrorCode::Format, "value type is not a GGUF value type");
}

void read_header(Cursor& c, uint32_t& version, uint64_t& n_tensors, uint64_t& n_kv) {
    const uint8_t* magic = c.take(4, "magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) {
        c.fail(ErrorCode::Format,
               "bad magic " + quoted(std::string_view(reinterpret_cast<const char*>(magic), 4)) +
                   " (expected 'GGUF')");
    }
    version = c.read<uint32_t>("version");
    if (version == 0x02000000u || version == 0x03000000u) {
        c.fail(ErrorCode::Unsupported, "version: the file is big-endian, which is not supported");
    }
    if (version == 1) {
        c.fail(ErrorCode::Unsupported,
               "version 1 is not supported (it used 32-bit counts; convert the file to v3)");
    }
    if (version == 0) c.fail(ErrorCode::Format, "version 0 is not a GGUF version");
    if (version > 3) {
        c.fail(ErrorCode::Unsupported,
               "version " + std::to_string(version) + " is not supported (only 2 and 3)");
    }
    n_tensors = c.read<uint64_t>("tensor count");
    n_kv = c.read<uint64_t>("metadata count");
    c.check_count(n_tensors, kMinTensorInfoBytes, "tensor count");
    c.check_count(n_kv, kMinKvBytes, "metadata count");
    if (n_tensors * kMinTensorInfoBytes + n_kv * kMinKvBytes > c.remaining()) {
        c.fail(ErrorCode::Format, "tensor count " + std::to_string(n_tensors) +
                                      " and metadata count " + std::to_string(n_kv) +
                                      " cannot fit in the " + std::to_string(c.remaining()) +
                                      " bytes left of the file");
    }
}

// One tensor info as stored, validated apart from its place in the data section.
TensorInfo read_tensor_info(Cursor& c, uint64_t index) {
    TensorInfo t;
    c.set_where("tensor info #" + std::to_string(index));
    t.name = c.read_string("name");
    c.set_where("tensor " + quoted(t.name));

    const uint32_t n_dims = c.read<uint32_t>("n_dims");
    if (n_dims == 0 || n_dims > kMaxDims) {
        c.fail(ErrorCode::Format, "n_dims " + std::to_string(n_dims) + " is outside 1.." +
                                      std::to_string(kMaxDims));
    }
    uint64_t dims[kMaxDims] = {};
    for (uint32_t d = 0; d < n_dims; ++d) dims[d] = c.read<uint64_t>("dims");
    const uint32_t type_id = c.read<uint32_t>("type");
    t.offset = c.read<uint64_t>("offset");

    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        const std::string dim = "dimension " + std::to_string(d) + " (" + std::to_string(dims[d]) + ")";
        if (dims[d] == 0) c.fail(ErrorCode::Format, dim + " is zero");
        if (dims[d] > kInt64Max) c.fail(ErrorCode::Format, dim + " is negative as int64");
        const int64_t v = static_cast<int64_t>(dims[d]);
        if (n > std::numeric_limits<int64_t>::max() / v) {
            c.fail(ErrorCode::Format, "element count overflows int64 at " + dim);
        }
        n *= v;
        t.shape.push_back(v);
    }

    const std::optional<DType> type = dtype_from_id(type_id);
    if (!type) {
        c.fail(ErrorCode::Unsupported, "type id " + std::to_string(type_id) + " is not a known tensor type");
    }
    t.type = *type;
    const DTypeTraits& tr = dtype_traits(t.type);
    if (t.shape[0] % tr.block_size != 0) {
        c.fail(ErrorCode::Format, "ne[0] = " + std::to_string(t.shape[0]) +
                                      " is not a multiple of the " + tr.name + " block size " +
                                      std::to_string(tr.block_size));
    }
    const uint64_t blocks = static_cast<uint64_t>(n / tr.block_size);
    if (blocks > std::numeric_limits<size_t>::max() / tr.type_size) {
        c.fail(ErrorCode::Format, "byte size overflows (" + std::to_string(n) + " elements of " +
                                      tr.name + ")");
    }
    t.nbytes = static_cast<size_t>(blocks) * tr.type_size;
    return t;
}

}  // namespace

int64_t TensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::unique_ptr<File> File::open(const std::string& path) {
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    f->map_ = MappedFile::open(path);
    f->parse();
    return f;
}

File::~File() = default;

void File::parse() {
    Cursor c(path_, map_.data(), map_.size());

    uint64_t n_tensors = 0;
    uint64_t n_kv = 0;
    read_header(c, version_, n_tensors, n_kv);

    kv_.reserve(reserve_hint(n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) {
        c.set_where("metadata #" + std::to_string(i));
        std::string key = c.read_string("key");
        c.set_where("metadata " + quoted(key));
        if (kv_index_.count(key) != 0) {
            c.fail(ErrorCode::Format, "duplicate key (also metadata #" +
                                          std::to_string(kv_index_.find(key)->second) + ")");
        }
        const ValueType type = read_value_type(c, "value type");
        Value value = read_value(c, type);
        kv_index_.emplace(key, kv_.size());
        kv_.emplace_back(std::move(key), std::move(value));
    }

    if (const Value* a = find("general.alignment")) {
        c.set_where("metadata 'general.alignment'");
        const ValueType t = value_type(*a);
        if (value_type_size(t) == 0 || t == ValueType::F32 || t == ValueType::F64 ||
            t == ValueType::BOOL) {
            c.fail(ErrorCode::Format, std::string("is a ") + value_type_name(t) + ", expected u32");
        }
        const int64_t v = *get_int("general.alignment");
        if (v <= 0 || !std::has_single_bit(static_cast<uint64_t>(v))) {
            c.fail(ErrorCode::Format,
                   "alignment " + std::to_string(v) + " is not a nonzero power of two");
        }
        alignment_ = static_cast<size_t>(v);
    }

    tensors_.reserve(reserve_hint(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t = read_tensor_info(c, i);
        if (tensor_index_.count(t.name) != 0) {
            c.fail(ErrorCode::Format, "duplicate tensor name (also tensor #" +
                                          std::to_string(tensor_index_.find(t.name)->second) + ")");
        }
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }

    // The data section starts at the next multiple of the alignment.
    const size_t end = c.pos();
    const size_t pad = (alignment_ - end % alignment_) % alignment_;
    if (pad > std::numeric_limits<size_t>::max() - end) {
        c.set_where("data section");
        c.fail(ErrorCode::Format, "offset overflows with alignment " + std::to_string(alignment_));
    }
    data_offset_ = end + pad;
    if (tensors_.empty()) return;

    if (data_offset_ > size()) {
        c.set_where("data section");
        c.fail(ErrorCode::Format, "starts at offset " + std::to_string(data_offset_) +
                                      ", past the end of the file (" + std::to_string(size()) +
                                      " bytes)");
    }
    const uint64_t data_size = size() - data_offset_;
    for (TensorInfo& t : tensors_) {
        c.set_where("tensor " + quoted(t.name));
        if (t.offset % alignment_ != 0) {
            c.fail(ErrorCode::Format, "offset " + std::to_string(t.offset) +
                                          " is not a multiple of the alignment " +
                                          std::to_string(alignment_));
        }
        if (t.offset > data_size || t.nbytes > data_size - t.offset) {
            c.fail(ErrorCode::Format, "offset " + std::to_string(t.offset) + " + " +
                                          std::to_string(t.nbytes) +
                                          " bytes lies outside the data section (" +
                                          std::to_string(data_size) + " bytes from offset " +
                                          std::to_string(data_offset_) + ")");
        }
        t.data = base() + data_offset_ + t.offset;
    }
}

const Value* File::find(std::string_view key) const {
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace lantern::gguf
