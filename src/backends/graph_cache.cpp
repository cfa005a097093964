#include "backends/graph_cache.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>

namespace lantern {
namespace {

NodeProps::Ref ref_of(const Tensor* t) {
    NodeProps::Ref r;
    if (t == nullptr) return r;
    r.buffer_uid = t->buffer != nullptr ? t->buffer->uid() : 0;
    r.offset = t->offset;
    r.ne = t->ne;
    r.nb = t->nb;
    r.type = t->type;
    return r;
}

long env_long(const char* name, long fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return fallback;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    return (end != nullptr && *end == '\0') ? x : fallback;
}

}  // namespace

GraphConfig GraphConfig::from_env() {
    GraphConfig c;
    c.enabled = env_long("LANTERN_GRAPHS", 1) != 0;
    c.prefill = env_long("LANTERN_GRAPHS_PREFILL", 0) != 0;
    const long cap = env_long("LANTERN_GRAPH_CACHE_SIZE", 12);
    c.capacity = cap > 0 ? static_cast<size_t>(cap) : 12;
    return c;
}

NodeProps NodeProps::of(const Tensor& node) {
    NodeProps p;
    p.op = node.op;
    p.out = ref_of(&node);
    for (int i = 0; i < kMaxSrc; ++i) p.src[static_cast<size_t>(i)] = ref_of(node.src[static_cast<size_t>(i)]);
    p.params = node.params;
    return p;
}

GraphSignature::Snap::Snap(const Tensor* x) : t(x), buffer_uid(x->buffer != nullptr ? x->buffer->uid() : 0) {
    const auto* src = reinterpret_cast<const unsigned char*>(x);
    size_t at = 0;
    for (const Run& r : kRuns) {
        std::memcpy(bytes.data() + at, src + r.at, r.n);
        at += r.n;
    }
}

bool GraphSignature::Snap::matches() const {
    // Constant sizes: the compiler expands each comparison inline.
    constexpr size_t n0 = kRuns[0].n, n1 = kRuns[1].n, n2 = kRuns[2].n;
    const auto* now = reinterpret_cast<const unsigned char*>(t);
    return std::memcmp(bytes.data() + n0, now + kRuns[1].at, n1) == 0 &&
           std::memcmp(bytes.data() + n0 + n1, now + kRuns[2].at, n2) == 0 &&
           std::memcmp(bytes.data(), now + kRuns[0].at, n0) == 0 &&
           (t->buffer == nullptr || t->buffer->uid() == buffer_uid);
}

GraphSignature::GraphSignature(const std::vector<Tensor*>& nodes) {
    props_.reserve(nodes.size());
    nodes_.reserve(nodes.size());
    for (const Tensor* n : nodes) {
        props_.push_back(NodeProps::of(*n));
        nodes_.emplace_back(n);
    }
    std::unordered_set<const Tensor*> seen(nodes.begin(), nodes.end());
    for (const Tensor* n : nodes) {
        for (const Tensor* src : n->src) {
            if (src != nullptr && seen.insert(src).second) outside_.emplace_back(src);
        }
    }
}

namespace {

// ref_of(t) == r, without building ref_of(t): matching runs every decode step.
bool ref_matches(const NodeProps::Ref& r, const Tensor* t) {
    if (t == nullptr) return r == NodeProps::Ref{};
    return r.offset == t->offset && r.buffer_uid == (t->buffer != nullptr ? t->buffer->uid() : 0) &&
           r.type == t->type && r.ne == t->ne && r.nb == t->nb;
}

}  // namespace

bool GraphSignature::matches(const std::vector<Tensor*>& nodes) const {
    if (nodes.size() != props_.size()) return false;
    if (matches_same_tensors(nodes)) return true;
    return matches_props(nodes);
}

bool GraphSignature::matches_same_tensors(const std::vector<Tensor*>& nodes) const {
    // Every source is a node of the list (checked at its own position) or
    // one of outside_ (checked below), so equal source pointers suffice.
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (nodes[i] != nodes_[i].t || !nodes_[i].matches()) return false;
    }
    for (const Snap& o : outside_) {
        if (!o.matches()) return false;
    }
    return true;
}

bool GraphSignature::matches_props(const std::vector<Tensor*>& nodes) const {
    for (size_t i = 0; i < nodes.size(); ++i) {
        const NodeProps& p = props_[i];
        const Tensor& n = *nodes[i];
        if (p.op != n.op || p.params != n.params || !ref_matches(p.out, &n)) return false;
        for (size_t s = 0; s < static_cast<size_t>(kMaxSrc); ++s) {
            if (!ref_matches(p.src[s], n.src[s])) return false;
        }
    }
    return true;
}

}  // namespace lantern
