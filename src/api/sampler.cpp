// The public Sampler: the engine's TokenSampler behind a stable interface,
// with the JSON or grammar constraint (sampling/json_constraint.h,
// sampling/grammar_constraint.h) when asked for.
#include <optional>

#include "api/model_impl.h"
#include "lantern/lantern.h"
#include "sampling/grammar_constraint.h"
#include "sampling/json_constraint.h"
#include "sampling/sampler.h"

namespace lantern {

struct Sampler::Impl {
    TokenSampler sampler;
    std::optional<JsonConstraint> json;
    std::optional<GrammarConstraint> grammar;
};

namespace {

bool json_output(const SamplerParams& params) { return params.json_object || !params.json_schema.empty(); }

bool constrained(const SamplerParams& params) { return json_output(params) || !params.grammar.empty(); }

bool dry_breakers(const SamplerParams& params) {
    return params.dry_multiplier > 0.0f && params.dry_penalty_last_n != 0 && !params.dry_sequence_breakers.empty();
}

void check_constraints(const SamplerParams& params) {
    if (!params.json_prefixes.empty() && !json_output(params)) {
        throw Error(ErrorCode::InvalidArgument, "sampler: json_prefixes needs json_object or json_schema");
    }
    if (!params.grammar.empty() && json_output(params)) {
        throw Error(ErrorCode::InvalidArgument, "sampler: a grammar cannot be combined with json_object or json_schema");
    }
}

}  // namespace

void check_json_schema(std::string_view schema) { JsonSchema::parse(schema); }

void check_grammar(std::string_view grammar) {
    // The start state too: a grammar can parse and still begin too many ways.
    GrammarState start(Grammar::parse(grammar));
}

Sampler::Sampler(const SamplerParams& params, int n_vocab)
    : impl_(std::make_unique<Impl>(Impl{TokenSampler(params, n_vocab), std::nullopt, std::nullopt})) {
    check_constraints(params);
    if (constrained(params) || dry_breakers(params)) {
        throw Error(ErrorCode::InvalidArgument,
                    "sampler: json_object, json_schema, grammar and DRY's sequence breakers need the model's vocabulary "
                    "(Sampler(params, model))");
    }
}

Sampler::Sampler(const SamplerParams& params, const Model& model)
    : impl_(std::make_unique<Impl>(Impl{TokenSampler(params, model.n_vocab()), std::nullopt, std::nullopt})) {
    check_constraints(params);
    if (!constrained(params) && !dry_breakers(params)) return;
    auto grammar = params.grammar.empty() ? nullptr : Grammar::parse(params.grammar);
    SharedTokenTexts texts = model.impl().token_texts();
    if (dry_breakers(params)) impl_->sampler.set_pieces(texts->pieces);
    if (!constrained(params)) return;
    if (grammar) {
        impl_->grammar.emplace(std::move(texts), std::move(grammar));
    } else {
        impl_->json.emplace(std::move(texts), params.json_prefixes,
                            params.json_schema.empty() ? nullptr : JsonSchema::parse(params.json_schema));
    }
}

Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

int32_t Sampler::sample(const float* logits) {
    const int32_t token = impl_->json      ? impl_->json->sample(impl_->sampler, logits)
                          : impl_->grammar ? impl_->grammar->sample(impl_->sampler, logits)
                                           : impl_->sampler.sample(logits);
    impl_->sampler.accept(token);
    return token;
}

void Sampler::accept(int32_t token) { impl_->sampler.accept(token); }

void Sampler::reset() {
    impl_->sampler.reset();
    restart_output();
}

void Sampler::restart_output() {
    if (impl_->json) impl_->json->reset();
    if (impl_->grammar) impl_->grammar->reset();
}

}  // namespace lantern
