#include "model/quantize.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/split.h"
#include "lantern/error.h"
#include "model/weight_types.h"
#include "quant/quant.h"

namespace lantern {
namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::InvalidArgument, "quantize: " + what); }

bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::char_traits<char>::length(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// A mixture of experts' router stays as it is (llama.cpp keeps it too): it
// is small, and a rounded router picks other experts.
bool is_matrix(const gguf::TensorInfo& t) {
    return t.shape.size() >= 2 && ends_with(t.name, ".weight") && !ends_with(t.name, ".ffn_gate_inp.weight");
}

void check_target(DType t) {
    if (!llama_file_type(t)) invalid(std::string("type ") + dtype_name(t) + " has no llama file type");
    if (!has_quantizer(t)) invalid(std::string("no quantizer for ") + dtype_name(t));
}

// llama_ftype: the K-quants alone are the "_S" files, the mix the "_M" ones.
uint32_t file_type(const QuantizeOptions& o) {
    if (!o.medium_mix) {
        switch (o.type) {
            case DType::Q3_K: return 11;  // Q3_K_S
            case DType::Q4_K: return 14;  // Q4_K_S
            case DType::Q5_K: return 16;  // Q5_K_S
            default: break;
        }
    }
    return *llama_file_type(o.type);
}

// Layer i of n gets more bits in the mix (llama.cpp's use_more_bits).
bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The block index of a "blk.N...." tensor name, or -1.
int64_t layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    const size_t dot = name.find('.', 4);
    if (dot == std::string::npos) return -1;
    try {
        return std::stoll(name.substr(4, dot - 4));
    } catch (const std::exception&) {
        return -1;
    }
}

// The type a tensor is asked for.
DType wanted_type(const QuantizeOptions& o, const std::string& name, int64_t n_layer) {
    if (name == "output.weight") return o.output_type ? *o.output_type : o.medium_mix ? DType::Q6_K : o.type;
    if (o.medium_mix && (ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight") ||
                         ends_with(name, ".ffn_down_exps.weight"))) {
        const int64_t i = layer_of(name);
        if (i >= 0 && more_bits(i, n_layer)) return DType::Q6_K;
    }
    return o.type;
}

}  // namespace

void parse_quantize_type(const std::string& name, QuantizeOptions& o) {
    if (name == "q4_K_M" || name == "q5_K_M" || name == "Q4_K_M" || name == "Q5_K_M") {
        o.type = name[1] == '4' ? DType::Q4_K : DType::Q5_K;
        o.medium_mix = true;
        return;
    }
    const std::optional<DType> t = dtype_from_name(name);
    if (!t) {
        invalid("unknown type '" + name + "' (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K .. q6_K, q4_K_M, q5_K_M)");
    }
    o.type = *t;
    o.medium_mix = false;
}

QuantizeReport quantize_model(const QuantizeOptions& o) {
    check_target(o.type);
    if (o.output_type) check_target(*o.output_type);
    if (o.medium_mix && o.type != DType::Q4_K && o.type != DType::Q5_K) invalid("the _M mix is for q4_K and q5_K");
    std::error_code ec;
    if (o.output_path.empty()) invalid("no output path");
    if (std::filesystem::equivalent(o.input_path, o.output_path, ec)) {
        invalid("the output " + o.output_path + " is the input");
    }
    const std::unique_ptr<gguf::File> in = gguf::File::open(o.input_path);
    // A split model (gguf/split.h) is read whole and written as one file.
    const std::vector<std::unique_ptr<gguf::File>> parts = gguf::open_other_parts(*in);
    std::vector<const gguf::TensorInfo*> tensors;
    for (const gguf::TensorInfo& t : in->tensors()) tensors.push_back(&t);
    for (const auto& part : parts) {
        for (const gguf::TensorInfo& t : part->tensors()) tensors.push_back(&t);
    }

    gguf::Writer w;
    for (const auto& [key, value] : in->metadata()) {
        if (key.rfind("split.", 0) != 0) w.set(key, value);
    }
    w.set("general.file_type", file_type(o));
    int64_t n_layer = 0;
    for (const gguf::TensorInfo* t : tensors) n_layer = std::max(n_layer, layer_of(t->name) + 1);
    if (dtype_is_quantized(o.type)) w.set("general.quantization_version", uint32_t{2});

    const int n_threads =
        o.n_threads > 0 ? o.n_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    QuantizeReport report;
    for (const gguf::TensorInfo* tp : tensors) {
        const gguf::TensorInfo& t = *tp;
        report.bytes_in += t.nbytes;
        const DType wanted = wanted_type(o, t.name, n_layer);
        std::optional<DType> target = is_matrix(t) ? weight_row_type(wanted, t.shape[0]) : std::nullopt;
        if (!target || *target == t.type) {
            ++report.copied;
            report.bytes_out += t.nbytes;
            w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
            continue;
        }
        if (quant::type_ops(t.type) == nullptr) {
            throw Error(ErrorCode::Unsupported, "quantize: tensor " + t.name + " has type " + dtype_name(t.type) +
                                                    ", which the CPU cannot read");
        }
        ++report.quantized;
        if (*target != wanted) ++report.fell_back;
        const int64_t cols = t.shape[0], rows = t.n_elements() / cols;
        const size_t in_row = dtype_row_size(t.type, cols), out_row = dtype_row_size(*target, cols);
        report.bytes_out += out_row * static_cast<size_t>(rows);
        const DType from = t.type, to = *target;
        const uint8_t* src = t.data;
        // A file with a small general.alignment may place the tensor off its
        // elements' alignment: such rows are read through an aligned copy.
        const bool misaligned = reinterpret_cast<uintptr_t>(src) % alignof(float) != 0;
        w.add_tensor(t.name, to, t.shape, [=](uint8_t* dst, size_t) {
            parallel_for(rows, n_threads, [&](int64_t r0, int64_t r1) {
                std::vector<float> row(static_cast<size_t>(cols));
                std::vector<float> staged(misaligned ? (in_row + sizeof(float) - 1) / sizeof(float) : 0);
                for (int64_t r = r0; r < r1; ++r) {
                    const uint8_t* in = src + static_cast<size_t>(r) * in_row;
                    if (misaligned) in = static_cast<const uint8_t*>(std::memcpy(staged.data(), in, in_row));
                    quant::dequantize_row(from, in, row.data(), cols);
                    quant::quantize_row(to, row.data(), dst + static_cast<size_t>(r) * out_row, cols);
                }
            });
        });
    }
    w.write(o.output_path);
    return report;
}

}  // namespace lantern
