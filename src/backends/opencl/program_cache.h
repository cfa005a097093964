// OpenCL programs of the backend: one per kernel file, built for the device
// on first use and kept, with their kernel objects.
//
// Build options: OpenCL C 1.2, fast math (-cl-mad-enable
// -cl-fast-relaxed-math; LANTERN_OPENCL_FAST_MATH=0 turns it off for
// debugging) and defines from the device's limits and extensions (reduction
// and matrix-vector work-group sizes, subgroups, inline PTX on NVIDIA). A
// program that fails with the device's extensions is built again without
// them; one that still fails is logged once and reported unavailable, so its
// ops fall back to the CPU (never a kernel that silently does nothing).
//
// Built binaries are kept on disk, keyed by platform, device, driver, build
// options and source text: LANTERN_OPENCL_CACHE_DIR, else
// $XDG_CACHE_HOME/lantern/opencl, else ~/.cache/lantern/opencl;
// LANTERN_OPENCL_CACHE_DIR=off keeps nothing.
//
// Tuning: LANTERN_OPENCL_MV_WG, LANTERN_OPENCL_MV_TPR, LANTERN_OPENCL_MV_RPT and
// LANTERN_OPENCL_MV_U set the one-row matrix-vector kernels' group size
// (default 256), work-items per row slot (32), rows per slot (2) and blocks
// per work-item loaded ahead (4); LANTERN_OPENCL_MVG_RPT and LANTERN_OPENCL_MVA_RPT
// the gated and add + RMSNorm ones' rows per slot (4, 1). Test hooks: LANTERN_OPENCL_FAIL=<file>[,<file>...] breaks those programs'
// builds on purpose; LANTERN_OPENCL_MMA_EMULATE=1 builds the NVIDIA tensor-core
// matrix kernels with the mma emulated, on any device.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backends/opencl/cl_api.h"
#include "backends/opencl/device.h"

namespace lantern::ocl {

// One program per kernel file (kernels/<name>.cl).
enum class ProgramId : uint8_t { Elementwise, Norm, Rope, Attention, Quant, Matvec, Matmul, MatmulNv, Moe, Count };
constexpr size_t kProgramCount = static_cast<size_t>(ProgramId::Count);
const char* program_file(ProgramId id);

struct BuildConfig {
    bool fast_math = true;
    std::string cache_dir;           // empty: no disk cache
    std::vector<std::string> fail;   // kernel files whose build is broken on purpose
    bool mma_emulate = false;

    static BuildConfig from_env();
};

// Work-group sizes the kernels are compiled for (from the device's limits).
struct LaunchShape {
    size_t reduction = 256;  // LT_RED_WG: norms, softmax, decode attention
    // Decode attention splits long ranges into groups (attention.cl): about
    // this many groups a launch (two per compute unit), split_min cells each
    // at least.
    size_t attn_groups = 64;
    size_t attn_split_min = 128;
    // Prompt attention splits a tile's range the same way, about this many
    // groups a launch (32 per compute unit: on the H200 with NVIDIA's
    // OpenCL, pp512 at depth 4,096 gained 6-30% over 8 per unit).
    size_t prefill_groups = 1024;
    // One-row matrix-vector kernels of block-32 weights: group size,
    // work-items per row slot, rows per slot, blocks per work-item and row
    // loaded ahead; mv_rows() rows per group. The gated and add + RMSNorm
    // ones hold 32 rows per group (mvg_wg(), mva_wg() work-items).
    size_t mv_wg = 256;      // LT_MV_WG
    size_t mv_tpr = 32;      // LT_MV_TPR
    size_t mv_rpt = 2;       // LT_MV_RPT
    size_t mv_u = 4;         // LT_MV_U
    size_t mvg_rpt = 4;      // LT_MVG_RPT: gate and up rows per slot
    size_t mvg_u = 2;        // LT_MVG_U
    size_t mva_rpt = 1;      // LT_MVA_RPT
    size_t mv8_tpr = 8;      // LT_MV8_TPR: 2..8 rows, groups of 32 rows
    size_t mv_rows() const { return mv_wg / mv_tpr * mv_rpt; }
    size_t mvg_wg() const { return 32 / mvg_rpt * mv_tpr; }
    size_t mva_wg() const { return 32 / mva_rpt * mv_tpr; }
};

class ProgramCache {
public:
    ProgramCache(cl_context context, const DeviceCaps& caps, BuildConfig config);
    ProgramCache(const ProgramCache&) = delete;
    ProgramCache& operator=(const ProgramCache&) = delete;

    // The built program, or null when it cannot be built (logged once).
    cl_program program(ProgramId id);
    bool available(ProgramId id) { return program(id) != nullptr; }

    // The program's shared kernel object (set its arguments right before each
    // enqueue). Precondition: available(id).
    cl_kernel kernel(ProgramId id, const char* name);
    // A kernel object of its own, for a recording that keeps its arguments.
    KernelHandle new_kernel(ProgramId id, const char* name);

    const LaunchShape& shape() const { return shape_; }
    const BuildConfig& config() const { return config_; }
    // Whether the tensor-core matrix kernels are built for real PTX (not emulated).
    bool native_mma() const { return caps_.nvidia && !config_.mma_emulate; }

    struct Counters {
        int from_source = 0;
        int from_disk = 0;
        int failed = 0;
    };
    const Counters& counters() const { return counters_; }

private:
    struct Slot {
        bool tried = false;
        ProgramHandle program;
    };
    std::string options(ProgramId id, bool with_extensions) const;
    ProgramHandle build(ProgramId id, const std::string& source, const std::string& options, std::string& log);
    ProgramHandle load_binary(const std::string& path, const std::string& options);
    void store_binary(cl_program program, const std::string& path);
    std::string cache_path(ProgramId id, const std::string& source, const std::string& options) const;

    cl_context context_;
    DeviceCaps caps_;
    BuildConfig config_;
    LaunchShape shape_;
    std::array<Slot, kProgramCount> slots_{};
    std::map<std::pair<ProgramId, std::string>, KernelHandle> kernels_;
    Counters counters_;
};

}  // namespace lantern::ocl
