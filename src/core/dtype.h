// Tensor element types, numbered exactly as GGUF stores them (ggml_type).
//
// A quantized type stores a row of `block_size` elements per block of
// `type_size` bytes; a row of n elements takes n / block_size * type_size
// bytes (n must be a multiple of block_size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace lantern {

enum class DType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
};

struct DTypeTraits {
    const char* name;     // "q4_0", as llama.cpp prints it
    int64_t block_size;   // elements per block (1 for plain types)
    size_t type_size;     // bytes per block
    bool quantized;
};

// Layout of a GGUF type id, or nullopt when the id is not one Lantern knows
// (the loader turns that into an Unsupported error naming the tensor).
std::optional<DType> dtype_from_id(uint32_t id);

// Traits of a known type. Every enumerator above has traits, including the
// IQ types whose layouts are known but whose kernels may be missing.
const DTypeTraits& dtype_traits(DType t);

inline const char* dtype_name(DType t) { return dtype_traits(t).name; }
inline int64_t dtype_block_size(DType t) { return dtype_traits(t).block_size; }
inline size_t dtype_type_size(DType t) { return dtype_traits(t).type_size; }
inline bool dtype_is_quantized(DType t) { return dtype_traits(t).quantized; }
// The K-quants Q2_K..Q6_K (256-element super-blocks of sub-block scales).
constexpr bool is_kquant(DType t) {
    return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K;
}

// Bytes of a row of n elements. Precondition: n % block_size == 0.
inline size_t dtype_row_size(DType t, int64_t n) {
    const DTypeTraits& tr = dtype_traits(t);
    return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

// Parses "q4_0", "Q4_0", "f16", ... (the names in DTypeTraits).
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace lantern
