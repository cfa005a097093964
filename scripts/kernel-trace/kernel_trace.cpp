// A CUPTI injection library for the device machine, where nsys cannot
// import its reports: with CUDA_INJECTION64_PATH pointing at it, the CUDA
// driver loads it into any process, and it records every kernel's start and
// end on the GPU clock (concurrent-kernel activity: graphs and programmatic
// dependent launches keep their overlap). At exit it writes one CSV line per
// kernel to $KERNEL_TRACE_OUT (default kernel_trace.csv):
//   start_ns,end_ns,grid_x,grid_y,grid_z,block_x,registers,name
// summarize.py turns the last decode steps into per-kernel times.
//
//   g++ -O2 -shared -fPIC -I/usr/local/cuda/include kernel_trace.cpp \
//       -L/usr/local/cuda/lib64 -lcupti -o libkernel_trace.so
#include <cupti.h>

#include <cstdio>
#include <cstdlib>

namespace {

FILE* g_out = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *size = size_t{32} << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
    *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    while (g_out != nullptr && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && rec->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        std::fprintf(g_out, "%llu,%llu,%d,%d,%d,%d,%u,%s\n", static_cast<unsigned long long>(k->start),
                     static_cast<unsigned long long>(k->end), k->gridX, k->gridY, k->gridZ, k->blockX,
                     static_cast<unsigned>(k->registersPerThread), k->name != nullptr ? k->name : "?");
    }
    std::free(buffer);
}

void flush_at_exit() {
    cuptiActivityFlushAll(1);
    if (g_out != nullptr) std::fclose(g_out);
    g_out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection() {
    const char* path = std::getenv("KERNEL_TRACE_OUT");
    g_out = std::fopen(path != nullptr ? path : "kernel_trace.csv", "w");
    if (g_out == nullptr) return 0;
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        std::fprintf(stderr, "kernel_trace: CUPTI activity tracing unavailable\n");
        return 0;
    }
    std::atexit(flush_at_exit);
    return 1;
}
