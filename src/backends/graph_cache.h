// Capture-and-replay bookkeeping shared by the GPU backends.
//
// A recorded graph (a CUDA graph, an OpenCL command buffer) is valid for a
// step only while every node has the properties it was recorded with: op,
// type, shapes, strides, the address of its output and of every source, and
// its parameters. Positions and KV lengths are read from device memory, so
// steady decoding keeps matching one recording. Recordings live in an LRU
// cache; the backend supplies what a recording is (Exec).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace lantern {

// Switches read once from the environment when a backend is created:
//   LANTERN_GRAPHS=0             record nothing; every step runs eagerly
//   LANTERN_GRAPHS_PREFILL=1     record prompt-processing steps too
//   LANTERN_GRAPH_CACHE_SIZE=N   recordings kept (default 12)
struct GraphConfig {
    bool enabled = true;
    bool prefill = false;
    size_t capacity = 12;

    static GraphConfig from_env();
    // Whether a step with these hints should be recorded/replayed.
    bool wants(const ComputeHints& hints) const { return enabled && (prefill || !hints.prefill); }
};

struct NodeProps {
    struct Ref {
        uint64_t buffer_uid = 0;  // Buffer::uid(), 0 for none
        size_t offset = 0;
        std::array<int64_t, kMaxDims> ne{};
        std::array<size_t, kMaxDims> nb{};
        DType type = DType::F32;
        bool operator==(const Ref&) const = default;
    };
    Op op = Op::None;
    Ref out;
    std::array<Ref, kMaxSrc> src{};
    std::array<int32_t, kMaxParams> params{};

    static NodeProps of(const Tensor& node);
    bool operator==(const NodeProps&) const = default;
};

// What a recording was made for, and the test that a step still matches it.
// A step checks every node's and every source's properties; when the step's
// node list holds the same tensor objects as the recorded one (steady
// decoding), each tensor is checked once: a node's own properties and source
// pointers at its position, and the sources that are not nodes of the list
// (weights, inputs, caches) in a second list. When that fails, the full
// per-node comparison decides. A keyed step is matched while the device
// runs it (GraphCache::lookup), any other before its replay.
class GraphSignature {
public:
    explicit GraphSignature(const std::vector<Tensor*>& nodes);
    bool matches(const std::vector<Tensor*>& nodes) const;

private:
    bool matches_same_tensors(const std::vector<Tensor*>& nodes) const;
    bool matches_props(const std::vector<Tensor*>& nodes) const;

    // A tensor's properties as three runs of its bytes, recorded and compared
    // whole: type; shapes, strides, buffer, offset, view and op; sources and
    // parameters. The runs leave out the padding between them (its bytes are
    // indeterminate), so a memory checker sees only initialised reads.
    struct Run {
        size_t at, n;
    };
    static constexpr Run kRuns[3] = {
        {offsetof(Tensor, type), sizeof(Tensor::type)},
        {offsetof(Tensor, ne), offsetof(Tensor, op) + sizeof(Tensor::op) - offsetof(Tensor, ne)},
        {offsetof(Tensor, src), offsetof(Tensor, params) + sizeof(Tensor::params) - offsetof(Tensor, src)},
    };
    static_assert(offsetof(Tensor, nb) == offsetof(Tensor, ne) + sizeof(Tensor::ne) &&
                      offsetof(Tensor, buffer) == offsetof(Tensor, nb) + sizeof(Tensor::nb) &&
                      offsetof(Tensor, offset) == offsetof(Tensor, buffer) + sizeof(Tensor::buffer) &&
                      offsetof(Tensor, view_src) == offsetof(Tensor, offset) + sizeof(Tensor::offset) &&
                      offsetof(Tensor, view_offset) == offsetof(Tensor, view_src) + sizeof(Tensor::view_src) &&
                      offsetof(Tensor, op) == offsetof(Tensor, view_offset) + sizeof(Tensor::view_offset) &&
                      offsetof(Tensor, params) == offsetof(Tensor, src) + sizeof(Tensor::src),
                  "no padding inside a run: Tensor's fields moved, update kRuns");
    static constexpr size_t kSnapBytes = kRuns[0].n + kRuns[1].n + kRuns[2].n;
    struct Snap {
        const Tensor* t;
        uint64_t buffer_uid;  // the buffer pointer could be a new buffer at a freed one's address
        std::array<unsigned char, kSnapBytes> bytes;
        explicit Snap(const Tensor* x);
        bool matches() const;
    };

    std::vector<NodeProps> props_;
    std::vector<Snap> nodes_;    // the recorded node list
    std::vector<Snap> outside_;  // sources that are not in it
};

template <class Exec>
class GraphCache {
public:
    explicit GraphCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

    // The recording matching `nodes`, moved to the front; null on a miss.
    //
    // A step that passes the key of the last step served (ComputeHints::
    // step_key, nonzero) gets that step's recording without the comparison:
    // the key promises the same nodes with the same properties. The
    // comparison is then made by verify() while the device runs the step,
    // off the path between two steps (where the GPU waits for it); should it
    // fail, the key is dropped and the next step is compared in full.
    Exec* lookup(const std::vector<Tensor*>& nodes, uint64_t key = 0) {
        if (key != 0 && key == armed_key_) {
            armed_unverified_ = true;
            ++stats_.graph_replays;
            return entries_.front().exec.get();
        }
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->signature.matches(nodes)) {
                entries_.splice(entries_.begin(), entries_, it);
                ++stats_.graph_replays;
                arm(key, nodes);
                return entries_.front().exec.get();
            }
        }
        ++stats_.graph_misses;
        return nullptr;
    }

    // Stores a new recording at the front, dropping the least recently used.
    Exec* insert(const std::vector<Tensor*>& nodes, std::unique_ptr<Exec> exec, uint64_t key = 0) {
        entries_.push_front(Entry{GraphSignature(nodes), std::move(exec)});
        ++stats_.graph_captures;
        while (entries_.size() > capacity_) {
            entries_.pop_back();
            ++stats_.graph_evictions;
        }
        arm(key, nodes);
        return entries_.front().exec.get();
    }

    // Compares the last keyed step's nodes with its recording (see lookup);
    // false when they no longer match (the key is then dropped).
    bool verify() {
        if (!armed_unverified_) return true;
        armed_unverified_ = false;
        if (entries_.front().signature.matches(armed_nodes_)) return true;
        arm(0, {});
        return false;
    }

    void clear() {
        entries_.clear();
        arm(0, {});
    }
    size_t size() const { return entries_.size(); }
    size_t capacity() const { return capacity_; }
    // Captures, replays (hits), misses and evictions.
    const BackendStats& stats() const { return stats_; }

private:
    struct Entry {
        GraphSignature signature;
        std::unique_ptr<Exec> exec;
    };
    // The front recording now serves `key` (0: none).
    void arm(uint64_t key, const std::vector<Tensor*>& nodes) {
        armed_key_ = key;
        armed_unverified_ = false;
        if (key != 0) armed_nodes_.assign(nodes.begin(), nodes.end());
    }
    size_t capacity_;
    std::list<Entry> entries_;
    BackendStats stats_;
    uint64_t armed_key_ = 0;
    bool armed_unverified_ = false;
    std::vector<Tensor*> armed_nodes_;
};

}  // namespace lantern
