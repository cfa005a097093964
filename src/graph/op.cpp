#include "graph/op.h"

namespace lantern {

const char* op_name(Op op) {
    switch (op) {
        case Op::None: return "none";
        case Op::GetRows: return "get_rows";
        case Op::MulMat: return "mul_mat";
        case Op::RmsNorm: return "rms_norm";
        case Op::Add: return "add";
        case Op::Mul: return "mul";
        case Op::Scale: return "scale";
        case Op::SiluMul: return "silu_mul";
        case Op::MoeFfn: return "moe_ffn";
        case Op::GeluMul: return "gelu_mul";
        case Op::SoftMax: return "soft_max";
        case Op::Rope: return "rope";
        case Op::Copy: return "copy";
        case Op::KvStore: return "kv_store";
        case Op::Attention: return "attention";
        case Op::Softcap: return "softcap";
        case Op::SigmoidGate: return "sigmoid_gate";
        case Op::AddRmsNorm: return "add_rms_norm";
        case Op::RopeQK: return "rope_qk";
        case Op::MulMatAdd: return "mul_mat_add";
        case Op::Count: break;
    }
    return "?";
}

}  // namespace lantern
