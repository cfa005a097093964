// lantern synth: a llama-architecture (or qwen3moe) GGUF with random weights
// and a real vocabulary, for benchmarks on any machine (llama.cpp loads it too).
#include <cstdio>

#include "cli/common.h"
#include "core/dtype.h"
#include "model/synth.h"

namespace lantern::cli {

void add_synth_command(CLI::App& app) {
    struct Options {
        std::string shape;
        std::string type = "q4_0";
        std::string vocab;
        std::string output;
        uint64_t seed = 1;
        int threads = 0;
        int64_t layers = 0;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("synth", "write a synthetic model of a published shape with random weights");
    std::vector<std::string> names;
    for (const SynthShape& s : synth_shapes()) names.push_back(s.name);
    cmd->add_option("--shape", o->shape, "model shape")->required()->check(CLI::IsMember(names));
    cmd->add_option("--type", o->type, "type of the 2-D weights (q4_0, q8_0, f16, q4_K, ...)")->capture_default_str();
    cmd->add_option("--vocab", o->vocab, "GGUF whose vocabulary to copy")->required();
    cmd->add_option("-o,--output", o->output, "output GGUF file")->required();
    cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
    cmd->add_option("--layers", o->layers, "layers (default: the shape's; fewer make a quicker file of the same layer shape)")
        ->check(CLI::Range(int64_t{1}, int64_t{9999}));
    cmd->add_option("-t,--threads", o->threads, "threads (default: all)");
    cmd->callback([o] {
        SynthOptions s;
        s.shape = synth_shape(o->shape);
        if (o->layers > 0) s.shape.n_layer = o->layers;
        const std::optional<DType> t = dtype_from_name(o->type);
        if (!t) throw Error(ErrorCode::InvalidArgument, "unknown tensor type '" + o->type + "'");
        s.type = *t;
        s.vocab_path = o->vocab;
        s.output_path = o->output;
        s.seed = o->seed;
        s.n_threads = o->threads;
        write_synthetic_model(s);
        std::fprintf(stderr, "wrote %s (%s, %s)\n", o->output.c_str(), o->shape.c_str(), dtype_name(s.type));
    });
}

void add_devices_command(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("devices", "list the backends built in, the CPU kernels and the GPU devices");
    cmd->callback([] {
        std::printf("backends: ");
        const std::vector<std::string> names = available_backends();
        for (size_t i = 0; i < names.size(); ++i) std::printf("%s%s", i ? ", " : "", names[i].c_str());
        std::printf("\n");
        std::printf("cpu: %s kernels, %d hardware threads", cpu_kernels().c_str(), hardware_threads());
        const std::vector<std::string> packed = cpu_packed_types();
        for (size_t i = 0; i < packed.size(); ++i) std::printf("%s%s", i ? " " : "; packed at load: ", packed[i].c_str());
        std::printf("\n");
        const std::vector<DeviceInfo> devices = list_devices();
        if (devices.empty()) std::printf("no GPU devices found\n");
        for (const DeviceInfo& d : devices) {
            std::printf("%s device %d: %s\n  %s\n", d.backend.c_str(), d.index, d.name.c_str(), d.details.c_str());
        }
    });
}

}  // namespace lantern::cli
