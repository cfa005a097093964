// Helpers of the CUDA tests: the shared CUDA backend (created once per
// process), and a builder for op cases beyond the common harness's.
#pragma once

#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "core/half.h"
#include "op_harness.h"
#include "quant/quant.h"

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

// Leaves of an OpCase with random contents (as the harness makes them).
struct CaseLeaves {
    OpCase& c;
    std::mt19937 rng;

    Tensor* leaf(DType type, std::initializer_list<int64_t> ne, const char* name, float lo = -1.0f, float hi = 1.0f,
                 uint32_t flags = 0) {
        Tensor* t = c.graph.new_tensor(type, ne, name);
        t->flags |= flags;
        const int64_t n = t->n_elements();
        std::uniform_real_distribution<float> dist(lo, hi);
        std::vector<float> f(static_cast<size_t>(n));
        for (float& x : f) x = dist(rng);
        std::vector<uint8_t> bytes(t->nbytes());
        if (type == DType::F32) {
            std::memcpy(bytes.data(), f.data(), bytes.size());
        } else if (type == DType::F16) {
            for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_fp16(f[static_cast<size_t>(i)]);
        } else if (type == DType::BF16) {
            for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_bf16(f[static_cast<size_t>(i)]);
        } else {
            for (int64_t r = 0; r < t->n_rows(); ++r) {
                quant::quantize_row(type, f.data() + r * t->ne[0], bytes.data() + static_cast<size_t>(r) * t->row_bytes(),
                                    t->ne[0]);
            }
        }
        c.leaves.emplace_back(t, std::move(bytes));
        return t;
    }
    Tensor* weight(DType type, std::initializer_list<int64_t> ne, const char* name) {
        return leaf(type, ne, name, -1.0f, 1.0f, kTensorWeight);
    }
    Tensor* ints(const std::vector<int32_t>& v, const char* name) {
        Tensor* t = c.graph.new_tensor(DType::I32, {static_cast<int64_t>(v.size())}, name);
        std::vector<uint8_t> bytes(v.size() * 4);
        std::memcpy(bytes.data(), v.data(), bytes.size());
        c.leaves.emplace_back(t, std::move(bytes));
        return t;
    }
};

}  // namespace lantern::test
