// The OpenCL API as the backend uses it: headers at one target version,
// typed errors for failed calls, small RAII handles, and the entry points of
// cl_khr_command_buffer, which are looked up at run time (the ICD loader does
// not export extension functions).
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS  // clCreateCommandQueue, for OpenCL 1.2 platforms
#endif
#include <CL/cl.h>

#include <string>
#include <utility>

namespace lantern::ocl {

// Name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or its number.
std::string error_name(cl_int err);

// Throws Error(Backend) - or Error(OutOfMemory) for allocation failures -
// naming the call that failed. For driver faults the backend cannot go on from.
[[noreturn]] void fail(cl_int err, const char* what);
inline void check(cl_int err, const char* what) {
    if (err != CL_SUCCESS) fail(err, what);
}

// Owning handle of a cl_* object, released with its clRelease* function.
template <class T, cl_int (*Release)(T)>
class Handle {
public:
    Handle() = default;
    explicit Handle(T h) : h_(h) {}
    ~Handle() { reset(); }
    Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    Handle& operator=(Handle&& o) noexcept {
        if (this != &o) {
            reset();
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;

    T get() const { return h_; }
    explicit operator bool() const { return h_ != nullptr; }
    void reset(T h = nullptr) {
        if (h_ != nullptr) Release(h_);
        h_ = h;
    }

private:
    T h_ = nullptr;
};

using ContextHandle = Handle<cl_context, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clReleaseCommandQueue>;
using ProgramHandle = Handle<cl_program, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clReleaseKernel>;
using MemHandle = Handle<cl_mem, clReleaseMemObject>;
using EventHandle = Handle<cl_event, clReleaseEvent>;

// ---- cl_khr_command_buffer (provisional extension, version 0.9.x) -------------------
// Declared here rather than taken from the headers so that the build does not
// depend on the header version; only the calls the backend makes are listed.
// From 0.9.5 the properties argument of clCommandNDRangeKernelKHR is typed
// cl_command_properties_khr: both are cl_ulong-sized property lists.

using cl_command_buffer = struct _cl_command_buffer_khr*;
using cl_sync_point = cl_uint;
using cl_mutable_command = struct _cl_mutable_command_khr*;

constexpr cl_uint kDeviceCommandBufferCapabilities = 0x12A9;  // CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR
constexpr cl_ulong kCommandBufferCapabilitySimultaneousUse = 1 << 2;
constexpr cl_ulong kCommandBufferFlags = 0x1293;               // CL_COMMAND_BUFFER_FLAGS_KHR
constexpr cl_ulong kCommandBufferSimultaneousUse = 1 << 0;     // CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR

struct CommandBufferApi {
    cl_command_buffer(CL_API_CALL* create)(cl_uint, const cl_command_queue*, const cl_ulong*, cl_int*) = nullptr;
    cl_int(CL_API_CALL* finalize)(cl_command_buffer) = nullptr;
    cl_int(CL_API_CALL* release)(cl_command_buffer) = nullptr;
    cl_int(CL_API_CALL* enqueue)(cl_uint, cl_command_queue*, cl_command_buffer, cl_uint, const cl_event*,
                                 cl_event*) = nullptr;
    cl_int(CL_API_CALL* nd_range)(cl_command_buffer, cl_command_queue, const cl_ulong*, cl_kernel, cl_uint,
                                  const size_t*, const size_t*, const size_t*, cl_uint, const cl_sync_point*,
                                  cl_sync_point*, cl_mutable_command*) = nullptr;

    // Looks the entry points up on `platform`; false when any is missing.
    bool load(cl_platform_id platform);
    bool loaded() const { return create != nullptr; }
};

}  // namespace lantern::ocl
