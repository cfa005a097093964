// Shared helpers for the test suite: where test data lives, random inputs.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace lantern::test {

inline std::filesystem::path source_dir() {
    if (const char* env = std::getenv("LANTERN_SOURCE_DIR")) return env;
    return LANTERN_SOURCE_DIR;
}

// ../shared/testdata beside the checkout (LANTERN_TESTDATA overrides).
inline std::filesystem::path testdata_dir() {
    if (const char* env = std::getenv("LANTERN_TESTDATA")) return env;
    return source_dir().parent_path() / "shared" / "testdata";
}

// The default model, fetched by scripts/setup.sh (LANTERN_MODEL overrides).
inline std::filesystem::path default_model_path() {
    if (const char* env = std::getenv("LANTERN_MODEL")) return env;
    return source_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Gemma 3 270M Q4_K_M, fetched by scripts/setup.sh (LANTERN_GEMMA3_MODEL overrides).
inline std::filesystem::path gemma3_model_path() {
    if (const char* env = std::getenv("LANTERN_GEMMA3_MODEL")) return env;
    return source_dir() / "models" / "gemma-3-270m-q4_k_m.gguf";
}

inline std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() /
           ("lantern-test-" + std::to_string(::getpid()) + "-" + name);
}

// Token ids as "1,2,3" (the Python reference's --tokens).
inline std::string comma_list(const std::vector<int32_t>& ids) {
    std::string list;
    for (int32_t t : ids) {
        if (!list.empty()) list += ',';
        list += std::to_string(t);
    }
    return list;
}

// Uniform floats in [lo, hi), never all zero.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// The gap between the two largest logits (a near tie when small).
inline float top2_margin(const std::vector<float>& l) {
    float a = -INFINITY, b = -INFINITY;
    for (float v : l) {
        if (v > a) {
            b = a;
            a = v;
        } else if (v > b) {
            b = v;
        }
    }
    return a - b;
}

// Sets an environment variable for a scope (restores or unsets it after).
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) {
            had_ = true;
            old_ = old;
        }
        setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (had_) {
            setenv(name_, old_.c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::string old_;
    bool had_ = false;
};

}  // namespace lantern::test
