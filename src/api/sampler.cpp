// The public Sampler: the engine's TokenSampler behind a stable interface.
#include "lantern/lantern.h"
#include "sampling/sampler.h"

namespace lantern {

struct Sampler::Impl {
    TokenSampler sampler;
};

Sampler::Sampler(const SamplerParams& params, int n_vocab)
    : impl_(std::make_unique<Impl>(Impl{TokenSampler(params, n_vocab)})) {}
Sampler::~Sampler() = default;
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;

int32_t Sampler::sample(const float* logits) {
    const int32_t token = impl_->sampler.sample(logits);
    impl_->sampler.accept(token);
    return token;
}

void Sampler::accept(int32_t token) { impl_->sampler.accept(token); }
void Sampler::reset() { impl_->sampler.reset(); }

}  // namespace lantern
