// VocabData from the tokenizer.ggml.* keys of a GGUF file.
#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "lantern/error.h"
#include "tokenizer/tokenizer.h"

namespace lantern {
namespace {

[[noreturn]] void key_error(const gguf::File& f, std::string_view key, const std::string& what) {
    throw Error(ErrorCode::Format, f.path() + ": " + std::string(key) + ": " + what);
}

bool is_integer(gguf::ValueType t) {
    using gguf::ValueType;
    return t == ValueType::U8 || t == ValueType::I8 || t == ValueType::U16 || t == ValueType::I16 ||
           t == ValueType::U32 || t == ValueType::I32 || t == ValueType::U64 || t == ValueType::I64;
}

const gguf::Array* array_of(const gguf::File& f, std::string_view key, bool strings, size_t expect) {
    const gguf::Array* a = f.get_array(key);
    if (!a) return nullptr;
    if (strings && a->elem_type != gguf::ValueType::STRING) key_error(f, key, "expected an array of strings");
    if (!strings && (a->elem_type == gguf::ValueType::STRING || a->elem_type == gguf::ValueType::ARRAY ||
                     a->elem_type == gguf::ValueType::BOOL)) {
        key_error(f, key, "expected an array of numbers");
    }
    if (expect != 0 && a->size() != expect) {
        key_error(f, key, std::to_string(a->size()) + " entries for " + std::to_string(expect) + " tokens");
    }
    return a;
}

void read_id(const gguf::File& f, std::string_view key, int32_t& out) {
    if (auto v = f.get_int(key)) {
        // Some converters write -1 (or its u32 image) for "none".
        if (*v == -1 || *v == 0xFFFFFFFFll) return;
        if (*v < 0 || *v > INT32_MAX) key_error(f, key, "id " + std::to_string(*v) + " out of range");
        out = static_cast<int32_t>(*v);
    }
}

}  // namespace

VocabData vocab_data_from_gguf(const gguf::File& f) {
    VocabData d;
    auto model = f.get_string("tokenizer.ggml.model");
    if (!model) key_error(f, "tokenizer.ggml.model", "missing (the file has no tokenizer)");
    d.model = *model;
    if (auto pre = f.get_string("tokenizer.ggml.pre")) d.pre = *pre;

    const gguf::Array* tokens = array_of(f, "tokenizer.ggml.tokens", true, 0);
    if (!tokens) key_error(f, "tokenizer.ggml.tokens", "missing");
    d.tokens = tokens->strings;
    const size_t n = d.tokens.size();

    if (const gguf::Array* scores = array_of(f, "tokenizer.ggml.scores", false, n)) {
        d.scores.resize(n);
        for (size_t i = 0; i < n; ++i) d.scores[i] = static_cast<float>(scores->float_at(i));
    }
    if (const gguf::Array* types = array_of(f, "tokenizer.ggml.token_type", false, n)) {
        if (!is_integer(types->elem_type)) key_error(f, "tokenizer.ggml.token_type", "expected integers");
        d.token_types.resize(n);
        for (size_t i = 0; i < n; ++i) d.token_types[i] = static_cast<int32_t>(types->int_at(i));
    }
    if (const gguf::Array* merges = array_of(f, "tokenizer.ggml.merges", true, 0)) d.merges = merges->strings;

    read_id(f, "tokenizer.ggml.bos_token_id", d.bos);
    read_id(f, "tokenizer.ggml.eos_token_id", d.eos);
    read_id(f, "tokenizer.ggml.unknown_token_id", d.unk);
    read_id(f, "tokenizer.ggml.padding_token_id", d.pad);
    read_id(f, "tokenizer.ggml.eot_token_id", d.eot);
    read_id(f, "tokenizer.ggml.eom_token_id", d.eom);
    read_id(f, "tokenizer.ggml.seperator_token_id", d.sep);  // sic: the GGUF key's spelling
    read_id(f, "tokenizer.ggml.cls_token_id", d.cls);
    read_id(f, "tokenizer.ggml.mask_token_id", d.mask);
    // FIM ids, with the older key names first so the newer ones win.
    read_id(f, "tokenizer.ggml.prefix_token_id", d.fim_pre);
    read_id(f, "tokenizer.ggml.suffix_token_id", d.fim_suf);
    read_id(f, "tokenizer.ggml.middle_token_id", d.fim_mid);
    read_id(f, "tokenizer.ggml.fim_pre_token_id", d.fim_pre);
    read_id(f, "tokenizer.ggml.fim_suf_token_id", d.fim_suf);
    read_id(f, "tokenizer.ggml.fim_mid_token_id", d.fim_mid);
    read_id(f, "tokenizer.ggml.fim_pad_token_id", d.fim_pad);
    read_id(f, "tokenizer.ggml.fim_rep_token_id", d.fim_rep);
    read_id(f, "tokenizer.ggml.fim_sep_token_id", d.fim_sep);

    d.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
    d.add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
    d.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");
    d.remove_extra_whitespaces = f.get_bool("tokenizer.ggml.remove_extra_whitespaces");
    return d;
}

}  // namespace lantern
