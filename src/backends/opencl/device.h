// OpenCL devices: enumeration, what each offers, and which one a backend
// index names.
//
// Device index: the devices of all platforms flattened in the order the ICD
// loader lists platforms (clGetPlatformIDs) and each platform lists its
// devices (clGetDeviceIDs, all types). `lantern devices` prints them with
// their index. LANTERN_OPENCL_PLATFORM=p (and LANTERN_OPENCL_DEVICE=d, within
// that platform, default 0) override the index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/opencl/cl_api.h"
#include "lantern/lantern.h"

namespace lantern::ocl {

struct DeviceCaps {
    cl_platform_id platform = nullptr;
    cl_device_id device = nullptr;
    int index = 0;  // flattened index (see above)

    std::string platform_name, platform_version;
    std::string name, vendor, version, driver, extensions;
    int c_major = 1, c_minor = 2;  // highest OpenCL C version the device compiles

    uint64_t global_mem = 0;  // bytes
    uint64_t max_alloc = 0;   // largest single buffer
    uint64_t local_mem = 0;   // per work-group
    unsigned compute_units = 0;
    size_t max_work_group = 0;
    unsigned mem_base_align = 0;  // bytes

    bool fp16 = false;                // cl_khr_fp16 (not required: halves go through vload_half)
    bool fp64 = false;                // cl_khr_fp64
    bool subgroups_khr = false;       // cl_khr_subgroups
    bool subgroups_intel = false;     // cl_intel_subgroups
    bool qcom_subgroup_size = false;  // cl_qcom_reqd_sub_group_size
    bool command_buffer = false;      // cl_khr_command_buffer
    bool command_buffer_simultaneous = false;
    bool nvidia = false;              // NVIDIA's driver: inline PTX (dp4a, mma) available

    bool has_extension(const char* ext) const;
    bool subgroups() const { return subgroups_khr || subgroups_intel; }
    // One line for logs and `lantern devices`: memory, compute units, version.
    std::string summary() const;
};

// Every device of every platform, in index order; empty without a driver.
std::vector<DeviceCaps> enumerate_devices();

// The device `index` names, after the environment overrides; throws
// Error(Backend) when there is none.
DeviceCaps select_device(int index);

// For `lantern devices`.
std::vector<DeviceInfo> device_infos();

}  // namespace lantern::ocl
