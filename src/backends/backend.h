// The interface every backend fills in: buffers on its device, a per-op
// support query, and asynchronous execution of a list of graph nodes.
//
// Written for a GPU first: weights are uploaded once into device buffers,
// the KV cache lives in a device buffer, and compute() only enqueues work:
// nothing comes back to the host until get_tensor_async + synchronize().
// The CPU backend is the case where enqueueing means running.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace lantern {

class Backend;

enum class BufferKind {
    Weights,  // written once at load, read by kernels
    Cache,    // KV cache: persistent, read and written by kernels
    Compute,  // intermediates of a step, reused from step to step
};

// A block of memory on a backend's device. base() is the device address
// (CPU, CUDA) or an opaque handle (OpenCL's cl_mem); offsets are in bytes.
class Buffer {
public:
    Buffer(Backend& backend, size_t size, void* base);
    virtual ~Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    Backend& backend() const { return backend_; }
    size_t size() const { return size_; }
    void* base() const { return base_; }
    // Unique among the buffers of its backend, never reused: recorded graphs
    // compare it, since a new buffer may get a freed one's address.
    uint64_t uid() const { return uid_; }

    // Blocking transfers (ordered after the backend's queued work).
    virtual void write(size_t offset, const void* src, size_t n) = 0;
    virtual void read(size_t offset, void* dst, size_t n) const = 0;
    virtual void fill(size_t offset, uint8_t value, size_t n) = 0;

private:
    Backend& backend_;
    size_t size_;
    void* base_;
    uint64_t uid_;
};

// What the caller knows about a step that a backend may use.
struct ComputeHints {
    // Some sequence contributes more than one token (prompt processing).
    bool prefill = false;
    // Nonzero: the caller promises that every compute() with this key passes
    // the same node list with the same properties (a scheduler's plan is
    // immutable), so a backend may skip comparing them. Keys come from
    // Backend::new_step_key() and are never reused.
    uint64_t step_key = 0;
};

// Graph-capture and memory counters, printed with --verbose.
struct BackendStats {
    uint64_t graph_captures = 0;   // graphs recorded
    uint64_t graph_replays = 0;    // steps served by a recorded graph
    uint64_t graph_misses = 0;     // lookups that found no matching graph
    uint64_t graph_evictions = 0;  // graphs dropped by the LRU cache
    uint64_t eager_steps = 0;      // steps run op by op
    uint64_t step_launches = 0;    // kernel launches of the last step (0: not counted)
    size_t mem_in_use = 0;         // bytes handed out by the device pool
    size_t mem_peak = 0;
    size_t mem_reserved = 0;       // bytes held from the driver
    size_t packed_weights = 0;     // CPU: bytes of weights kept packed (quant/packed.h)
};

class Backend {
public:
    virtual ~Backend() = default;

    virtual const char* name() const = 0;         // "cpu", "cuda", "opencl"
    virtual std::string description() const = 0;  // the device, for logs and bench
    // True when buffer bases are host pointers the CPU may read and write.
    virtual bool is_host() const = 0;
    // Offsets of tensors in this backend's buffers are multiples of this.
    virtual size_t alignment() const { return 256; }

    virtual std::unique_ptr<Buffer> alloc(size_t size, BufferKind kind) = 0;

    // Whether this backend runs `node` as it stands (op, types, shapes).
    // Answered from the same op table that dispatches, so the two agree.
    virtual bool supports(const Tensor& node) const = 0;

    // Bytes a weight needs in this backend's weight buffer (a backend may
    // store a repacked layout), and the upload itself. `w.buffer`/`w.offset`
    // are already set; `host` holds the GGUF bytes of the tensor.
    virtual size_t weight_bytes(const Tensor& w) const { return w.nbytes(); }
    virtual void upload_weight(const Tensor& w, const void* host);

    // Enqueues `nodes` (all supported, all allocated on this backend) in order.
    virtual void compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) = 0;

    // Copies between host memory and a contiguous tensor's bytes; the host
    // memory must stay valid until synchronize() returns.
    virtual void set_tensor_async(const Tensor& t, const void* data, size_t offset, size_t n);
    virtual void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t n);
    // Waits for all queued work.
    virtual void synchronize() {}
    // Host memory that outputs are read into, page-locked if the backend can
    // use that (a GPU backend then copies straight into it instead of through
    // its staging area). A hint: a backend may ignore it. Unpin before the
    // memory is freed.
    virtual void pin_host(void* /*p*/, size_t /*n*/) {}
    virtual void unpin_host(void* /*p*/) {}

    virtual BackendStats stats() const { return {}; }

    // Nodes after a source's last reader during which the source must stay
    // intact. A backend that runs up to N + 1 consecutive nodes as one kernel
    // returns N, so no node of such a group writes over an input of an
    // earlier node of the group while the kernel may still read it.
    virtual int fusion_window() const { return 0; }

    // A key for ComputeHints::step_key, unique among this backend's keys.
    uint64_t new_step_key() { return next_step_key_++; }

private:
    friend class Buffer;
    uint64_t next_buffer_uid_ = 1;
    uint64_t next_step_key_ = 1;
};

// Address of a tensor's first byte for backends whose buffer base is an
// address (CPU: a host pointer, CUDA: a device pointer). Precondition: the
// tensor is allocated (buffer set, views resolved).
inline void* tensor_address(const Tensor& t) { return static_cast<char*>(t.buffer->base()) + t.offset; }

}  // namespace lantern
