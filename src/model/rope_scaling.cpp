#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cpu/cpu_backend.h"
#include "lantern/error.h"
#include "quant/quant.h"

namespace lantern {
namespace {

constexpr double kPi = 3.14159265358979323846;

void check(bool ok, const std::string& what) {
    if (!ok) throw Error(ErrorCode::InvalidArgument, "rope override " + what);
}

// The pair index at which a pair turns `rotations` times over the original
// context (fractional): pair i has wavelength 2 pi base^(2i / n_rot).
double correction_dim(const HParams& hp, double rotations) {
    return static_cast<double>(hp.n_rot) *
           std::log(static_cast<double>(hp.n_ctx_orig) / (rotations * 2.0 * kPi)) /
           (2.0 * std::log(static_cast<double>(hp.rope_base)));
}

}  // namespace

void apply_rope_overrides(HParams& hp, const RopeOverrides& o) {
    if (!o.scaling.empty()) {
        if (o.scaling == "none") {
            hp.rope_scaling = RopeScaling::None;
            hp.rope_freq_scale = 1.0f;
        } else if (o.scaling == "linear") {
            hp.rope_scaling = RopeScaling::Linear;
        } else if (o.scaling == "yarn") {
            hp.rope_scaling = RopeScaling::Yarn;
        } else {
            check(false, "scaling '" + o.scaling + "' is not one of none, linear, yarn");
        }
    }
    check(std::isfinite(o.freq_base) && o.freq_base >= 0.0f, "freq_base must be a positive number");
    if (o.freq_base > 0.0f) hp.rope_base = o.freq_base;
    check(std::isfinite(o.freq_scale) && o.freq_scale >= 0.0f, "freq_scale must be a positive number");
    if (o.freq_scale > 0.0f && hp.rope_scaling != RopeScaling::None) {
        hp.rope_freq_scale = o.freq_scale;
    } else if (o.freq_scale > 0.0f && o.scaling.empty()) {
        // A scale for a file without scaling is linear, as llama.cpp takes it.
        hp.rope_scaling = RopeScaling::Linear;
        hp.rope_freq_scale = o.freq_scale;
    }
    check(o.yarn_orig_ctx >= 0, "yarn_orig_ctx must not be negative");
    if (o.yarn_orig_ctx > 0) hp.n_ctx_orig = o.yarn_orig_ctx;
    const auto set = [](float v, float& field, const char* name, bool zero_ok) {
        check(std::isfinite(v), std::string(name) + " must be a number");
        if (v < 0.0f) return;  // unset
        check(zero_ok || v > 0.0f, std::string(name) + " must be positive");
        field = v;
    };
    set(o.yarn_ext_factor, hp.yarn_ext_factor, "yarn_ext_factor", true);
    set(o.yarn_attn_factor, hp.yarn_attn_factor, "yarn_attn_factor", true);
    set(o.yarn_beta_fast, hp.yarn_beta_fast, "yarn_beta_fast", false);
    set(o.yarn_beta_slow, hp.yarn_beta_slow, "yarn_beta_slow", false);
    const bool scaled = hp.rope_scaling == RopeScaling::Linear || hp.rope_scaling == RopeScaling::Yarn;
    hp.rope_scale = scaled ? hp.rope_freq_scale : 1.0f;
}

std::vector<float> yarn_frequency_multipliers(const HParams& hp) {
    const int64_t n_pairs = hp.n_rot / 2;
    const double low = std::max(0.0, std::floor(correction_dim(hp, hp.yarn_beta_fast)));
    const double high = std::min(static_cast<double>(hp.n_rot - 1), std::ceil(correction_dim(hp, hp.yarn_beta_slow)));
    const double s = hp.rope_freq_scale;
    std::vector<float> m(static_cast<size_t>(n_pairs));
    for (int64_t i = 0; i < n_pairs; ++i) {
        const double y = (static_cast<double>(i) - low) / std::max(0.001, high - low);
        const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
        const double extrapolated = ramp * hp.yarn_ext_factor;
        m[static_cast<size_t>(i)] = static_cast<float>(s * (1.0 - extrapolated) + extrapolated);
    }
    return m;
}

float yarn_magnitude(const HParams& hp) {
    if (hp.yarn_ext_factor == 0.0f || hp.rope_freq_scale >= 1.0f) return hp.yarn_attn_factor;
    return hp.yarn_attn_factor * static_cast<float>(1.0 + 0.1 * std::log(1.0 / hp.rope_freq_scale));
}

std::unique_ptr<RopeFactorTensors> apply_yarn(HParams& hp, ModelWeights& w, CpuBackend& host) {
    if (hp.rope_scaling != RopeScaling::Yarn || hp.rope_freq_scale == 1.0f) return nullptr;
    if (hp.arch == "gemma2" || hp.arch == "gemma3") {
        throw Error(ErrorCode::Unsupported,
                    "YaRN rope scaling is not supported for " + hp.arch + " (its local layers rotate unscaled)");
    }
    if (hp.yarn_beta_fast <= 0.0f || hp.yarn_beta_slow <= 0.0f) {
        throw Error(ErrorCode::Format, "YaRN needs positive yarn_beta_fast and yarn_beta_slow");
    }
    const std::vector<float> mult = yarn_frequency_multipliers(hp);

    // Every place a step reads factors from, and the distinct factors there
    // (null: none, which YaRN turns into its own).
    std::vector<Tensor**> slots = {&w.rope_freqs};
    for (LayerWeights& l : w.layers) {
        if (l.rope_freqs != nullptr) slots.push_back(&l.rope_freqs);
    }
    std::vector<const Tensor*> sources;
    for (Tensor** slot : slots) {
        if (std::find(sources.begin(), sources.end(), *slot) == sources.end()) sources.push_back(*slot);
    }

    auto out = std::make_unique<RopeFactorTensors>();
    const int64_t n = static_cast<int64_t>(mult.size());
    const size_t stride = (static_cast<size_t>(n) * sizeof(float) + 31) / 32 * 32;
    out->buffer = host.alloc(stride * sources.size(), BufferKind::Weights);
    std::vector<float> values(static_cast<size_t>(n));
    for (size_t k = 0; k < sources.size(); ++k) {
        const Tensor* src = sources[k];
        if (src != nullptr) {
            const auto* bytes = static_cast<const uint8_t*>(src->buffer->base()) + src->offset;
            quant::dequantize_row(src->type, bytes, values.data(), n);
        } else {
            std::fill(values.begin(), values.end(), 1.0f);
        }
        for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] /= mult[static_cast<size_t>(i)];
        out->buffer->write(k * stride, values.data(), values.size() * sizeof(float));
        Tensor& t = out->tensors.emplace_back();
        t.type = DType::F32;
        t.ne = {n, 1, 1, 1};
        t.set_contiguous_strides();
        t.buffer = out->buffer.get();
        t.offset = k * stride;
        t.flags = kTensorWeight;
        t.name = "rope_freqs.yarn";
        for (Tensor** slot : slots) {
            if (*slot == src) *slot = &t;
        }
    }
    hp.rope_attn_factor *= yarn_magnitude(hp);
    hp.rope_scale = 1.0f;
    return out;
}

}  // namespace lantern
