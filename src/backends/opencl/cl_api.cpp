#include "backends/opencl/cl_api.h"

#include "lantern/error.h"

namespace lantern::ocl {

std::string error_name(cl_int err) {
    switch (err) {
#define LT_CASE(x) \
    case x: return #x;
        LT_CASE(CL_DEVICE_NOT_FOUND)
        LT_CASE(CL_DEVICE_NOT_AVAILABLE)
        LT_CASE(CL_COMPILER_NOT_AVAILABLE)
        LT_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE)
        LT_CASE(CL_OUT_OF_RESOURCES)
        LT_CASE(CL_OUT_OF_HOST_MEMORY)
        LT_CASE(CL_PROFILING_INFO_NOT_AVAILABLE)
        LT_CASE(CL_MEM_COPY_OVERLAP)
        LT_CASE(CL_BUILD_PROGRAM_FAILURE)
        LT_CASE(CL_MAP_FAILURE)
        LT_CASE(CL_INVALID_VALUE)
        LT_CASE(CL_INVALID_DEVICE_TYPE)
        LT_CASE(CL_INVALID_PLATFORM)
        LT_CASE(CL_INVALID_DEVICE)
        LT_CASE(CL_INVALID_CONTEXT)
        LT_CASE(CL_INVALID_QUEUE_PROPERTIES)
        LT_CASE(CL_INVALID_COMMAND_QUEUE)
        LT_CASE(CL_INVALID_HOST_PTR)
        LT_CASE(CL_INVALID_MEM_OBJECT)
        LT_CASE(CL_INVALID_BINARY)
        LT_CASE(CL_INVALID_BUILD_OPTIONS)
        LT_CASE(CL_INVALID_PROGRAM)
        LT_CASE(CL_INVALID_PROGRAM_EXECUTABLE)
        LT_CASE(CL_INVALID_KERNEL_NAME)
        LT_CASE(CL_INVALID_KERNEL)
        LT_CASE(CL_INVALID_ARG_INDEX)
        LT_CASE(CL_INVALID_ARG_VALUE)
        LT_CASE(CL_INVALID_ARG_SIZE)
        LT_CASE(CL_INVALID_KERNEL_ARGS)
        LT_CASE(CL_INVALID_WORK_DIMENSION)
        LT_CASE(CL_INVALID_WORK_GROUP_SIZE)
        LT_CASE(CL_INVALID_WORK_ITEM_SIZE)
        LT_CASE(CL_INVALID_GLOBAL_OFFSET)
        LT_CASE(CL_INVALID_EVENT_WAIT_LIST)
        LT_CASE(CL_INVALID_EVENT)
        LT_CASE(CL_INVALID_OPERATION)
        LT_CASE(CL_INVALID_BUFFER_SIZE)
        LT_CASE(CL_INVALID_GLOBAL_WORK_SIZE)
#undef LT_CASE
        default: return "OpenCL error " + std::to_string(err);
    }
}

void fail(cl_int err, const char* what) {
    const std::string msg = std::string("opencl: ") + what + " failed: " + error_name(err);
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE) {
        throw Error(ErrorCode::OutOfMemory, msg);
    }
    throw Error(ErrorCode::Backend, msg);
}

bool CommandBufferApi::load(cl_platform_id platform) {
    auto get = [&](const char* name) { return clGetExtensionFunctionAddressForPlatform(platform, name); };
    create = reinterpret_cast<decltype(create)>(get("clCreateCommandBufferKHR"));
    finalize = reinterpret_cast<decltype(finalize)>(get("clFinalizeCommandBufferKHR"));
    release = reinterpret_cast<decltype(release)>(get("clReleaseCommandBufferKHR"));
    enqueue = reinterpret_cast<decltype(enqueue)>(get("clEnqueueCommandBufferKHR"));
    nd_range = reinterpret_cast<decltype(nd_range)>(get("clCommandNDRangeKernelKHR"));
    if (create && finalize && release && enqueue && nd_range) return true;
    *this = CommandBufferApi{};
    return false;
}

}  // namespace lantern::ocl
