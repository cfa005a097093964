// The backends built into this binary. Adding a backend is adding its folder
// and one entry to the table in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "lantern/lantern.h"

namespace lantern {

struct BackendFactory {
    const char* name;
    // Creates the backend on device `index`; throws Error(Backend) when the
    // device is absent or fails to initialise.
    std::unique_ptr<Backend> (*create)(int index);
    // Devices present (empty when the driver or platform is missing).
    std::vector<DeviceInfo> (*devices)();
};

// GPU backends compiled in, in order of preference for "auto".
const std::vector<BackendFactory>& gpu_backend_factories();

// The named GPU backend on a device; Error(Unsupported) when not built in.
std::unique_ptr<Backend> create_gpu_backend(const std::string& name, int index);

}  // namespace lantern
