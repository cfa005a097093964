// Entry points of the OpenCL backend for backends/registry.cpp.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "lantern/lantern.h"

namespace lantern {

// The backend on device `index`: the devices of all platforms flattened in
// platform order (see backends/opencl/device.h; LANTERN_OPENCL_PLATFORM and
// LANTERN_OPENCL_DEVICE override). Throws Error(Backend) when there is none.
std::unique_ptr<Backend> make_opencl_backend(int index);
// Every OpenCL device with its memory, compute units and extensions.
std::vector<DeviceInfo> list_opencl_devices();

}  // namespace lantern
