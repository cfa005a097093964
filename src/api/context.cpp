#include <algorithm>
#include <chrono>
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

// Each layer's cache goes where that layer's KV writes run.
void Context::Impl::place_caches() {
    Batch one;
    one.add(0, 0, 0, true);
    std::unique_ptr<Step> probe = build_step(one, 0, 1, {0});
    Scheduler::Assignment a = sched->assign(probe->graph);
    std::map<Backend*, std::vector<Tensor*>> by_backend;
    for (size_t i = 0; i < a.nodes.size(); ++i) {
        if (a.nodes[i]->op != Op::KvStore) continue;
        by_backend[a.backends[i]].push_back(a.nodes[i]->src[1]);
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
    const int64_t row = m.hp.head_dim * m.hp.n_head_kv;
    for (int64_t il = 0; il < m.hp.n_layer; ++il) {
        c.cache_graph.set_layer(static_cast<int>(il));
        for (auto* list : {&c.kv.k, &c.kv.v}) {
            Tensor* t = c.cache_graph.new_tensor(DType::F16, {row, c.kv.n_ctx_seq * c.kv.n_seq},
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
