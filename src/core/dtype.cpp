#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "lantern/error.h"

namespace lantern {
namespace {

struct Entry {
    DType type;
    DTypeTraits traits;
};

// Block layouts as published for GGUF (ggml-common.h block structs).
constexpr std::array<Entry, 30> kTable = {{
    {DType::F32, {"f32", 1, 4, false}},
    {DType::F16, {"f16", 1, 2, false}},
    {DType::Q4_0, {"q4_0", 32, 18, true}},
    {DType::Q4_1, {"q4_1", 32, 20, true}},
    {DType::Q5_0, {"q5_0", 32, 22, true}},
    {DType::Q5_1, {"q5_1", 32, 24, true}},
    {DType::Q8_0, {"q8_0", 32, 34, true}},
    {DType::Q8_1, {"q8_1", 32, 36, true}},
    {DType::Q2_K, {"q2_K", 256, 84, true}},
    {DType::Q3_K, {"q3_K", 256, 110, true}},
    {DType::Q4_K, {"q4_K", 256, 144, true}},
    {DType::Q5_K, {"q5_K", 256, 176, true}},
    {DType::Q6_K, {"q6_K", 256, 210, true}},
    {DType::Q8_K, {"q8_K", 256, 292, true}},
    {DType::IQ2_XXS, {"iq2_xxs", 256, 66, true}},
    {DType::IQ2_XS, {"iq2_xs", 256, 74, true}},
    {DType::IQ3_XXS, {"iq3_xxs", 256, 98, true}},
    {DType::IQ1_S, {"iq1_s", 256, 50, true}},
    {DType::IQ4_NL, {"iq4_nl", 32, 18, true}},
    {DType::IQ3_S, {"iq3_s", 256, 110, true}},
    {DType::IQ2_S, {"iq2_s", 256, 82, true}},
    {DType::IQ4_XS, {"iq4_xs", 256, 136, true}},
    {DType::I8, {"i8", 1, 1, false}},
    {DType::I16, {"i16", 1, 2, false}},
    {DType::I32, {"i32", 1, 4, false}},
    {DType::I64, {"i64", 1, 8, false}},
    {DType::F64, {"f64", 1, 8, false}},
    {DType::IQ1_M, {"iq1_m", 256, 56, true}},
    {DType::BF16, {"bf16", 1, 2, false}},
    // Sentinel slot kept so the array size documents the id range checked below.
    {DType::F32, {nullptr, 0, 0, false}},
}};

// Entries indexed by type id (the ids are small and dense), built once.
constexpr uint32_t kMaxId = 31;
constexpr std::array<const Entry*, kMaxId> make_index() {
    std::array<const Entry*, kMaxId> index{};
    for (const Entry& e : kTable) {
        if (e.traits.name != nullptr && static_cast<uint32_t>(e.type) < kMaxId) {
            index[static_cast<uint32_t>(e.type)] = &e;
        }
    }
    return index;
}
constexpr std::array<const Entry*, kMaxId> kIndex = make_index();

const Entry* find(uint32_t id) { return id < kMaxId ? kIndex[id] : nullptr; }

}  // namespace

std::optional<DType> dtype_from_id(uint32_t id) {
    const Entry* e = find(id);
    if (e == nullptr) return std::nullopt;
    return e->type;
}

const DTypeTraits& dtype_traits(DType t) {
    const Entry* e = find(static_cast<uint32_t>(t));
    if (e == nullptr) {
        throw Error(ErrorCode::Unsupported,
                    "unknown tensor type id " + std::to_string(static_cast<uint32_t>(t)));
    }
    return e->traits;
}

std::optional<DType> dtype_from_name(std::string_view name) {
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const Entry& e : kTable) {
        if (e.traits.name == nullptr) continue;
        std::string n = e.traits.name;
        for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (n == lower) return e.type;
    }
    return std::nullopt;
}

}  // namespace lantern
