#include "backends/cuda/cuda_error.h"

#include "lantern/error.h"

namespace lantern::cuda {
namespace {

std::string shape(const Tensor& t) {
    std::string s = std::string(dtype_name(t.type)) + " [";
    for (int i = 0; i < kMaxDims; ++i) s += (i ? ", " : "") + std::to_string(t.ne[static_cast<size_t>(i)]);
    return s + "]";
}

}  // namespace

std::string describe(const Tensor& node) {
    std::string s = std::string(op_name(node.op)) + " '" + node.name + "'";
    if (node.layer >= 0) s += " (layer " + std::to_string(node.layer) + ")";
    s += ": dst " + shape(node);
    for (int i = 0; i < kMaxSrc; ++i) {
        const Tensor* src = node.src[static_cast<size_t>(i)];
        if (src != nullptr) s += ", src" + std::to_string(i) + " " + shape(*src);
    }
    return s;
}

void fail(const char* call, const std::string& detail, const std::string& context) {
    std::string msg = std::string("cuda: ") + call + " failed: " + detail;
    if (!context.empty()) msg += " [" + context + "]";
    throw Error(ErrorCode::Backend, msg);
}

void check(cublasStatus_t st, const char* call, const Tensor& node) {
    if (st != CUBLAS_STATUS_SUCCESS) fail(call, cublasGetStatusString(st), describe(node));
}

}  // namespace lantern::cuda
