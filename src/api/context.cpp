#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "api/context_impl.h"

namespace lantern {

std::unique_ptr<Context::Impl::Step> Context::Impl::build_step(const Batch& b, size_t begin, size_t end,
                                                                 const std::vector<int32_t>& rows) const {
    auto s = std::make_unique<Step>();
    const int64_t T = static_cast<int64_t>(end - begin);
    const size_t bytes = static_cast<size_t>(T) * sizeof(int32_t);
    Graph& g = s->graph;
    s->in.tokens = g.input(DType::I32, {T}, "tokens", b.tokens.data() + begin, bytes);
    s->in.pos = g.input(DType::I32, {T}, "positions", b.pos.data() + begin, bytes);
    s->in.seq = g.input(DType::I32, {T}, "sequences", b.seq.data() + begin, bytes);
    s->out_rows = rows;
    if (static_cast<int64_t>(rows.size()) != T) {
        s->in.out_ids = g.input(DType::I32, {static_cast<int64_t>(rows.size())}, "out_ids", rows.data(),
                                rows.size() * sizeof(int32_t));
    }
    s->in.embeddings = params.embeddings;
    s->logits = m.build(g, kv, s->in);
    return s;
}

Context::Impl::Step& Context::Impl::step_for(const Batch& b, size_t begin, size_t end, bool all_outputs) {
    const int64_t T = static_cast<int64_t>(end - begin);
    std::vector<int32_t> rows;
    for (size_t i = begin; i < end; ++i) {
        if (all_outputs || b.logits[i]) rows.push_back(static_cast<int32_t>(i - begin));
    }
    // A pass with no wanted logits still ends in the head; compute the last row.
    if (rows.empty()) rows.push_back(static_cast<int32_t>(T - 1));

    auto key = std::make_pair(T, rows);
    auto it = steps.find(key);
    if (it != steps.end() && sched->ready(it->second->graph)) {
        Step& s = *it->second;
        const size_t bytes = static_cast<size_t>(T) * sizeof(int32_t);
        s.graph.set_input_data(s.in.tokens, b.tokens.data() + begin, bytes);
        s.graph.set_input_data(s.in.pos, b.pos.data() + begin, bytes);
        s.graph.set_input_data(s.in.seq, b.seq.data() + begin, bytes);
        return s;
    }
    if (it != steps.end()) {
        sched->forget(it->second->graph);
        steps.erase(it);
    }
    while (steps.size() >= kMaxSteps) {
        sched->forget(steps.begin()->second->graph);
        steps.erase(steps.begin());
    }
    std::unique_ptr<Step> s = build_step(b, begin, end, rows);
    Step& ref = *s;
    steps.emplace(std::move(key), std::move(s));
    return ref;
}

// Each layer's cache goes where the attention reading it runs (its writes
// then follow it there): a cache whose type or shape the layer's backend
// cannot attend over stays in host memory rather than crossing over whole
// at every step.
void Context::Impl::place_caches() {
    Batch one;
    one.add(0, 0, 0, true);
    std::unique_ptr<Step> probe = build_step(one, 0, 1, {0});
    Scheduler::Assignment a = sched->assign(probe->graph);
    std::map<const Tensor*, Backend*> home;
    for (size_t i = 0; i < a.nodes.size(); ++i) {
        const Tensor& node = *a.nodes[i];
        if (node.op == Op::KvStore) home.try_emplace(node.src[1], a.backends[i]);
        if (node.op != Op::Attention) continue;
        for (int s : {1, 2}) home[node.src[s]->storage_root()] = a.backends[i];
    }
    std::map<Backend*, std::vector<Tensor*>> by_backend;
    for (const auto* list : {&kv.k, &kv.v}) {
        for (Tensor* cache : *list) {
            auto it = home.find(cache);
            by_backend[it != home.end() ? it->second : m.cpu.get()].push_back(cache);
        }
    }
    for (auto& [backend, caches] : by_backend) {
        size_t total = 0;
        for (Tensor* c : caches) {
            total = (total + backend->alignment() - 1) / backend->alignment() * backend->alignment();
            c->offset = total;
            total += c->nbytes();
        }
        cache_buffers.push_back(backend->alloc(total, BufferKind::Cache));
        Buffer* buf = cache_buffers.back().get();
        buf->fill(0, 0, total);
        for (Tensor* c : caches) c->buffer = buf;
    }
}

namespace {

// A KV cache type by its name, checked: one the CPU converts both ways,
// whose blocks divide a head (attention reads one head's slice of a row).
DType cache_type(const std::string& name, const char* field, int64_t head_dim) {
    static constexpr DType kTypes[] = {DType::F16, DType::F32, DType::BF16, DType::Q8_0,
                                       DType::Q5_1, DType::Q5_0, DType::Q4_1, DType::Q4_0};
    const std::optional<DType> t = dtype_from_name(name);
    if (!t || std::find(std::begin(kTypes), std::end(kTypes), *t) == std::end(kTypes)) {
        std::string names;
        for (DType k : kTypes) names += std::string(names.empty() ? "" : ", ") + dtype_name(k);
        throw Error(ErrorCode::InvalidArgument,
                    std::string(field) + " \"" + name + "\" is not a KV cache type (one of " + names + ")");
    }
    if (head_dim % dtype_block_size(*t) != 0) {
        throw Error(ErrorCode::InvalidArgument, std::string(field) + " " + dtype_name(*t) + " stores blocks of " +
                                                    std::to_string(dtype_block_size(*t)) +
                                                    ", which do not divide this model's heads of " +
                                                    std::to_string(head_dim));
    }
    return *t;
}

}  // namespace

Context::Context(Model& model, const ContextParams& params)
    : impl_(std::make_unique<Impl>(model.impl(), params)) {
    Impl& c = *impl_;
    Model::Impl& m = c.m;
    if (m.vocab_only) throw Error(ErrorCode::InvalidArgument, "a context needs a model loaded with weights (vocab_only is set)");
    if (c.params.n_ctx <= 0) c.params.n_ctx = static_cast<int>(m.hp.n_ctx_train);
    if (c.params.n_seq <= 0) throw Error(ErrorCode::InvalidArgument, "n_seq must be positive");
    if (c.params.n_batch <= 0) throw Error(ErrorCode::InvalidArgument, "n_batch must be positive");
    if (c.params.n_threads > 0) m.cpu->set_threads(c.params.n_threads);

    c.sched = std::make_unique<Scheduler>(*m.cpu, m.gpu.get(), static_cast<int>(m.hp.n_layer), m.n_gpu_layers,
                                          &m.store);
    c.kv.n_ctx_seq = c.params.n_ctx;
    c.kv.n_seq = c.params.n_seq;
    const DType type_k = cache_type(c.params.cache_type_k, "cache_type_k", m.hp.head_dim);
    const DType type_v = cache_type(c.params.cache_type_v, "cache_type_v", m.hp.head_dim);
    const int64_t row = m.hp.head_dim * m.hp.n_head_kv;
    for (int64_t il = 0; il < m.hp.n_layer; ++il) {
        c.cache_graph.set_layer(static_cast<int>(il));
        for (auto* list : {&c.kv.k, &c.kv.v}) {
            Tensor* t = c.cache_graph.new_tensor(list == &c.kv.k ? type_k : type_v, {row, c.kv.n_ctx_seq * c.kv.n_seq},
                                                 list == &c.kv.k ? "cache_k" : "cache_v");
            t->flags |= kTensorCache;
            list->push_back(t);
        }
    }
    c.place_caches();
    c.seq_len.assign(static_cast<size_t>(c.params.n_seq), 0);
    c.ends_in_output.assign(static_cast<size_t>(c.params.n_seq), 0);

    // Size the compute buffers for the largest pass up front.
    Batch worst;
    std::vector<int32_t> rows;
    for (int i = 0; i < c.params.n_batch; ++i) {
        worst.add(0, std::min(i, c.params.n_ctx - 1), 0, true);
        rows.push_back(i);
    }
    std::unique_ptr<Impl::Step> step = c.build_step(worst, 0, worst.size(), rows);
    c.sched->reserve(step->graph);
}

Context::~Context() {
    if (impl_ && impl_->sched) {
        impl_->sched->synchronize();
        for (auto& [key, step] : impl_->steps) impl_->sched->forget(step->graph);
        if (impl_->logits_pinned != nullptr) impl_->sched->unpin_host(impl_->logits_pinned);
    }
}

void Context::decode(const Batch& b) {
    Impl& c = *impl_;
    const size_t n = b.tokens.size();
    if (b.pos.size() != n || b.seq.size() != n || b.logits.size() != n) {
        throw Error(ErrorCode::InvalidArgument, "batch: tokens, pos, seq and logits must have the same length");
    }
    if (n == 0) throw Error(ErrorCode::InvalidArgument, "batch is empty");

    // Validate everything before touching the cache.
    std::vector<int> len = c.seq_len;
    std::vector<int> per_seq(static_cast<size_t>(c.params.n_seq), 0);
    int n_out = 0;
    for (size_t i = 0; i < n; ++i) {
        const int32_t tok = b.tokens[i], pos = b.pos[i], seq = b.seq[i];
        if (tok < 0 || tok >= c.m.hp.n_vocab) {
            throw Error(ErrorCode::InvalidArgument, "batch: token id " + std::to_string(tok) + " is outside the vocabulary");
        }
        if (seq < 0 || seq >= c.params.n_seq) {
            throw Error(ErrorCode::InvalidArgument, "batch: sequence id " + std::to_string(seq) + " is outside [0, " +
                                                        std::to_string(c.params.n_seq) + ")");
        }
        if (pos < 0) throw Error(ErrorCode::InvalidArgument, "batch: negative position");
        if (pos >= c.params.n_ctx) {
            throw Error(ErrorCode::ContextFull, "context full: position " + std::to_string(pos) + " of sequence " +
                                                    std::to_string(seq) + " exceeds n_ctx " +
                                                    std::to_string(c.params.n_ctx));
        }
        int& l = len[static_cast<size_t>(seq)];
        if (pos > l) {
            throw Error(ErrorCode::InvalidArgument, "batch: position " + std::to_string(pos) + " of sequence " +
                                                        std::to_string(seq) + " leaves a gap (it holds " +
                                                        std::to_string(l) + " tokens)");
        }
        l = pos + 1;
        ++per_seq[static_cast<size_t>(seq)];
        if (b.logits[i]) ++n_out;
    }
    ComputeHints hints;
    hints.prefill = std::any_of(per_seq.begin(), per_seq.end(), [](int k) { return k > 1; });
    bool generation = true;
    for (size_t i = 0; i < n; ++i) {
        const auto s = static_cast<size_t>(b.seq[i]);
        generation = generation && per_seq[s] == 1 && c.ends_in_output[s] != 0 && b.pos[i] == c.seq_len[s];
    }

    const auto t0 = std::chrono::steady_clock::now();
    // Floats per output: logits, or the hidden state in embeddings mode.
    const int64_t n_vocab = c.params.embeddings ? c.m.hp.n_embd : c.m.hp.n_vocab;
    c.size_logits(static_cast<size_t>(n_out) * static_cast<size_t>(n_vocab));
    c.n_out = 0;
    for (size_t begin = 0; begin < n; begin += static_cast<size_t>(c.params.n_batch)) {
        const size_t end = std::min(n, begin + static_cast<size_t>(c.params.n_batch));
        Impl::Step& step = c.step_for(b, begin, end, false);
        c.sched->compute(step.graph, hints);
        int wanted = 0;
        for (size_t i = begin; i < end; ++i) wanted += b.logits[i] ? 1 : 0;
        if (wanted > 0) {
            c.sched->read_output(*step.logits, c.logits.data() + static_cast<size_t>(c.n_out) * n_vocab,
                                 static_cast<size_t>(wanted) * static_cast<size_t>(n_vocab) * sizeof(float));
            c.n_out += wanted;
        } else {
            c.sched->synchronize();
        }
    }
    c.seq_len = len;
    for (size_t i = 0; i < n; ++i) c.ends_in_output[static_cast<size_t>(b.seq[i])] = b.logits[i];
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!generation) {
        c.perf.prompt_ms += ms;
        c.perf.prompt_tokens += static_cast<int64_t>(n);
    } else {
        c.perf.gen_ms += ms;
        c.perf.gen_tokens += static_cast<int64_t>(n);
    }
}

namespace {

// Output i of the last decode in a context whose outputs are `what` (logits
// or embeddings), `width` floats each.
const float* output_row(const std::vector<float>& rows, int n_out, int i, bool right_mode, int64_t width,
                        const char* what, const char* other) {
    if (!right_mode) {
        throw Error(ErrorCode::InvalidArgument, std::string(what) + ": this context gives " + other +
                                                    " (ContextParams::embeddings)");
    }
    if (i < 0 || i >= n_out) {
        throw Error(ErrorCode::InvalidArgument, std::string(what) + ": output " + std::to_string(i) +
                                                    " was not computed (" + std::to_string(n_out) + " outputs)");
    }
    return rows.data() + static_cast<size_t>(i) * static_cast<size_t>(width);
}

}  // namespace

const float* Context::logits(int i) const {
    return output_row(impl_->logits, impl_->n_out, i, !impl_->params.embeddings, impl_->m.hp.n_vocab, "logits",
                      "embeddings");
}

const float* Context::embeddings(int i) const {
    return output_row(impl_->logits, impl_->n_out, i, impl_->params.embeddings, impl_->m.hp.n_embd, "embeddings",
                      "logits");
}

int Context::n_outputs() const { return impl_->n_out; }

void Context::clear_sequence(int seq) {
    if (seq < 0 || seq >= impl_->params.n_seq) throw Error(ErrorCode::InvalidArgument, "clear_sequence: bad sequence id");
    impl_->seq_len[static_cast<size_t>(seq)] = 0;
    impl_->ends_in_output[static_cast<size_t>(seq)] = 0;
}

int Context::sequence_length(int seq) const {
    if (seq < 0 || seq >= impl_->params.n_seq) throw Error(ErrorCode::InvalidArgument, "sequence_length: bad sequence id");
    return impl_->seq_len[static_cast<size_t>(seq)];
}

int Context::n_ctx() const { return impl_->params.n_ctx; }
int Context::n_seq() const { return impl_->params.n_seq; }

size_t Context::cache_bytes() const {
    size_t total = 0;
    for (const auto* list : {&impl_->kv.k, &impl_->kv.v}) {
        for (const Tensor* t : *list) total += t->nbytes();
    }
    return total;
}

std::string Context::cache_summary() const {
    const Impl& c = *impl_;
    auto size = [](size_t b) {
        char buf[32];
        const double mib = static_cast<double>(b) / (1024.0 * 1024.0);
        if (mib >= 1024.0) {
            std::snprintf(buf, sizeof buf, "%.2f GiB", mib / 1024.0);
        } else {
            std::snprintf(buf, sizeof buf, "%.1f MiB", mib);
        }
        return std::string(buf);
    };
    size_t host = 0;
    for (const auto* list : {&c.kv.k, &c.kv.v}) {
        for (const Tensor* t : *list) {
            if (t->buffer != nullptr && t->buffer->backend().is_host()) host += t->nbytes();
        }
    }
    std::string s = size(cache_bytes()) + ": K " + dtype_name(c.kv.k[0]->type) + ", V " + dtype_name(c.kv.v[0]->type) +
                    ", " + std::to_string(c.params.n_seq) + " x " + std::to_string(c.params.n_ctx) + " cells";
    if (c.m.gpu != nullptr && c.m.n_gpu_layers > 0) s += ", " + size(host) + " of it in host memory";
    return s;
}

PerfStats Context::perf() const {
    PerfStats p = impl_->perf;
    auto describe = [](const Backend& b) {
        const BackendStats s = b.stats();
        return "graphs: " + std::to_string(s.graph_captures) + " captured, " + std::to_string(s.graph_replays) +
               " replayed, " + std::to_string(s.graph_misses) + " misses, " + std::to_string(s.graph_evictions) +
               " evicted; eager steps " + std::to_string(s.eager_steps) +
               (s.step_launches != 0 ? "; launches in the last step " + std::to_string(s.step_launches) : "") +
               "; memory in use " +
               std::to_string(s.mem_in_use >> 20) + " MiB, peak " + std::to_string(s.mem_peak >> 20) +
               " MiB, reserved " + std::to_string(s.mem_reserved >> 20) + " MiB" +
               (s.packed_weights != 0 ? "; packed weights " + std::to_string(s.packed_weights >> 20) + " MiB" : "");
    };
    p.backend_stats.emplace_back(impl_->m.cpu->name(), describe(*impl_->m.cpu));
    if (impl_->m.gpu) p.backend_stats.emplace_back(impl_->m.gpu->name(), describe(*impl_->m.gpu));
    return p;
}

void Context::reset_perf() { impl_->perf = PerfStats{}; }

}  // namespace lantern
