// What the op entry points (ops_*.cpp) work with while a step is planned:
// kernels, argument setting, launches, scratch memory, and the 8-bit forms
// of activations made in this step.
//
// A Dispatch either runs eagerly (shared kernel objects, each launch
// enqueued at once) or fills a Recording (a kernel object per launch, kept
// with its arguments, replayed later).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "backends/opencl/opencl_backend.h"
#include "graph/tensor.h"

namespace lantern::ocl {

inline cl_mem mem_of(const Tensor& t) { return static_cast<cl_mem>(t.buffer->base()); }

// Sets a kernel's arguments in order.
class Args {
public:
    explicit Args(cl_kernel k) : k_(k) {}
    Args& mem(cl_mem m) { return set(sizeof(cl_mem), &m); }
    // A tensor: its buffer and byte offset (two arguments).
    Args& tensor(const Tensor& t) { return mem(mem_of(t)).u64(t.offset); }
    Args& u64(uint64_t v) {
        const cl_ulong x = v;
        return set(sizeof(x), &x);
    }
    Args& i32(int64_t v) {
        const cl_int x = static_cast<cl_int>(v);
        return set(sizeof(x), &x);
    }
    Args& f32(float v) { return set(sizeof(v), &v); }
    // A `local` pointer argument of `bytes` bytes.
    Args& local_mem(size_t bytes) { return set(bytes, nullptr); }

private:
    Args& set(size_t n, const void* p);
    cl_kernel k_;
    cl_uint i_ = 0;
};

// 8-bit blocks of an f32 activation: rows of K int8 at (mem, q) and K / 32
// float2 (d, sum) per row at (mem, ds).
struct Q8Act {
    cl_mem mem = nullptr;
    size_t q = 0;
    size_t ds = 0;
    // Set when the blocks are of a row before its RMSNorm scale (the first
    // half of a split add + RMSNorm, matvec.cl): `norm` is the AddRmsNorm
    // node, n_parts sums of squares lie at (parts_mem, parts). A product
    // reading these blocks applies the scale and writes the normed half.
    const Tensor* norm = nullptr;
    cl_mem parts_mem = nullptr;
    size_t parts = 0;
    int n_parts = 0;
};

// Identifies the f32 data a Q8Act was made from: the same bytes seen through
// the same shape and row stride.
struct ActKey {
    cl_mem mem;
    size_t offset;
    int64_t ne0, rows;
    size_t nb1;
    bool operator<(const ActKey& o) const {
        return std::tie(mem, offset, ne0, rows, nb1) < std::tie(o.mem, o.offset, o.ne0, o.rows, o.nb1);
    }
};
// The key of a tensor whose rows are uniformly strided (nb2 = nb1 * ne1, ...).
ActKey act_key(const Tensor& t);
bool rows_uniform(const Tensor& t);

class Dispatch {
public:
    Dispatch(OpenClBackend& backend, Recording* recording) : b_(backend), rec_(recording) {}

    ProgramCache& programs() { return b_.programs(); }
    const LaunchShape& shape() { return b_.programs().shape(); }
    OpenClBackend& backend() { return b_; }

    // The kernel to set arguments on and launch next.
    cl_kernel kernel(ProgramId program, const char* name);
    // Enqueues (eager) or records the launch of `k` over `global` work-items
    // in groups of `local` (local may be null: the driver chooses).
    void launch(cl_kernel k, cl_uint dims, const size_t* global, const size_t* local);
    void launch1(cl_kernel k, size_t global, size_t local) { launch(k, 1, &global, local ? &local : nullptr); }

    // Device memory valid for the rest of this step's work.
    OpenClBackend::Scratch scratch(size_t bytes);

    // 8-bit activations. wanted(): a block-32 product later in the step reads
    // these rows, so a producer should also write their 8-bit form (into
    // make_q8's scratch). find_q8(): the form made earlier in the step.
    void want_q8(const ActKey& k) { wanted_[k] = true; }
    bool wanted(const ActKey& k) const { return wanted_.count(k) != 0; }
    Q8Act& make_q8(const ActKey& k, int64_t K, int64_t rows);
    const Q8Act* find_q8(const ActKey& k) const;
    // Forgets the 8-bit forms of rows that overlap bytes [begin, end) of
    // `mem`: a node is about to overwrite them.
    void overwritten(cl_mem mem, size_t begin, size_t end);

    std::vector<std::shared_ptr<PoolBlock>>& keep() { return keep_; }
    size_t launches() const { return launches_; }

private:
    OpenClBackend& b_;
    Recording* rec_;
    size_t launches_ = 0;
    std::map<ActKey, bool> wanted_;
    std::map<ActKey, Q8Act> q8_;
    std::vector<std::shared_ptr<PoolBlock>> keep_;
};

}  // namespace lantern::ocl
