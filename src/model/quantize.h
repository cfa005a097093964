// Requantizing a model file: `lantern quantize`, llama-quantize's job. Every
// weight matrix (a tensor named "*.weight" of two or more dimensions) is
// written in the requested type, or in a 32-element-block type of similar
// size where a K-quant's 256-element super-blocks do not divide its rows
// (model/weight_types.h); vectors (norms, biases) keep their type, and so
// does a matrix no block divides. The output matrix may take its own type
// (llama.cpp's mixes give it more bits than the rest).
//
// Any type the CPU reads can be the input: F32/F16/BF16 as published, or
// an already quantized file (each row is dequantized, then quantized again,
// so the error adds up; a matrix already of its target type is copied).
// The metadata is copied, general.file_type set to the requested type's.
// Tensors are produced one at a time while the file is written (through a
// temporary file renamed into place), so memory holds one tensor at most.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace lantern {

struct QuantizeOptions {
    std::string input_path;
    std::string output_path;   // not the input
    DType type = DType::Q4_0;  // of the weight matrices
    // llama.cpp's "_M" mix (Q4_K_M, Q5_K_M: type Q4_K or Q5_K): attn_v and
    // ffn_down in Q6_K in the first and last eighth of the layers and every
    // third between (its use_more_bits rule), output.weight in Q6_K.
    bool medium_mix = false;
    std::optional<DType> output_type;  // of output.weight (default: type, or Q6_K in the mix)
    int n_threads = 0;         // 0: all hardware threads
};

// Parses a --type argument: a tensor type name, or "q4_K_M" / "q5_K_M"
// (type and medium_mix). Throws Error(InvalidArgument) naming the choices.
void parse_quantize_type(const std::string& name, QuantizeOptions& options);

struct QuantizeReport {
    int quantized = 0;     // matrices written in a new type
    int fell_back = 0;     // of them, in the fallback type
    int copied = 0;        // tensors written unchanged
    uint64_t bytes_in = 0;   // tensor data of the input
    uint64_t bytes_out = 0;  // and of the output
};

// Throws Error: InvalidArgument (output path is the input, a type without
// a quantizer or a llama file type), Io/Format for the input, Unsupported
// for a tensor type the CPU cannot read, Io when the output cannot be written.
QuantizeReport quantize_model(const QuantizeOptions& options);

}  // namespace lantern
