// The public Sampler: the engine's TokenSampler behind a stable interface,
// with the JSON constraint (sampling/json_constraint.h) when asked for.
#include <optional>

#include "lantern/lantern.h"
#include "sampling/json_constraint.h"
#include "sampling/sampler.h"

namespace lantern {

struct Sampler::Impl {
    TokenSampler sampler;
    std::optional<JsonConstraint> json;
};

namespace {

JsonConstraint json_constraint(const Model& model, std::vector<std::string> prefixes) {
    const int n = model.n_vocab();
    std::vector<std::string> pieces(static_cast<size_t>(n));
    std::vector<bool> eog(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
        pieces[static_cast<size_t>(t)] = model.token_to_piece(t);
        eog[static_cast<size_t>(t)] = model.is_end_of_generation(t);
    }
    return JsonConstraint(std::move(pieces), std::move(eog), std::move(prefixes));
}

void check_json_prefixes(const SamplerParams& params) {
    if (!params.json_prefixes.empty() && !params.json_object) {
        throw Error(ErrorCode::InvalidArgument, "sampler: json_prefixes needs json_object");
    }
}

}  // namespace

Sampler::Sampler(const SamplerParams& params, int n_vocab)
    : impl_(std::make_unique<Impl>(Impl{TokenSampler(params, n_vocab), std::nullopt})) {
    check_json_prefixes(params);
    if (params.json_object) {
        throw Error(ErrorCode::InvalidArgument, "sampler: json_object needs the model's vocabulary (Sampler(params, model))");
    }
}

Sampler::Sampler(const SamplerParams& params, const Model& model)
    : impl_(std::make_unique<Impl>(Impl{TokenSampler(params, model.n_vocab()), std::nullopt})) {
    check_json_prefixes(params);
    if (params.json_object) impl_->json.emplace(json_constraint(model, params.json_prefixes));
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

int32_t Sampler::sample(const float* logits) {
    const int32_t token = impl_->json ? impl_->json->sample(impl_->sampler, logits) : impl_->sampler.sample(logits);
    impl_->sampler.accept(token);
    return token;
}

void Sampler::accept(int32_t token) { impl_->sampler.accept(token); }

void Sampler::reset() {
    impl_->sampler.reset();
    if (impl_->json) impl_->json->reset();
}

}  // namespace lantern
