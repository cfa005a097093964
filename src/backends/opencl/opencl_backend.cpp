#include "backends/opencl/opencl_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backends/opencl/dispatch.h"
#include "backends/opencl/ops.h"
#include "backends/opencl/opencl_registry.h"
#include "backends/opencl/weight_layout.h"
#include "lantern/error.h"

namespace lantern::ocl {
namespace {

// A device buffer from the pool. Transfers are blocking and ordered after the
// backend's queued work (one in-order queue).
class ClBuffer final : public Buffer {
public:
    ClBuffer(OpenClBackend& b, std::unique_ptr<PoolBlock> block, size_t size)
        : Buffer(b, size, block->mem()), backend_(b), block_(std::move(block)) {}
    ~ClBuffer() override {
        // Kernels still queued may read this memory; the pool may hand it out
        // again at once, which the in-order queue keeps safe.
    }

    void write(size_t offset, const void* src, size_t n) override {
        if (n == 0) return;
        check(clEnqueueWriteBuffer(backend_.queue(), block_->mem(), CL_TRUE, offset, n, src, 0, nullptr, nullptr),
              "clEnqueueWriteBuffer");
    }
    void read(size_t offset, void* dst, size_t n) const override {
        if (n == 0) return;
        check(clEnqueueReadBuffer(backend_.queue(), block_->mem(), CL_TRUE, offset, n, dst, 0, nullptr, nullptr),
              "clEnqueueReadBuffer");
    }
    void fill(size_t offset, uint8_t value, size_t n) override {
        if (n == 0) return;
        // With the backend's own kernel where it was built (NVIDIA's
        // clEnqueueFillBuffer faulted on a buffer of over 2 GiB).
        ProgramCache& programs = backend_.programs();
        if (programs.available(ProgramId::Elementwise)) {
            cl_kernel k = programs.kernel(ProgramId::Elementwise, "fill_bytes");
            const cl_mem m = block_->mem();
            const cl_ulong off = offset, count = n;
            const cl_uint v = value;
            check(clSetKernelArg(k, 0, sizeof(m), &m), "clSetKernelArg");
            check(clSetKernelArg(k, 1, sizeof(off), &off), "clSetKernelArg");
            check(clSetKernelArg(k, 2, sizeof(count), &count), "clSetKernelArg");
            check(clSetKernelArg(k, 3, sizeof(v), &v), "clSetKernelArg");
            const size_t global = (n + 15) / 16;
            check(clEnqueueNDRangeKernel(backend_.queue(), k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr),
                  "clEnqueueNDRangeKernel (fill)");
        } else {
            check(clEnqueueFillBuffer(backend_.queue(), block_->mem(), &value, 1, offset, n, 0, nullptr, nullptr),
                  "clEnqueueFillBuffer");
        }
        check(clFinish(backend_.queue()), "clFinish");
    }

private:
    OpenClBackend& backend_;
    std::unique_ptr<PoolBlock> block_;
};

}  // namespace

Recording::~Recording() {
    if (command_buffer != nullptr && api != nullptr) api->release(command_buffer);
}

OpenClBackend::OpenClBackend(const DeviceCaps& caps) : caps_(caps), graphs_(GraphConfig::from_env()) {
    alignment_ = std::max<size_t>(256, caps_.mem_base_align);
    const char* fuse = std::getenv("LANTERN_OPENCL_FUSE");
    fusion_ = fuse == nullptr || std::string(fuse) != "0";
    const char* fuse_norm = std::getenv("LANTERN_OPENCL_FUSE_NORM");
    norm_fusion_ = fuse_norm == nullptr || std::string(fuse_norm) != "0";
    cl_int err = CL_SUCCESS;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(caps_.platform),
                                           0};
    context_.reset(clCreateContext(props, 1, &caps_.device, nullptr, nullptr, &err));
    check(err, "clCreateContext");
    // In-order, no profiling: every enqueue is ordered after the previous one.
    if (caps_.version.rfind("OpenCL 1.", 0) == 0) {
        queue_.reset(clCreateCommandQueue(context_.get(), caps_.device, 0, &err));
    } else {
        queue_.reset(clCreateCommandQueueWithProperties(context_.get(), caps_.device, nullptr, &err));
    }
    check(err, "clCreateCommandQueue");
    if (caps_.command_buffer) cb_api_.load(caps_.platform);
    pool_ = std::make_unique<MemoryPool>(context_.get(), caps_.max_alloc);
    programs_ = std::make_unique<ProgramCache>(context_.get(), caps_, BuildConfig::from_env());
    cache_ = std::make_unique<GraphCache<Recording>>(graphs_.capacity);
}

OpenClBackend::~OpenClBackend() {
    if (queue_) clFinish(queue_.get());
    cache_.reset();
    rope_tables_.clear();
    attn_counters_.reset();
    scratch_block_.reset();
}

std::string OpenClBackend::description() const {
    return caps_.name + " (OpenCL, " + caps_.platform_name + ", driver " + caps_.driver + ")";
}

std::unique_ptr<Buffer> OpenClBackend::alloc(size_t size, BufferKind kind) {
    // Weights stay until the model goes: exact size, no class rounding.
    std::unique_ptr<PoolBlock> block = pool_->acquire(size, kind == BufferKind::Weights);
    return std::make_unique<ClBuffer>(*this, std::move(block), size);
}

bool OpenClBackend::supports(const Tensor& node) const {
    const OpEntry<OpRun>* e = op_table().find(node.op);
    if (e == nullptr || (e->accepts != nullptr && !e->accepts(node))) return false;
    return e->run.ready(*programs_, node);
}

size_t OpenClBackend::weight_bytes(const Tensor& w) const { return stored_weight_bytes(w); }

void OpenClBackend::upload_weight(const Tensor& w, const void* host) {
    if (!is_block32(w.type)) {
        w.buffer->write(w.offset, host, w.nbytes());
        return;
    }
    const std::vector<uint8_t> bytes = repack_weight(w, host);
    w.buffer->write(w.offset, bytes.data(), bytes.size());
}

OpenClBackend::Scratch OpenClBackend::scratch(size_t bytes, std::vector<std::shared_ptr<PoolBlock>>& keep) {
    const size_t at = (scratch_used_ + 255) / 256 * 256;
    if (!scratch_block_ || at + bytes > scratch_block_->size()) {
        // A larger block; the old one lives on in `keep` while this step uses it.
        const size_t want = std::max(at + bytes, scratch_block_ ? 2 * scratch_block_->size() : size_t{1} << 20);
        if (scratch_block_) keep.push_back(scratch_block_);
        scratch_block_ = std::shared_ptr<PoolBlock>(pool_->acquire(want, false));
        scratch_used_ = 0;
        return scratch(bytes, keep);
    }
    if (keep.empty() || keep.back() != scratch_block_) keep.push_back(scratch_block_);
    scratch_used_ = at + bytes;
    return Scratch{scratch_block_->mem(), at};
}

cl_mem OpenClBackend::rope_table(int n_rot, float base, float freq_scale) {
    const auto key = std::make_tuple(n_rot, base, freq_scale);
    auto it = rope_tables_.find(key);
    if (it != rope_tables_.end()) return it->second->mem();
    std::vector<float> f(static_cast<size_t>(n_rot / 2));
    for (size_t i = 0; i < f.size(); ++i) {
        f[i] = static_cast<float>(freq_scale * std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / n_rot));
    }
    std::unique_ptr<PoolBlock> block = pool_->acquire(f.size() * sizeof(float), true);
    check(clEnqueueWriteBuffer(queue_.get(), block->mem(), CL_TRUE, 0, f.size() * sizeof(float), f.data(), 0, nullptr,
                               nullptr),
          "clEnqueueWriteBuffer (rope table)");
    cl_mem m = block->mem();
    rope_tables_.emplace(key, std::move(block));
    return m;
}

cl_mem OpenClBackend::attn_counters() {
    if (!attn_counters_) {
        const std::vector<cl_int> zeros(kAttnCounters, 0);
        std::unique_ptr<PoolBlock> block = pool_->acquire(zeros.size() * sizeof(cl_int), true);
        check(clEnqueueWriteBuffer(queue_.get(), block->mem(), CL_TRUE, 0, zeros.size() * sizeof(cl_int), zeros.data(), 0,
                                   nullptr, nullptr),
              "clEnqueueWriteBuffer (attention counters)");
        attn_counters_ = std::move(block);
    }
    return attn_counters_->mem();
}

void OpenClBackend::record(Recording& r) {
    if (!cb_api_.loaded()) return;
    cl_int err = CL_SUCCESS;
    cl_command_queue q = queue_.get();
    const cl_ulong props[] = {kCommandBufferFlags, caps_.command_buffer_simultaneous ? kCommandBufferSimultaneousUse : 0,
                              0};
    cl_command_buffer cb = cb_api_.create(1, &q, props, &err);
    if (err != CL_SUCCESS) return;  // replay the launches one by one instead
    for (const Recording::Launch& l : r.launches) {
        err = cb_api_.nd_range(cb, nullptr, nullptr, l.kernel, l.dims, nullptr, l.global, l.local[0] ? l.local : nullptr,
                               0, nullptr, nullptr, nullptr);
        if (err != CL_SUCCESS) break;
    }
    if (err == CL_SUCCESS) err = cb_api_.finalize(cb);
    if (err != CL_SUCCESS) {
        cb_api_.release(cb);
        return;
    }
    r.command_buffer = cb;
    r.api = &cb_api_;
}

void OpenClBackend::replay(Recording& r) {
    cl_command_queue q = queue_.get();
    if (r.command_buffer != nullptr) {
        if (r.last_replay && !caps_.command_buffer_simultaneous) {
            const cl_event e = r.last_replay.get();
            check(clWaitForEvents(1, &e), "clWaitForEvents");
        }
        cl_event ev = nullptr;
        check(cb_api_.enqueue(1, &q, r.command_buffer, 0, nullptr, caps_.command_buffer_simultaneous ? nullptr : &ev),
              "clEnqueueCommandBufferKHR");
        r.last_replay.reset(ev);
        return;
    }
    for (const Recording::Launch& l : r.launches) {
        check(clEnqueueNDRangeKernel(q, l.kernel, l.dims, nullptr, l.global, l.local[0] ? l.local : nullptr, 0, nullptr,
                                     nullptr),
              "clEnqueueNDRangeKernel");
    }
}

void OpenClBackend::compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) {
    reset_scratch();
    if (!graphs_.wants(hints)) {
        Dispatch d(*this, nullptr);
        dispatch_nodes(d, nodes);
        ++eager_steps_;
        step_launches_ = d.launches();
        return;  // d's scratch blocks go back to the pool: later uses queue after these launches
    }
    if (Recording* r = cache_->lookup(nodes, hints.step_key)) {
        step_launches_ = r->launches.size();
        replay(*r);
        return;
    }
    auto rec = std::make_unique<Recording>();
    Dispatch d(*this, rec.get());
    dispatch_nodes(d, nodes);
    rec->keep = std::move(d.keep());
    record(*rec);
    Recording* kept = cache_->insert(nodes, std::move(rec), hints.step_key);
    step_launches_ = kept->launches.size();
    replay(*kept);
}

void OpenClBackend::set_tensor_async(const Tensor& t, const void* data, size_t offset, size_t n) {
    if (n == 0) return;
    check(clEnqueueWriteBuffer(queue_.get(), mem_of(t), CL_TRUE, t.offset + offset, n, data, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer");
}

void OpenClBackend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t n) {
    if (n == 0) return;
    cache_->verify();  // while the device runs a keyed replay (GraphCache::lookup)
    check(clEnqueueReadBuffer(queue_.get(), mem_of(t), CL_TRUE, t.offset + offset, n, data, 0, nullptr, nullptr),
          "clEnqueueReadBuffer");
}

void OpenClBackend::synchronize() {
    cache_->verify();
    check(clFinish(queue_.get()), "clFinish");
}

BackendStats OpenClBackend::stats() const {
    BackendStats s = cache_->stats();
    s.eager_steps = eager_steps_;
    s.step_launches = step_launches_;
    s.mem_in_use = pool_->in_use();
    s.mem_peak = pool_->peak();
    s.mem_reserved = pool_->reserved();
    return s;
}

std::unique_ptr<Backend> make_backend(int index) { return std::make_unique<OpenClBackend>(select_device(index)); }

}  // namespace lantern::ocl

namespace lantern {

std::unique_ptr<Backend> make_opencl_backend(int index) { return ocl::make_backend(index); }
std::vector<DeviceInfo> list_opencl_devices() { return ocl::device_infos(); }

}  // namespace lantern
