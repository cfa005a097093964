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

JsonConstraint json_constraint(const Model& model, const SamplerParams& params) {
    const int n = model.n_vocab();
    std::vector<std::string> pieces(static_cast<size_t>(n));
    std::vector<bool> eog(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) {
        pieces[static_cast<size_t>(t)] = model.token_to_piece(t);
        eog[static_cast<size_t>(t)] = model.is_end_of_generation(t);
    }
    return JsonConstraint(std::move(pieces), std::move(eog), params.json_prefixes,
                          params.json_schema.empty() ? nullptr : JsonSchema::parse(params.json_schema));
}

bool json_output(const SamplerParams& params) { return params.json_object || !params.json_schema.empty(); }

void check_json_prefixes(const SamplerParams& params) {
    if (!params.json_prefixes.empty() && !json_output(params)) {
        throw Error(ErrorCode::InvalidArgument, "sampler: json_prefixes needs json_object or json_schema");
    }
}

}  // namespace

void check_json_schema(std::string_view schema) { JsonSchema::parse(schema); }

Sampler::Sampler(const SamplerParams& params, int n_vocab)
    : impl_(std::make_unique<Impl>(Impl{TokenSampler(params, n_vocab), std::nullopt})) {
    check_json_prefixes(params);
    if (json_output(params)) {
        throw Error(ErrorCode::InvalidArgument,
                    "sampler: json_object and json_schema need the model's vocabulary (Sampler(params, model))");
    }
}

Sampler::Sampler(const SamplerParams& params, const Model& model)
    : impl_(std::make_unique<Impl>(Impl{TokenSampler(params, model.n_vocab()), std::nullopt})) {
    check_json_prefixes(params);
    if (json_output(params)) impl_->json.emplace(json_constraint(model, params));
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
