#include "backends/registry.h"

#include "lantern/error.h"
#include "quant/packed.h"
#include "quant/quant.h"

#if defined(LANTERN_HAVE_CUDA)
#include "backends/cuda/cuda_registry.h"
#endif
#if defined(LANTERN_HAVE_OPENCL)
#include "backends/opencl/opencl_registry.h"
#endif

namespace lantern {

const std::vector<BackendFactory>& gpu_backend_factories() {
    static const std::vector<BackendFactory> factories = {
#if defined(LANTERN_HAVE_CUDA)
        {"cuda", make_cuda_backend, list_cuda_devices},
#endif
#if defined(LANTERN_HAVE_OPENCL)
        {"opencl", make_opencl_backend, list_opencl_devices},
#endif
    };
    return factories;
}

std::unique_ptr<Backend> create_gpu_backend(const std::string& name, int index) {
    for (const BackendFactory& f : gpu_backend_factories()) {
        if (name == f.name) return f.create(index);
    }
    std::string built = "cpu";
    for (const BackendFactory& f : gpu_backend_factories()) built += std::string(", ") + f.name;
    throw Error(ErrorCode::Unsupported, "backend '" + name + "' is not built into this binary (available: " + built + ")");
}

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> all;
    for (const BackendFactory& f : gpu_backend_factories()) {
        std::vector<DeviceInfo> d = f.devices();
        all.insert(all.end(), d.begin(), d.end());
    }
    return all;
}

std::vector<std::string> available_backends() {
    std::vector<std::string> names = {"cpu"};
    for (const BackendFactory& f : gpu_backend_factories()) names.emplace_back(f.name);
    return names;
}

std::string cpu_kernels() { return quant::kernel_set(); }

std::vector<std::string> cpu_packed_types() {
    std::vector<std::string> names;
    for (uint32_t code = 0; code <= static_cast<uint32_t>(DType::BF16); ++code) {  // GGUF's type codes
        const auto t = static_cast<DType>(code);
        if (quant::packed_ops(t) != nullptr) names.emplace_back(dtype_name(t));
    }
    return names;
}

}  // namespace lantern
