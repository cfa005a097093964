#include "model/quantize.h"

#include <filesystem>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "lantern/error.h"
#include "model/weight_types.h"
#include "quant/quant.h"

namespace lantern {
namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::InvalidArgument, "quantize: " + what); }

bool is_matrix(const gguf::TensorInfo& t) {
    const std::string& n = t.name;
    return t.shape.size() >= 2 && n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0;
}

void check_target(DType t) {
    if (!llama_file_type(t)) invalid(std::string("type ") + dtype_name(t) + " has no llama file type");
    if (!has_quantizer(t)) invalid(std::string("no quantizer for ") + dtype_name(t));
}

}  // namespace

QuantizeReport quantize_model(const QuantizeOptions& o) {
    check_target(o.type);
    if (o.output_type) check_target(*o.output_type);
    std::error_code ec;
    if (o.output_path.empty()) invalid("no output path");
    if (std::filesystem::equivalent(o.input_path, o.output_path, ec)) {
        invalid("the output " + o.output_path + " is the input");
    }
    const std::unique_ptr<gguf::File> in = gguf::File::open(o.input_path);

    gguf::Writer w;
    for (const auto& [key, value] : in->metadata()) w.set(key, value);
    w.set("general.file_type", *llama_file_type(o.type));
    if (dtype_is_quantized(o.type)) w.set("general.quantization_version", uint32_t{2});

    const int n_threads =
        o.n_threads > 0 ? o.n_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    QuantizeReport report;
    for (const gguf::TensorInfo& t : in->tensors()) {
        report.bytes_in += t.nbytes;
        const DType wanted = t.name == "output.weight" && o.output_type ? *o.output_type : o.type;
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
        w.add_tensor(t.name, to, t.shape, [=](uint8_t* dst, size_t) {
            parallel_for(rows, n_threads, [&](int64_t r0, int64_t r1) {
                std::vector<float> row(static_cast<size_t>(cols));
                for (int64_t r = r0; r < r1; ++r) {
                    quant::dequantize_row(from, src + static_cast<size_t>(r) * in_row, row.data(), cols);
                    quant::quantize_row(to, row.data(), dst + static_cast<size_t>(r) * out_row, cols);
                }
            });
        });
    }
    w.write(o.output_path);
    return report;
}

}  // namespace lantern
