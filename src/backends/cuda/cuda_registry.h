// Entry points of the CUDA backend for backends/registry.cpp.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "lantern/lantern.h"

namespace lantern {

// The CUDA backend on device `index`; throws Error(Backend) when there is no
// such device or it fails to initialise.
std::unique_ptr<Backend> make_cuda_backend(int index);
// CUDA devices present (empty when there is no driver or device).
std::vector<DeviceInfo> list_cuda_devices();

}  // namespace lantern
