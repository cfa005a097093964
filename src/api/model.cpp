#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "api/model_impl.h"
#include "backends/registry.h"
#include "backends/scheduler.h"
#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "gguf/split.h"

namespace lantern {
namespace {

const char* file_type_name(int64_t ft) {
    switch (ft) {
        case 0: return "F32";
        case 1: return "F16";
        case 2: return "Q4_0";
        case 3: return "Q4_1";
        case 7: return "Q8_0";
        case 8: return "Q5_0";
        case 9: return "Q5_1";
        case 10: return "Q2_K";
        case 11: return "Q3_K_S";
        case 12: return "Q3_K_M";
        case 13: return "Q3_K_L";
        case 14: return "Q4_K_S";
        case 15: return "Q4_K_M";
        case 16: return "Q5_K_S";
        case 17: return "Q5_K_M";
        case 18: return "Q6_K";
        case 32: return "BF16";
        default: return nullptr;
    }
}

std::string size_label(uint64_t n) {
    char buf[32];
    if (n >= 1000000000ull) {
        std::snprintf(buf, sizeof(buf), "%.1fB", static_cast<double>(n) / 1e9);
    } else {
        std::snprintf(buf, sizeof(buf), "%.0fM", static_cast<double>(n) / 1e6);
    }
    return buf;
}

// LANTERN_CPU_REPACK=0 keeps the CPU's weights in the file's layout.
bool cpu_repack_enabled() {
    const char* v = std::getenv("LANTERN_CPU_REPACK");
    return v == nullptr || std::string_view(v) != "0";
}

}  // namespace

// For a one-token and a many-token step: a backend may accept an op at one
// batch size and not another.
std::vector<const Tensor*> plan_weights(Model::Impl& m) {
    std::vector<const Tensor*> cpu_products;
    Scheduler sched(*m.cpu, m.gpu.get(), static_cast<int>(m.hp.n_layer), m.n_gpu_layers, nullptr);
    // And for a short and the longest context: the context can change which
    // weights a step reads (phi3's long rope factors past its original one).
    const int64_t long_ctx = std::max<int64_t>(64, m.hp.n_ctx_train);
    for (auto [T, n_ctx] : {std::pair{int64_t{1}, int64_t{64}}, std::pair{int64_t{32}, int64_t{64}},
                            std::pair{int64_t{1}, long_ctx}, std::pair{int64_t{32}, long_ctx}}) {
        Graph g;
        KvCache kv;
        kv.n_ctx_seq = n_ctx;
        kv.n_seq = 1;
        const int64_t row = m.hp.head_dim * m.hp.n_head_kv;
        for (int64_t il = 0; il < m.hp.n_layer; ++il) {
            g.set_layer(static_cast<int>(il));
            kv.k.push_back(g.new_tensor(DType::F16, {row, kv.n_ctx_seq}, "cache_k"));
            kv.v.push_back(g.new_tensor(DType::F16, {row, kv.n_ctx_seq}, "cache_v"));
            kv.k.back()->flags |= kTensorCache;
            kv.v.back()->flags |= kTensorCache;
        }
        std::vector<int32_t> zeros(static_cast<size_t>(T), 0);
        const size_t bytes = zeros.size() * sizeof(int32_t);
        StepInputs in;
        in.tokens = g.input(DType::I32, {T}, "tokens", zeros.data(), bytes);
        in.pos = g.input(DType::I32, {T}, "positions", zeros.data(), bytes);
        in.seq = g.input(DType::I32, {T}, "sequences", zeros.data(), bytes);
        m.build(g, kv, in);
        Scheduler::Assignment a = sched.assign(g);
        for (size_t i = 0; i < a.nodes.size(); ++i) {
            const Tensor& node = *a.nodes[i];
            if (a.backends[i]->is_host()) {
                const auto [first, last] = CpuBackend::packed_sources(node.op);
                for (size_t s = first; s < last; ++s) {
                    const Tensor* w = node.src[s];
                    if (w->storage_root() == w && (w->flags & kTensorWeight) &&
                        std::find(cpu_products.begin(), cpu_products.end(), w) == cpu_products.end()) {
                        cpu_products.push_back(w);
                    }
                }
                continue;
            }
            for (const Tensor* s : node.src) {
                if (s == nullptr) continue;
                const Tensor* root = s->storage_root();
                if (root->flags & kTensorWeight) m.store.request(root, m.table->host_data(root), a.backends[i]);
            }
        }
    }
    return cpu_products;
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

std::unique_ptr<Model> Model::load(const std::string& path, const ModelParams& params) {
    const auto t0 = std::chrono::steady_clock::now();
    auto m = std::make_unique<Impl>();
    m->file = gguf::File::open(path);
    m->parts = gguf::open_other_parts(*m->file);
    m->tokenizer = std::make_unique<Tokenizer>(vocab_data_from_gguf(*m->file));
    m->chat_template = m->file->get_string("tokenizer.chat_template");
    if (params.vocab_only) {
        m->vocab_only = true;
        m->hp.arch = m->file->get_string("general.architecture").value_or("");
        m->hp.n_vocab = m->tokenizer->n_vocab();
        m->info.architecture = m->hp.arch;
        m->info.name = m->file->get_string("general.name").value_or("");
        m->info.n_vocab = m->tokenizer->n_vocab();
        m->info.file_bytes = m->file->size();
        m->info.description = m->hp.arch + " vocabulary";
        return std::unique_ptr<Model>(new Model(std::move(m)));
    }
    m->hp = read_hparams(*m->file);
    apply_rope_overrides(m->hp, params.rope);
    if (m->tokenizer->n_vocab() != m->hp.n_vocab) {
        throw Error(ErrorCode::Format, path + ": the vocabulary has " + std::to_string(m->tokenizer->n_vocab()) +
                                           " tokens but the model " + std::to_string(m->hp.n_vocab));
    }

    int threads = params.n_threads;
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    m->cpu = std::make_unique<CpuBackend>(threads);

    std::string backend = params.backend.empty() ? "cpu" : params.backend;
    if (backend == "auto") {
        backend = "cpu";
        for (const BackendFactory& f : gpu_backend_factories()) {
            if (!f.devices().empty()) {
                backend = f.name;
                break;
            }
        }
    }
    if (backend != "cpu") m->gpu = create_gpu_backend(backend, params.device);

    m->mapping = m->cpu->wrap(m->file->base(), m->file->size());
    std::vector<std::pair<const gguf::File*, Buffer*>> files = {{m->file.get(), m->mapping.get()}};
    for (const auto& part : m->parts) {
        m->part_mappings.push_back(m->cpu->wrap(part->base(), part->size()));
        files.emplace_back(part.get(), m->part_mappings.back().get());
    }
    m->table = std::make_unique<WeightTable>(files);
    m->table->realign(*m->cpu);
    m->arch = find_architecture(m->hp.arch);  // non-null: read_hparams checked it
    m->weights = m->arch->bind(*m->table, m->hp);
    m->rope_factors = apply_yarn(m->hp, m->weights, *m->cpu);
    for (const LoraAdapterParams& a : params.lora_adapters) {
        m->adapters.push_back(load_lora(a.path, a.scale, *m->table, m->hp, *m->cpu, m->weights));
    }

    const int n_layer = static_cast<int>(m->hp.n_layer);
    m->n_gpu_layers = m->gpu ? std::clamp(params.n_gpu_layers, 0, n_layer + 1) : 0;
    const bool pack_cpu = cpu_repack_enabled() && (!m->gpu || m->n_gpu_layers <= n_layer);
    std::vector<const Tensor*> cpu_products;
    if ((m->gpu && m->n_gpu_layers > 0) || pack_cpu) cpu_products = plan_weights(*m);
    if (!pack_cpu) cpu_products.clear();

    // Read every weight page once (mapped files load lazily), pack the CPU's
    // products and upload the device replicas, reporting progress over all
    // three by bytes.
    size_t data_bytes = 0;
    for (const auto& [f, buffer] : files) data_bytes += f->size() - std::min(f->size(), f->data_offset());
    size_t pack_bytes = 0;
    for (const Tensor* w : cpu_products) pack_bytes += w->nbytes();
    size_t upload_bytes = 0;
    if (m->gpu) upload_bytes = m->store.bytes_on(m->gpu.get());
    const double total = static_cast<double>(data_bytes + pack_bytes + upload_bytes);
    volatile uint8_t sink = 0;
    constexpr size_t kStep = 1 << 20;
    size_t read = 0;
    for (const auto& [f, buffer] : files) {
        const uint8_t* base = f->base() + f->data_offset();
        const size_t n = f->size() - std::min(f->size(), f->data_offset());
        for (size_t off = 0; off < n; off += 4096, read += 4096) {
            sink = static_cast<uint8_t>(sink + base[off]);
            if (params.progress && read % kStep == 0) params.progress(static_cast<float>(read / total));
        }
    }
    // The CPU's products' weights packed (from pages now in memory), and
    // their mapped pages handed back: the process keeps one copy.
    size_t packed = 0;
    for (const Tensor* w : cpu_products) {
        packed += w->nbytes();
        if (m->cpu->pack_weight(*w)) {
            for (const auto& [f, buffer] : files) {
                if (w->buffer == buffer) f->drop_pages(tensor_address(*w), w->nbytes());
            }
        }
        if (params.progress) params.progress(static_cast<float>((data_bytes + packed) / total));
    }
    m->store.upload([&](size_t done, size_t) {
        if (params.progress) params.progress(static_cast<float>((data_bytes + pack_bytes + done) / total));
    });
    if (params.progress) params.progress(1.0f);

    ModelInfo& info = m->info;
    info.architecture = m->hp.arch;
    info.name = m->file->get_string("general.name").value_or("");
    info.file_bytes = 0;
    for (const auto& [f, buffer] : files) {
        for (const gguf::TensorInfo& t : f->tensors()) info.n_params += static_cast<uint64_t>(t.n_elements());
        info.file_bytes += f->size();
    }
    const char* ft = file_type_name(m->file->get_int("general.file_type").value_or(-1));
    const LayerWeights& l0 = m->weights.layers[0];
    const Tensor* typical = l0.ffn_down != nullptr ? l0.ffn_down : l0.ffn_down_exps != nullptr ? l0.ffn_down_exps : l0.wo;
    info.file_type = ft != nullptr ? ft : dtype_name(typical->type);
    info.description = m->hp.arch + " " + size_label(info.n_params) + " " + info.file_type;
    if (!m->adapters.empty()) info.description += " + LoRA";  // so bench tables tell the runs apart
    info.n_layer = n_layer;
    info.n_embd = static_cast<int>(m->hp.n_embd);
    info.n_vocab = static_cast<int>(m->hp.n_vocab);
    info.n_ctx_train = static_cast<int>(m->hp.n_ctx_train);
    info.n_ctx_max = static_cast<int>(m->hp.n_ctx_max());
    info.has_chat_template = m->chat_template.has_value() && !m->chat_template->empty();
    // llama.cpp's LLAMA_POOLING_TYPE: 1 mean, 2 cls, 3 last (0 none and 4
    // rank have no single vector to give: mean, as when absent).
    switch (m->file->get_int(m->hp.arch + ".pooling_type").value_or(1)) {
        case 2: info.pooling = "cls"; break;
        case 3: info.pooling = "last"; break;
        default: info.pooling = "mean"; break;
    }
    info.n_gpu_layers = std::min(m->n_gpu_layers, n_layer);
    info.backend = m->gpu && m->n_gpu_layers > 0 ? m->gpu->name() : "cpu";
    info.device = m->gpu && m->n_gpu_layers > 0 ? m->gpu->description() : m->cpu->description();
    (void)t0;
    return std::unique_ptr<Model>(new Model(std::move(m)));
}

const ModelInfo& Model::info() const { return impl_->info; }
int Model::n_vocab() const { return static_cast<int>(impl_->hp.n_vocab); }

std::vector<int32_t> Model::tokenize(std::string_view text, bool add_special, bool parse_special) const {
    return impl_->tokenizer->encode(text, add_special, parse_special);
}

std::string Model::token_to_piece(int32_t token, bool render_special) const {
    return impl_->tokenizer->token_to_piece(token, render_special);
}

std::string Model::detokenize(const std::vector<int32_t>& tokens, bool render_special) const {
    return impl_->tokenizer->decode(tokens, render_special);
}

bool Model::is_end_of_generation(int32_t token) const { return impl_->tokenizer->is_eog(token); }

SharedTokenTexts Model::Impl::token_texts() const {
    std::call_once(token_texts_once, [this] {
        const auto n = static_cast<size_t>(tokenizer->n_vocab());
        TokenTexts t{std::vector<std::string>(n), std::vector<bool>(n)};
        for (size_t i = 0; i < n; ++i) {
            t.pieces[i] = tokenizer->token_to_piece(static_cast<int32_t>(i), false);
            t.eog[i] = tokenizer->is_eog(static_cast<int32_t>(i));
        }
        token_texts_ = std::make_shared<const TokenTexts>(std::move(t));
    });
    return token_texts_;
}
int32_t Model::bos_token() const { return impl_->tokenizer->bos(); }
int32_t Model::eos_token() const { return impl_->tokenizer->eos(); }
std::string Model::chat_template() const { return impl_->chat_template.value_or(""); }

namespace {

ChatTemplate chosen_template(Model::Impl& m, const std::string& override_template) {
    std::lock_guard<std::mutex> lock(m.chat_mutex);
    auto it = m.chat_templates.find(override_template);
    if (it == m.chat_templates.end()) {
        const Tokenizer& tok = *m.tokenizer;
        auto text_of = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
        ChatTemplate t = ChatTemplate::select(
            override_template, m.chat_template.value_or(""),
            [&](std::string_view text) { return tok.find_token(text).has_value(); }, text_of(tok.bos()),
            text_of(tok.eos()));
        it = m.chat_templates.emplace(override_template, std::move(t)).first;
    }
    return it->second;  // copies share the parsed template
}

}  // namespace

std::string Model::apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                       const std::string& override_template) const {
    return chosen_template(*impl_, override_template).apply(messages, add_generation_prompt);
}

ChatPrompt Model::apply_chat_template(const std::vector<ChatMessage>& messages, const ChatTools& tools,
                                      bool add_generation_prompt, const std::string& override_template,
                                      const std::string& template_kwargs) const {
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (!template_kwargs.empty()) {
        extra = nlohmann::ordered_json::parse(template_kwargs, nullptr, false);
        if (!extra.is_object()) throw Error(ErrorCode::InvalidArgument, "template_kwargs must be a JSON object");
    }
    return render_with_tools(chosen_template(*impl_, override_template), messages, tools, add_generation_prompt, extra);
}

}  // namespace lantern
