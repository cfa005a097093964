// Helpers of the CUDA tests: the shared CUDA backend (created once per
// process); op_harness.h's CaseLeaves builds their extra cases.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "op_harness.h"

namespace lantern::test {

// The CUDA backend on device 0, or null when none is built in or present.
// Created once; when a present device fails to start, every call throws that
// failure again (a test then fails with it instead of skipping).
inline Backend* cuda_backend() {
    static std::string failure;
    static std::unique_ptr<Backend> backend = [] {
        std::unique_ptr<Backend> b;
        for (const BackendFactory& f : gpu_backend_factories()) {
            if (std::string(f.name) != "cuda" || f.devices().empty()) continue;
            try {
                b = f.create(0);
            } catch (const std::exception& e) {
                failure = e.what();
            }
        }
        return b;
    }();
    if (!failure.empty()) throw std::runtime_error("CUDA backend failed to start: " + failure);
    return backend.get();
}

}  // namespace lantern::test
