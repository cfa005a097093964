// Metadata values: type names and sizes, Array access and builders, and
// File's typed getters.
#include <limits>

#include "gguf/gguf.h"
#include "lantern/error.h"

namespace lantern::gguf {

static_assert(sizeof(bool) == 1, "GGUF stores bools as one byte");

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::U8: return "u8";
        case ValueType::I8: return "i8";
        case ValueType::U16: return "u16";
        case ValueType::I16: return "i16";
        case ValueType::U32: return "u32";
        case ValueType::I32: return "i32";
        case ValueType::F32: return "f32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::U64: return "u64";
        case ValueType::I64: return "i64";
        case ValueType::F64: return "f64";
    }
    return "invalid";
}

size_t value_type_size(ValueType t) {
    switch (t) {
        case ValueType::U8:
        case ValueType::I8:
        case ValueType::BOOL: return 1;
        case ValueType::U16:
        case ValueType::I16: return 2;
        case ValueType::U32:
        case ValueType::I32:
        case ValueType::F32: return 4;
        case ValueType::U64:
        case ValueType::I64:
        case ValueType::F64: return 8;
        case ValueType::STRING:
        case ValueType::ARRAY: return 0;
    }
    return 0;
}

size_t Array::size() const {
    if (elem_type == ValueType::STRING) return strings.size();
    if (elem_type == ValueType::ARRAY) return arrays.size();
    const size_t es = value_type_size(elem_type);
    return es == 0 ? 0 : raw.size() / es;
}

namespace {

template <typename T>
T load(const Array& a, size_t i) {
    T v;
    std::memcpy(&v, a.raw.data() + i * sizeof(T), sizeof(T));
    return v;
}

void check_numeric_index(const Array& a, size_t i) {
    if (value_type_size(a.elem_type) == 0) {
        throw Error(ErrorCode::InvalidArgument, std::string("array of ") +
                                                    value_type_name(a.elem_type) +
                                                    " elements read as numbers");
    }
    if (i >= a.size()) {
        throw Error(ErrorCode::InvalidArgument, "array index " + std::to_string(i) +
                                                    " out of range (size " +
                                                    std::to_string(a.size()) + ")");
    }
}

}  // namespace

int64_t Array::int_at(size_t i) const {
    check_numeric_index(*this, i);
    switch (elem_type) {
        case ValueType::U8: return load<uint8_t>(*this, i);
        case ValueType::I8: return load<int8_t>(*this, i);
        case ValueType::BOOL: return load<uint8_t>(*this, i) != 0 ? 1 : 0;
        case ValueType::U16: return load<uint16_t>(*this, i);
        case ValueType::I16: return load<int16_t>(*this, i);
        case ValueType::U32: return load<uint32_t>(*this, i);
        case ValueType::I32: return load<int32_t>(*this, i);
        case ValueType::F32: return static_cast<int64_t>(load<float>(*this, i));
        case ValueType::U64: {
            const uint64_t v = load<uint64_t>(*this, i);
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                throw Error(ErrorCode::Format, "array element " + std::to_string(i) + " (" +
                                                   std::to_string(v) + ") does not fit int64");
            }
            return static_cast<int64_t>(v);
        }
        case ValueType::I64: return load<int64_t>(*this, i);
        case ValueType::F64: return static_cast<int64_t>(load<double>(*this, i));
        case ValueType::STRING:
        case ValueType::ARRAY: break;
    }
    return 0;  // unreachable: check_numeric_index rejected these
}

double Array::float_at(size_t i) const {
    check_numeric_index(*this, i);
    switch (elem_type) {
        case ValueType::F32: return load<float>(*this, i);
        case ValueType::F64: return load<double>(*this, i);
        case ValueType::U64: return static_cast<double>(load<uint64_t>(*this, i));
        default: return static_cast<double>(int_at(i));
    }
}

Array Array::of(std::vector<std::string> values) {
    Array a;
    a.elem_type = ValueType::STRING;
    a.strings = std::move(values);
    return a;
}

Array Array::of(std::vector<Array> values) {
    Array a;
    a.elem_type = ValueType::ARRAY;
    a.arrays = std::move(values);
    return a;
}

// --- typed metadata getters -----------------------------------------------

namespace {

[[noreturn]] void wrong_type(const File& f, std::string_view key, const Value& v,
                             const char* expected) {
    throw Error(ErrorCode::Format, f.path() + ": metadata '" + std::string(key) + "': is a " +
                                       value_type_name(value_type(v)) + ", expected " + expected);
}

}  // namespace

std::optional<int64_t> File::get_int(std::string_view key) const {
    const Value* v = find(key);
    if (v == nullptr) return std::nullopt;
    return std::visit(
        [&](const auto& x) -> int64_t {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, uint64_t>) {
                if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                    throw Error(ErrorCode::Format, path() + ": metadata '" + std::string(key) +
                                                       "': " + std::to_string(x) +
                                                       " does not fit int64");
                }
                return static_cast<int64_t>(x);
            } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
                return static_cast<int64_t>(x);
            } else {
                wrong_type(*this, key, *v, "an integer");
            }
        },
        *v);
}

std::optional<double> File::get_float(std::string_view key) const {
    const Value* v = find(key);
    if (v == nullptr) return std::nullopt;
    return std::visit(
        [&](const auto& x) -> double {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
                return static_cast<double>(x);
            } else {
                wrong_type(*this, key, *v, "a number");
            }
        },
        *v);
}

std::optional<bool> File::get_bool(std::string_view key) const {
    const Value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (const bool* b = std::get_if<bool>(v)) return *b;
    wrong_type(*this, key, *v, "a bool");
}

std::optional<std::string> File::get_string(std::string_view key) const {
    const Value* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (const std::string* s = std::get_if<std::string>(v)) return *s;
    wrong_type(*this, key, *v, "a string");
}

const Array* File::get_array(std::string_view key) const {
    const Value* v = find(key);
    if (v == nullptr) return nullptr;
    if (const Array* a = std::get_if<Array>(v)) return a;
    wrong_type(*this, key, *v, "an array");
}

}  // namespace lantern::gguf
