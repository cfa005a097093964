#include "backends/opencl/program_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "backends/opencl/embedded_sources.h"

namespace lantern::ocl {
namespace {

constexpr const char* kFiles[kProgramCount] = {"elementwise", "norm", "rope", "attention", "quant",
                                               "matvec", "matmul", "matmul_nv", "moe"};

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ull;
    }
    return h;
}

std::string env_string(const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
}

size_t floor_pow2(size_t x) {
    size_t p = 1;
    while (p * 2 <= x) p *= 2;
    return p;
}

// The first lines of a build log, for the one message a failure gets.
std::string head_lines(const std::string& log, int n) {
    std::string out;
    std::istringstream in(log);
    std::string line;
    while (n-- > 0 && std::getline(in, line)) out += "    " + line + "\n";
    return out;
}

}  // namespace

const char* program_file(ProgramId id) { return kFiles[static_cast<size_t>(id)]; }

BuildConfig BuildConfig::from_env() {
    BuildConfig c;
    c.fast_math = env_string("LANTERN_OPENCL_FAST_MATH") != "0";
    c.mma_emulate = env_string("LANTERN_OPENCL_MMA_EMULATE") == "1";
    std::string dir = env_string("LANTERN_OPENCL_CACHE_DIR");
    if (dir.empty()) {
        const std::string xdg = env_string("XDG_CACHE_HOME");
        const std::string home = env_string("HOME");
        if (!xdg.empty()) {
            dir = xdg + "/lantern/opencl";
        } else if (!home.empty()) {
            dir = home + "/.cache/lantern/opencl";
        }
    } else if (dir == "off") {
        dir.clear();
    }
    c.cache_dir = dir;
    std::stringstream fail(env_string("LANTERN_OPENCL_FAIL"));
    std::string item;
    while (std::getline(fail, item, ',')) {
        if (!item.empty()) c.fail.push_back(item);
    }
    return c;
}

ProgramCache::ProgramCache(cl_context context, const DeviceCaps& caps, BuildConfig config)
    : context_(context), caps_(caps), config_(std::move(config)) {
    const size_t max_wg = caps_.max_work_group > 0 ? caps_.max_work_group : 64;
    shape_.reduction = std::min<size_t>(256, floor_pow2(max_wg));
    shape_.mv8_tpr = std::max<size_t>(1, std::min<size_t>(8, floor_pow2(max_wg) / 32));
    // Tuning knobs (powers of two): group size 32..1024, work-items per row
    // slot 1..256, rows per slot 1..16, blocks loaded ahead 1..16.
    auto knob = [](const char* name, size_t lo, size_t hi, size_t fallback) {
        const std::string v = env_string(name);
        if (v.empty()) return fallback;
        return std::clamp<size_t>(floor_pow2(static_cast<size_t>(std::max(1, std::atoi(v.c_str())))), lo, hi);
    };
    const size_t wg_limit = floor_pow2(max_wg);
    shape_.mv_wg = std::min(knob("LANTERN_OPENCL_MV_WG", 32, 1024, 256), wg_limit);
    shape_.mv_tpr = std::min(knob("LANTERN_OPENCL_MV_TPR", 1, 256, 32), shape_.mv_wg);
    shape_.mv_rpt = knob("LANTERN_OPENCL_MV_RPT", 1, 16, 2);
    shape_.mv_u = knob("LANTERN_OPENCL_MV_U", 1, 16, 4);
    shape_.mvg_u = std::max<size_t>(1, shape_.mv_u / 2);
    // Groups of 32 rows: 32 / rpt slots of mv_tpr work-items, within the limit.
    auto rows_per_slot = [&](size_t rpt) {
        rpt = std::min<size_t>(rpt, 32);
        while (rpt < 32 && 32 / rpt * shape_.mv_tpr > wg_limit) rpt *= 2;
        return rpt;
    };
    // Gated: 4 rows of each matrix per slot (256 work-items; groups of 512
    // made PoCL fault in mvs_glu_*). Add + RMSNorm: one row per slot (1024
    // work-items: the 4096-row products have only 128 groups).
    shape_.mvg_rpt = rows_per_slot(knob("LANTERN_OPENCL_MVG_RPT", 1, 32, 4));
    shape_.mva_rpt = rows_per_slot(knob("LANTERN_OPENCL_MVA_RPT", 1, 32, 1));
    shape_.attn_groups = knob("LANTERN_OPENCL_ATTN_GROUPS", 1, 4096, floor_pow2(std::max(1u, caps_.compute_units) * 2));
    shape_.attn_split_min = knob("LANTERN_OPENCL_ATTN_SPLIT_MIN", 1, 4096, 128);
    shape_.prefill_groups =
        knob("LANTERN_OPENCL_PREFILL_GROUPS", 1, 65536, floor_pow2(std::max(1u, caps_.compute_units) * 32));
}

std::string ProgramCache::options(ProgramId id, bool with_extensions) const {
    std::string o = "-cl-std=CL1.2";
    if (config_.fast_math) o += " -cl-mad-enable -cl-fast-relaxed-math";
    o += " -DLT_RED_WG=" + std::to_string(shape_.reduction);
    o += " -DLT_MV_WG=" + std::to_string(shape_.mv_wg) + " -DLT_MV_TPR=" + std::to_string(shape_.mv_tpr) + " -DLT_MV_RPT=" + std::to_string(shape_.mv_rpt) +
         " -DLT_MV_U=" + std::to_string(shape_.mv_u) + " -DLT_MVG_RPT=" + std::to_string(shape_.mvg_rpt) +
         " -DLT_MVG_U=" + std::to_string(shape_.mvg_u) + " -DLT_MVA_RPT=" + std::to_string(shape_.mva_rpt) +
         " -DLT_MV8_TPR=" + std::to_string(shape_.mv8_tpr);
    if (id == ProgramId::MatmulNv && config_.mma_emulate) o += " -DLT_MMA_EMULATE=1";
    if (with_extensions) {
        if (caps_.subgroups()) {
            // Subgroup built-ins need OpenCL C 2.0 where the device has it.
            if (caps_.subgroups_khr && caps_.c_major >= 2) o.replace(0, 13, caps_.c_major >= 3 ? "-cl-std=CL3.0" : "-cl-std=CL2.0");
            o += " -DLT_SUBGROUPS=1";
        }
        if (caps_.qcom_subgroup_size) o += " -DLT_QCOM_SG=1";
        if (caps_.nvidia) o += " -DLT_NV_PTX=1";
    }
    return o;
}

std::string ProgramCache::cache_path(ProgramId id, const std::string& source, const std::string& options) const {
    if (config_.cache_dir.empty()) return "";
    uint64_t h = fnv1a(caps_.platform_name + "\n" + caps_.platform_version + "\n" + caps_.name + "\n" + caps_.version +
                       "\n" + caps_.driver + "\n" + options + "\n");
    h = fnv1a(source, h);
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
    return config_.cache_dir + "/" + program_file(id) + "-" + hex + ".bin";
}

ProgramHandle ProgramCache::build(ProgramId id, const std::string& source, const std::string& options,
                                  std::string& log) {
    const char* text = source.c_str();
    const size_t size = source.size();
    cl_int err = CL_SUCCESS;
    ProgramHandle p(clCreateProgramWithSource(context_, 1, &text, &size, &err));
    if (err != CL_SUCCESS) {
        log = "clCreateProgramWithSource: " + error_name(err);
        return {};
    }
    err = clBuildProgram(p.get(), 1, &caps_.device, options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) {
        size_t n = 0;
        clGetProgramBuildInfo(p.get(), caps_.device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
        std::string text_log(n, '\0');
        if (n > 0) clGetProgramBuildInfo(p.get(), caps_.device, CL_PROGRAM_BUILD_LOG, n, text_log.data(), nullptr);
        log = std::string(program_file(id)) + ": " + error_name(err) + "\n" + text_log;
        return {};
    }
    return p;
}

ProgramHandle ProgramCache::load_binary(const std::string& path, const std::string& options) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.empty()) return {};
    const unsigned char* ptr = bytes.data();
    const size_t size = bytes.size();
    cl_int status = CL_SUCCESS, err = CL_SUCCESS;
    ProgramHandle p(clCreateProgramWithBinary(context_, 1, &caps_.device, &size, &ptr, &status, &err));
    if (err != CL_SUCCESS || status != CL_SUCCESS ||
        clBuildProgram(p.get(), 1, &caps_.device, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
        std::error_code ec;
        std::filesystem::remove(path, ec);  // stale or foreign: rebuild from source
        return {};
    }
    return p;
}

void ProgramCache::store_binary(cl_program program, const std::string& path) {
    size_t size = 0;
    if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) != CL_SUCCESS || size == 0) {
        return;
    }
    std::vector<unsigned char> bytes(size);
    unsigned char* ptr = bytes.data();
    if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) != CL_SUCCESS) return;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    // Write then rename, so that concurrent processes never read half a file.
    const std::string tmp = path + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary);
        if (!out) return;
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        if (!out) return;
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

cl_program ProgramCache::program(ProgramId id) {
    Slot& slot = slots_[static_cast<size_t>(id)];
    if (slot.tried) return slot.program.get();
    slot.tried = true;

    const char* file = program_file(id);
    if (id == ProgramId::MatmulNv && !caps_.nvidia && !config_.mma_emulate) return nullptr;  // PTX only
    const EmbeddedSource* common = find_embedded_source("common");
    const EmbeddedSource* body = find_embedded_source(file);
    if (common == nullptr || body == nullptr) {
        std::fprintf(stderr, "lantern opencl: kernel file %s.cl is not embedded; its ops run on the CPU\n", file);
        ++counters_.failed;
        return nullptr;
    }
    std::string source(common->text, common->size);
    source += "\n";
    const bool forced_failure = std::find(config_.fail.begin(), config_.fail.end(), file) != config_.fail.end();
    if (forced_failure) source += "#error forced build failure (LANTERN_OPENCL_FAIL)\n";
    source.append(body->text, body->size);

    std::string log;
    for (bool with_extensions : {true, false}) {
        const std::string opts = options(id, with_extensions);
        if (!with_extensions && opts == options(id, true)) break;  // nothing left to drop
        if (!with_extensions && id == ProgramId::MatmulNv && !config_.mma_emulate) break;
        const std::string path = forced_failure ? "" : cache_path(id, source, opts);
        if (!path.empty()) {
            slot.program = load_binary(path, opts);
            if (slot.program) {
                ++counters_.from_disk;
                return slot.program.get();
            }
        }
        slot.program = build(id, source, opts, log);
        if (slot.program) {
            ++counters_.from_source;
            if (!path.empty()) store_binary(slot.program.get(), path);
            return slot.program.get();
        }
    }
    ++counters_.failed;
    std::fprintf(stderr, "lantern opencl: building kernels/%s.cl for %s failed; its ops run on the CPU\n%s", file,
                 caps_.name.c_str(), head_lines(log, 12).c_str());
    return nullptr;
}

cl_kernel ProgramCache::kernel(ProgramId id, const char* name) {
    auto key = std::make_pair(id, std::string(name));
    auto it = kernels_.find(key);
    if (it != kernels_.end()) return it->second.get();
    KernelHandle k = new_kernel(id, name);
    cl_kernel raw = k.get();
    kernels_.emplace(std::move(key), std::move(k));
    return raw;
}

KernelHandle ProgramCache::new_kernel(ProgramId id, const char* name) {
    cl_program p = program(id);
    if (p == nullptr) fail(CL_INVALID_PROGRAM, (std::string("kernel ") + name + " of an unavailable program").c_str());
    cl_int err = CL_SUCCESS;
    KernelHandle k(clCreateKernel(p, name, &err));
    check(err, (std::string("clCreateKernel ") + name).c_str());
    return k;
}

}  // namespace lantern::ocl
