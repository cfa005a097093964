#include "backends/scheduler.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "backends/allocator.h"
#include "graph/fusion.h"
#include "lantern/error.h"

namespace lantern {
namespace {

std::string describe(const Tensor& node) {
    std::string s = std::string(op_name(node.op)) + " '" + node.name + "'";
    if (node.layer >= 0) s += " (layer " + std::to_string(node.layer) + ")";
    s += " with source types";
    for (const Tensor* src : node.src) {
        if (src != nullptr) s += std::string(" ") + dtype_name(src->type);
    }
    return s;
}

// Copy of the view chain from `s` up to `old_root`, now ending at `new_root`.
Tensor* rebase(Graph& g, Tensor* s, const Tensor* old_root, Tensor* new_root) {
    if (s == old_root) return new_root;
    Tensor* t = g.add_tensor(*s);
    t->op = Op::None;  // a plain view now, not the node that wrote it
    t->src = {};
    t->view_src = rebase(g, s->view_src, old_root, new_root);
    return t;
}

void resolve_view(Tensor* t) {
    if (t == nullptr || t->view_src == nullptr) return;
    resolve_view(t->view_src);
    t->buffer = t->view_src->buffer;
    t->offset = t->view_src->offset + t->view_offset;
}

Tensor* mutable_root(Tensor* t) {
    while (t->view_src != nullptr) t = t->view_src;
    return t;
}

}  // namespace

Scheduler::Scheduler(Backend& cpu, Backend* gpu, int n_layer, int n_gpu_layers, const WeightStore* weights)
    : cpu_(cpu), gpu_(gpu), n_layer_(n_layer), n_gpu_layers_(gpu != nullptr ? n_gpu_layers : 0), weights_(weights) {
    if (!cpu.is_host()) throw Error(ErrorCode::InvalidArgument, "scheduler: the fallback backend must be a host backend");
}

Backend& Scheduler::backend_for_layer(int layer) const {
    if (gpu_ == nullptr || n_gpu_layers_ <= 0) return cpu_;
    if (layer < 0 || layer >= n_layer_) return n_gpu_layers_ > n_layer_ ? *gpu_ : cpu_;
    return layer >= n_layer_ - n_gpu_layers_ ? *gpu_ : cpu_;
}

Scheduler::Assignment Scheduler::assign(Graph& g) const {
    Assignment a;
    a.nodes.reserve(g.nodes().size() + 16);
    a.backends.reserve(g.nodes().size() + 16);
    for (Tensor* node : g.nodes()) {
        Backend* want = &backend_for_layer(node->layer);
        // Writes into a persistent buffer happen where that buffer lives.
        const Tensor* root = node->storage_root();
        if (root != node && (root->flags & kTensorCache) && root->buffer != nullptr) want = &root->buffer->backend();

        Backend* chosen = nullptr;
        for (Backend* b : {want, &cpu_}) {
            if (b->supports(*node)) {
                chosen = b;
                break;
            }
        }
        if (chosen != nullptr) {
            a.nodes.push_back(node);
            a.backends.push_back(chosen);
            continue;
        }
        if (is_fused_op(node->op)) {
            std::vector<Tensor*> parts = expand_fused(g, node);
            for (Backend* b : {want, &cpu_}) {
                if (std::all_of(parts.begin(), parts.end(), [&](const Tensor* p) { return b->supports(*p); })) {
                    chosen = b;
                    break;
                }
            }
            if (chosen != nullptr) {
                for (Tensor* p : parts) {
                    a.nodes.push_back(p);
                    a.backends.push_back(chosen);
                }
                continue;
            }
        }
        throw Error(ErrorCode::Unsupported, "no backend can run " + describe(*node));
    }
    return a;
}

Buffer& Scheduler::ensure_buffer(Backend& b, size_t bytes) {
    auto& buf = buffers_[&b];
    if (!buf || buf->size() < bytes) {
        if (buf) b.synchronize();
        buf.reset();
        buf = b.alloc(std::max<size_t>(bytes, b.alignment()), BufferKind::Compute);
        ++buffers_generation_;
    }
    return *buf;
}

size_t Scheduler::compute_bytes(const Backend& b) const {
    auto it = buffers_.find(&b);
    return it == buffers_.end() || !it->second ? 0 : it->second->size();
}

void Scheduler::transfer(const Transfer& t, Backend& to) {
    const size_t n = t.dst->nbytes();
    if (t.src == nullptr) {
        to.set_tensor_async(*t.dst, t.bytes->data(), 0, n);
        return;
    }
    Backend& from = t.src->buffer->backend();
    if (from.is_host()) {
        to.set_tensor_async(*t.dst, tensor_address(*t.src), 0, n);
        // The source may be overwritten by the next host split.
        to.synchronize();
    } else if (to.is_host()) {
        from.get_tensor_async(*t.src, tensor_address(*t.dst), 0, n);
        from.synchronize();
    } else {
        std::vector<uint8_t> staging(n);
        from.get_tensor_async(*t.src, staging.data(), 0, n);
        from.synchronize();
        to.set_tensor_async(*t.dst, staging.data(), 0, n);
        to.synchronize();
    }
}

void Scheduler::reserve(Graph& g) { prepare(g); }

bool Scheduler::ready(const Graph& g) const {
    auto it = plans_.find(&g);
    return it != plans_.end() && it->second.generation == buffers_generation_;
}

void Scheduler::forget(const Graph& g) { plans_.erase(&g); }

void Scheduler::compute(Graph& g, const ComputeHints& hints) {
    auto it = plans_.find(&g);
    if (it == plans_.end()) {
        Plan fresh = prepare(g);
        it = plans_.emplace(&g, std::move(fresh)).first;
    } else if (it->second.generation != buffers_generation_) {
        throw Error(ErrorCode::InvalidArgument, "scheduler: the graph's plan is stale (a compute buffer grew); rebuild it");
    }
    for (const Split& split : it->second.splits) {
        for (const Transfer& t : split.transfers) transfer(t, *split.backend);
        ComputeHints h = hints;
        h.step_key = split.key;
        split.backend->compute(split.nodes, h);
    }
}

Scheduler::Plan Scheduler::prepare(Graph& g) {
    Plan plan;
    Assignment a = assign(g);
    const int n = static_cast<int>(a.nodes.size());

    // Split boundaries: a split is a run of nodes on one backend.
    std::vector<int> split_start(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        split_start[static_cast<size_t>(i)] =
            (i > 0 && a.backends[static_cast<size_t>(i)] == a.backends[static_cast<size_t>(i - 1)])
                ? split_start[static_cast<size_t>(i - 1)]
                : i;
    }

    // Where each produced tensor lives, and from when.
    struct Life {
        Backend* home = nullptr;
        int first = INT_MAX;
        int last = -1;
        int seq = 0;  // creation order: the tie-break that keeps offsets stable
    };
    std::unordered_map<const Tensor*, Life> life;
    life.reserve(static_cast<size_t>(n) * 2);
    for (int i = 0; i < n; ++i) {
        Tensor* node = a.nodes[static_cast<size_t>(i)];
        Tensor* root = mutable_root(node);
        if (root->flags & kTensorCache) continue;
        auto [it, fresh] = life.try_emplace(root);
        Life& l = it->second;
        if (fresh) l.seq = static_cast<int>(life.size());
        l.home = a.backends[static_cast<size_t>(i)];
        l.first = std::min(l.first, i);
        l.last = std::max(l.last, i);
    }

    // Point every source at data on the consuming backend.
    struct CopyKey {
        const Tensor* root;
        const Backend* to;
        bool operator==(const CopyKey&) const = default;
    };
    struct CopyKeyHash {
        size_t operator()(const CopyKey& k) const {
            return std::hash<const void*>()(k.root) ^ (std::hash<const void*>()(k.to) << 1);
        }
    };
    std::unordered_map<CopyKey, Tensor*, CopyKeyHash> copies;
    std::vector<std::vector<Transfer>> transfers_at(static_cast<size_t>(n));  // by node: before its split

    for (int i = 0; i < n; ++i) {
        Tensor* node = a.nodes[static_cast<size_t>(i)];
        Backend* b = a.backends[static_cast<size_t>(i)];
        for (Tensor*& s : node->src) {
            if (s == nullptr) continue;
            Tensor* root = mutable_root(s);
            Tensor* target = root;
            if (root->flags & kTensorWeight) {
                if (!b->is_host()) {
                    target = weights_ != nullptr ? weights_->replica(root, b) : nullptr;
                    if (target == nullptr) {
                        throw Error(ErrorCode::Backend, std::string("weight '") + root->name + "' was not uploaded to " +
                                                            b->name() + " for " + describe(*node));
                    }
                }
            } else {
                Backend* home = nullptr;
                const std::vector<uint8_t>* bytes = nullptr;
                if (root->flags & kTensorInput) {
                    bytes = &g.input_data(root);
                } else if (root->flags & kTensorCache) {
                    home = &root->buffer->backend();
                } else {
                    auto it = life.find(root);
                    if (it == life.end()) {
                        throw Error(ErrorCode::InvalidArgument,
                                    std::string("tensor '") + root->name + "' is read before it is computed");
                    }
                    home = it->second.home;
                }
                if (home != b) {
                    Tensor*& copy = copies[CopyKey{root, b}];
                    if (copy == nullptr) {
                        copy = g.add_tensor(*root);
                        copy->op = Op::None;
                        copy->src = {};
                        copy->view_src = nullptr;
                        copy->flags = 0;
                        copy->buffer = nullptr;
                        const int at = split_start[static_cast<size_t>(i)];
                        life[copy] = Life{b, at, i, static_cast<int>(life.size()) + 1};
                        transfers_at[static_cast<size_t>(at)].push_back(Transfer{copy, bytes ? nullptr : root, bytes});
                        // The source is read when the copy is made, at the start of
                        // split `at`: nothing its backend runs before then may reuse it.
                        auto src_life = life.find(root);
                        if (src_life != life.end()) src_life->second.last = std::max(src_life->second.last, at);
                    }
                    target = copy;
                }
            }
            if (target != root) s = rebase(g, s, root, target);
            auto it = life.find(target);
            if (it != life.end()) it->second.last = std::max(it->second.last, i + b->fusion_window());
        }
    }
    for (Tensor* out : g.outputs()) {
        auto it = life.find(mutable_root(out));
        if (it != life.end()) it->second.last = INT_MAX;
    }

    // Allocate per backend, in a deterministic order (first use, then creation).
    std::vector<std::pair<Tensor*, Life*>> items;
    items.reserve(life.size());
    for (auto& [t, l] : life) items.emplace_back(const_cast<Tensor*>(t), &l);
    std::sort(items.begin(), items.end(), [](const auto& x, const auto& y) {
        if (x.second->first != y.second->first) return x.second->first < y.second->first;
        return x.second->seq < y.second->seq;
    });
    std::unordered_map<const Backend*, IntervalAllocator> allocators;
    std::vector<size_t> handles(items.size());
    for (size_t k = 0; k < items.size(); ++k) {
        Backend* home = items[k].second->home;
        auto it = allocators.try_emplace(home, home->alignment()).first;
        handles[k] = it->second.request(items[k].first->nbytes(), items[k].second->first, items[k].second->last);
    }
    for (auto& [backend, alloc] : allocators) alloc.place();
    for (size_t k = 0; k < items.size(); ++k) {
        Backend* home = items[k].second->home;
        IntervalAllocator& alloc = allocators.at(home);
        Buffer& buf = ensure_buffer(*home, alloc.total());
        items[k].first->buffer = &buf;
        items[k].first->offset = alloc.offset(handles[k]);
    }
    for (Tensor* node : a.nodes) {
        resolve_view(node);
        for (Tensor* s : node->src) resolve_view(s);
    }
    for (Tensor* out : g.outputs()) resolve_view(out);
    for (int i = 0; i < n; ++i) {
        if (split_start[static_cast<size_t>(i)] == i) {
            Split s;
            s.backend = a.backends[static_cast<size_t>(i)];
            s.transfers = std::move(transfers_at[static_cast<size_t>(i)]);
            s.key = s.backend->new_step_key();
            plan.splits.push_back(std::move(s));
        }
        plan.splits.back().nodes.push_back(a.nodes[static_cast<size_t>(i)]);
    }
    plan.generation = buffers_generation_;
    return plan;
}

void Scheduler::read_output(const Tensor& t, void* dst, size_t n) {
    if (t.buffer == nullptr) throw Error(ErrorCode::InvalidArgument, std::string("output '") + t.name + "' was not computed");
    Backend& b = t.buffer->backend();
    b.get_tensor_async(t, dst, 0, n);
    b.synchronize();
}

void Scheduler::synchronize() {
    cpu_.synchronize();
    if (gpu_ != nullptr) gpu_->synchronize();
}

void Scheduler::pin_host(void* p, size_t n) {
    cpu_.pin_host(p, n);
    if (gpu_ != nullptr) gpu_->pin_host(p, n);
}

void Scheduler::unpin_host(void* p) {
    cpu_.unpin_host(p);
    if (gpu_ != nullptr) gpu_->unpin_host(p);
}

}  // namespace lantern
