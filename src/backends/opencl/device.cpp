#include "backends/opencl/device.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "lantern/error.h"

namespace lantern::ocl {
namespace {

std::string platform_string(cl_platform_id p, cl_platform_info what) {
    size_t n = 0;
    if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
    std::string s(n, '\0');
    clGetPlatformInfo(p, what, n, s.data(), nullptr);
    while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
    return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
    size_t n = 0;
    if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
    std::string s(n, '\0');
    clGetDeviceInfo(d, what, n, s.data(), nullptr);
    while (!s.empty() && (s.back() == '\0' || s.back() == ' ')) s.pop_back();
    return s;
}

template <class T>
T device_value(cl_device_id d, cl_device_info what, T fallback = T{}) {
    T v{};
    return clGetDeviceInfo(d, what, sizeof(T), &v, nullptr) == CL_SUCCESS ? v : fallback;
}

// "OpenCL C 1.2 ..." -> (1, 2)
void parse_c_version(const std::string& s, int& major, int& minor) {
    int a = 1, b = 2;
    if (std::sscanf(s.c_str(), "OpenCL C %d.%d", &a, &b) == 2) {
        major = a;
        minor = b;
    }
}

DeviceCaps query(cl_platform_id p, cl_device_id d, int index) {
    DeviceCaps c;
    c.platform = p;
    c.device = d;
    c.index = index;
    c.platform_name = platform_string(p, CL_PLATFORM_NAME);
    c.platform_version = platform_string(p, CL_PLATFORM_VERSION);
    c.name = device_string(d, CL_DEVICE_NAME);
    c.vendor = device_string(d, CL_DEVICE_VENDOR);
    c.version = device_string(d, CL_DEVICE_VERSION);
    c.driver = device_string(d, CL_DRIVER_VERSION);
    // Space-delimited at both ends, so that " name " finds whole names (appended:
    // " " + string trips GCC 12's false -Wrestrict).
    c.extensions = std::string(" ").append(device_string(d, CL_DEVICE_EXTENSIONS)).append(" ");
    parse_c_version(device_string(d, CL_DEVICE_OPENCL_C_VERSION), c.c_major, c.c_minor);
    c.global_mem = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
    c.max_alloc = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    c.local_mem = device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE);
    c.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
    c.max_work_group = device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
    c.mem_base_align = device_value<cl_uint>(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
    c.fp16 = c.has_extension("cl_khr_fp16");
    c.fp64 = c.has_extension("cl_khr_fp64");
    c.subgroups_khr = c.has_extension("cl_khr_subgroups");
    c.subgroups_intel = c.has_extension("cl_intel_subgroups");
    c.qcom_subgroup_size = c.has_extension("cl_qcom_reqd_sub_group_size");
    c.command_buffer = c.has_extension("cl_khr_command_buffer");
    if (c.command_buffer) {
        const cl_ulong caps = device_value<cl_ulong>(d, kDeviceCommandBufferCapabilities);
        c.command_buffer_simultaneous = (caps & kCommandBufferCapabilitySimultaneousUse) != 0;
    }
    c.nvidia = c.vendor.find("NVIDIA") != std::string::npos || c.platform_name.find("NVIDIA") != std::string::npos;
    return c;
}

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    return (end != nullptr && *end == '\0') ? static_cast<int>(x) : fallback;
}

}  // namespace

bool DeviceCaps::has_extension(const char* ext) const {
    return extensions.find(std::string(" ") + ext + " ") != std::string::npos;
}

std::string DeviceCaps::summary() const {
    std::ostringstream s;
    s << (global_mem >> 20) << " MiB, " << compute_units << " compute units, max work-group " << max_work_group
      << ", local memory " << (local_mem >> 10) << " KiB; " << version << ", driver " << driver << ", OpenCL C "
      << c_major << "." << c_minor << "; platform " << platform_name;
    return s.str();
}

std::vector<DeviceCaps> enumerate_devices() {
    std::vector<DeviceCaps> out;
    cl_uint np = 0;
    if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return out;
    std::vector<cl_platform_id> platforms(np);
    if (clGetPlatformIDs(np, platforms.data(), nullptr) != CL_SUCCESS) return out;
    for (cl_platform_id p : platforms) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
        std::vector<cl_device_id> devices(nd);
        if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, devices.data(), nullptr) != CL_SUCCESS) continue;
        for (cl_device_id d : devices) out.push_back(query(p, d, static_cast<int>(out.size())));
    }
    return out;
}

DeviceCaps select_device(int index) {
    const std::vector<DeviceCaps> all = enumerate_devices();
    if (all.empty()) throw Error(ErrorCode::Backend, "opencl: no OpenCL platform or device found");
    // Platforms in order, as enumerate_devices met them.
    std::vector<cl_platform_id> seen;
    for (const DeviceCaps& c : all) {
        if (seen.empty() || seen.back() != c.platform) seen.push_back(c.platform);
    }
    int platform = env_int("LANTERN_OPENCL_PLATFORM", -1);
    const std::string by_name = std::getenv("LANTERN_OPENCL_PLATFORM") != nullptr ? std::getenv("LANTERN_OPENCL_PLATFORM") : "";
    if (platform < 0 && !by_name.empty()) {  // a part of the platform's name
        for (const DeviceCaps& c : all) {
            if (c.platform_name.find(by_name) == std::string::npos) continue;
            for (size_t i = 0; i < seen.size(); ++i) {
                if (seen[i] == c.platform) platform = static_cast<int>(i);
            }
            break;
        }
        if (platform < 0) throw Error(ErrorCode::Backend, "opencl: no platform named like '" + by_name + "' (LANTERN_OPENCL_PLATFORM)");
    }
    if (platform >= 0) {
        const int device = env_int("LANTERN_OPENCL_DEVICE", 0);
        if (platform >= static_cast<int>(seen.size())) {
            throw Error(ErrorCode::Backend, "opencl: LANTERN_OPENCL_PLATFORM=" + std::to_string(platform) + " but only " +
                                                std::to_string(seen.size()) + " platform(s) have devices");
        }
        int k = 0;
        for (const DeviceCaps& c : all) {
            if (c.platform != seen[static_cast<size_t>(platform)]) continue;
            if (k++ == device) return c;
        }
        throw Error(ErrorCode::Backend, "opencl: platform " + std::to_string(platform) + " has no device " +
                                            std::to_string(device) + " (LANTERN_OPENCL_DEVICE)");
    }
    if (index < 0 || index >= static_cast<int>(all.size())) {
        throw Error(ErrorCode::Backend, "opencl: device " + std::to_string(index) + " does not exist (" +
                                            std::to_string(all.size()) + " device(s); see `lantern devices`)");
    }
    return all[static_cast<size_t>(index)];
}

std::vector<DeviceInfo> device_infos() {
    std::vector<DeviceInfo> out;
    for (const DeviceCaps& c : enumerate_devices()) {
        DeviceInfo info;
        info.backend = "opencl";
        info.index = c.index;
        info.name = c.name;
        std::string ext = c.extensions;
        while (!ext.empty() && ext.front() == ' ') ext.erase(ext.begin());
        while (!ext.empty() && ext.back() == ' ') ext.pop_back();
        info.details = c.summary() + "\n  extensions: " + ext;
        out.push_back(std::move(info));
    }
    return out;
}

}  // namespace lantern::ocl
