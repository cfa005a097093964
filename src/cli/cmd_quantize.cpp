// lantern quantize: a model file's weight matrices in another type
// (model/quantize.h), as llama-quantize writes them.
#include <cstdio>

#include "cli/common.h"
#include "core/dtype.h"
#include "model/quantize.h"

namespace lantern::cli {
void add_quantize_command(CLI::App& app) {
    struct Options {
        std::string input;
        std::string output;
        std::string type;
        std::string output_type;
        int threads = 0;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("quantize", "write a model with its weight matrices in another type");
    cmd->add_option("-m,--model", o->input, "input GGUF (F32/F16/BF16 or already quantized)")->required();
    cmd->add_option("-o,--output", o->output, "output GGUF")->required();
    cmd->add_option("--type", o->type, "type of the weight matrices: q4_0, q4_1, q5_0, q5_1, q8_0, q2_K .. q6_K, iq4_nl, iq4_xs, f16, bf16, or "
                   "llama.cpp's mixes q4_K_M, q5_K_M")
        ->required();
    cmd->add_option("--output-type", o->output_type, "type of output.weight (default: --type; llama.cpp's mixes use q6_K)");
    cmd->add_option("-t,--threads", o->threads, "threads (default: all)");
    cmd->callback([o] {
        QuantizeOptions q;
        q.input_path = o->input;
        q.output_path = o->output;
        parse_quantize_type(o->type, q);
        if (!o->output_type.empty()) {
            QuantizeOptions out;
            parse_quantize_type(o->output_type, out);
            if (out.medium_mix) throw Error(ErrorCode::InvalidArgument, "--output-type takes a tensor type, not a mix");
            q.output_type = out.type;
        }
        q.n_threads = o->threads;
        const QuantizeReport r = quantize_model(q);
        std::fprintf(stderr,
                     "wrote %s: %d matrices in %s%s (%d of them in a 32-element-block type their rows needed), "
                     "%d tensors copied; %.1f MB -> %.1f MB\n",
                     o->output.c_str(), r.quantized, dtype_name(q.type), q.medium_mix ? " (the _M mix)" : "", r.fell_back,
                     r.copied, r.bytes_in / 1e6,
                     r.bytes_out / 1e6);
    });
}

}  // namespace lantern::cli
