// The reference backend of the op tests: every op written plainly, one
// element at a time, accumulating in double. Quantized rows are decoded with
// the published block layouts (quant::dequantize_row, itself tested against
// hand-made blocks). Nothing here is fast; everything here is obvious.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "lantern/error.h"
#include "op_harness.h"
#include "quant/quant.h"

namespace lantern::test {
namespace {

const uint8_t* at(const Tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return static_cast<const uint8_t*>(tensor_address(t)) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}
uint8_t* at_mut(const Tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return static_cast<uint8_t*>(tensor_address(t)) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// Row (i1, i2, i3) of t as doubles, whatever its type.
std::vector<double> row(const Tensor& t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    const uint8_t* p = at(t, i1, i2, i3);
    std::vector<double> out(static_cast<size_t>(t.ne[0]));
    switch (t.type) {
        case DType::F32:
            for (int64_t i = 0; i < t.ne[0]; ++i) out[static_cast<size_t>(i)] = reinterpret_cast<const float*>(p)[i];
            break;
        case DType::F16:
            for (int64_t i = 0; i < t.ne[0]; ++i) out[static_cast<size_t>(i)] = fp16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
            break;
        case DType::BF16:
            for (int64_t i = 0; i < t.ne[0]; ++i) out[static_cast<size_t>(i)] = bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
            break;
        default: {
            std::vector<float> f(static_cast<size_t>(t.ne[0]));
            quant::dequantize_row(t.type, p, f.data(), t.ne[0]);
            for (size_t i = 0; i < f.size(); ++i) out[i] = f[i];
        }
    }
    return out;
}

void store(const Tensor& t, const std::vector<double>& v, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    uint8_t* p = at_mut(t, i1, i2, i3);
    if (dtype_is_quantized(t.type)) {  // a quantized KV cache's row
        const quant::TypeOps* ops = quant::type_ops(t.type);
        if (ops == nullptr || ops->from_float_ref == nullptr) {
            throw Error(ErrorCode::Unsupported, "reference: cannot store this type");
        }
        const std::vector<float> f(v.begin(), v.begin() + t.ne[0]);
        ops->from_float_ref(f.data(), p, t.ne[0]);
        return;
    }
    for (int64_t i = 0; i < t.ne[0]; ++i) {
        const float x = static_cast<float>(v[static_cast<size_t>(i)]);
        switch (t.type) {
            case DType::F32: reinterpret_cast<float*>(p)[i] = x; break;
            case DType::F16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_fp16(x); break;
            case DType::BF16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_bf16(x); break;
            default: throw Error(ErrorCode::Unsupported, "reference: cannot store this type");
        }
    }
}

int32_t i32(const Tensor& t, int64_t i) { return reinterpret_cast<const int32_t*>(tensor_address(t))[i]; }

template <class Fn>
void each_row(const Tensor& dst, Fn&& fn) {
    for (int64_t i3 = 0; i3 < dst.ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < dst.ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < dst.ne[1]; ++i1) fn(i1, i2, i3);
}

std::vector<double> rms(const std::vector<double>& x, const Tensor* w, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
    std::vector<double> y(x.size());
    const std::vector<double> wv = w != nullptr ? row(*w, 0) : std::vector<double>(x.size(), 1.0);
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * wv[i];
    return y;
}

void rope_rows(const Tensor& dst, const Tensor& x, int64_t head0, const Tensor& pos, const Tensor* ff) {
    const int n_rot = dst.param_i(0);
    const bool neox = dst.param_i(1) == static_cast<int32_t>(RopeMode::Neox);
    const double base = dst.param_f(2), scale = dst.param_f(3), mscale = dst.param_f(5);
    const std::vector<double> factors = ff != nullptr ? row(*ff, 0) : std::vector<double>(static_cast<size_t>(n_rot / 2), 1.0);
    for (int64_t t = 0; t < x.ne[2]; ++t) {
        for (int64_t h = 0; h < x.ne[1]; ++h) {
            std::vector<double> v = row(x, h, t), y = v;
            for (int i = 0; i < n_rot / 2; ++i) {
                const double theta = i32(pos, t) * scale * std::pow(base, -2.0 * i / n_rot) / factors[static_cast<size_t>(i)];
                const size_t a = neox ? static_cast<size_t>(i) : static_cast<size_t>(2 * i);
                const size_t b = neox ? static_cast<size_t>(i + n_rot / 2) : static_cast<size_t>(2 * i + 1);
                y[a] = (v[a] * std::cos(theta) - v[b] * std::sin(theta)) * mscale;
                y[b] = (v[a] * std::sin(theta) + v[b] * std::cos(theta)) * mscale;
            }
            store(dst, y, head0 + h, t);
        }
    }
}

void eval(const Tensor& d) {
    const Tensor* const* s = d.src.data();
    switch (d.op) {
        case Op::GetRows:
            for (int64_t r = 0; r < d.ne[1]; ++r) store(d, row(*s[0], i32(*s[1], r)), r);
            return;
        case Op::MulMat:
        case Op::MulMatAdd:
            each_row(d, [&](int64_t m, int64_t i2, int64_t i3) {
                const std::vector<double> x = row(*s[1], m, i2, i3);
                std::vector<double> y(static_cast<size_t>(d.ne[0]));
                const std::vector<double> addend = d.op == Op::MulMatAdd ? row(*s[2], m, i2, i3) : y;
                for (int64_t n = 0; n < d.ne[0]; ++n) {
                    const std::vector<double> w = row(*s[0], n);
                    double acc = addend[static_cast<size_t>(n)];
                    for (size_t k = 0; k < x.size(); ++k) acc += w[k] * x[k];
                    y[static_cast<size_t>(n)] = acc;
                }
                store(d, y, m, i2, i3);
            });
            return;
        case Op::RmsNorm:
            each_row(d, [&](int64_t i1, int64_t i2, int64_t i3) { store(d, rms(row(*s[0], i1, i2, i3), s[1], d.param_f(0)), i1, i2, i3); });
            return;
        case Op::Add:
        case Op::Mul:
        case Op::SiluMul:
        case Op::GeluMul:
            each_row(d, [&](int64_t i1, int64_t i2, int64_t i3) {
                std::vector<double> a = row(*s[0], i1 % s[0]->ne[1], i2 % s[0]->ne[2], i3 % s[0]->ne[3]);
                const std::vector<double> b = row(*s[1], i1 % s[1]->ne[1], i2 % s[1]->ne[2], i3 % s[1]->ne[3]);
                for (size_t i = 0; i < a.size(); ++i) {
                    const double g = a[i];
                    switch (d.op) {
                        case Op::Add: a[i] = g + b[i]; break;
                        case Op::Mul: a[i] = g * b[i]; break;
                        case Op::SiluMul: a[i] = g / (1.0 + std::exp(-g)) * b[i]; break;
                        default: a[i] = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * b[i];
                    }
                }
                store(d, a, i1, i2, i3);
            });
            return;
        case Op::MoeFfn: {
            const int64_t E = s[1]->ne[1], F = s[2]->ne[1], k = d.param_i(0);
            auto dot = [](const std::vector<double>& a, const std::vector<double>& b) {
                double acc = 0;
                for (size_t i = 0; i < a.size(); ++i) acc += a[i] * b[i];
                return acc;
            };
            for (int64_t t = 0; t < d.ne[1]; ++t) {
                const std::vector<double> x = row(*s[0], t);
                std::vector<double> p(static_cast<size_t>(E));
                double mx = -INFINITY, sum = 0;
                for (int64_t e = 0; e < E; ++e) mx = std::max(mx, p[static_cast<size_t>(e)] = dot(row(*s[1], e), x));
                for (double& v : p) sum += v = std::exp(v - mx);
                std::vector<int64_t> order(static_cast<size_t>(E));
                for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = e;
                std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
                double chosen = 0;
                for (int64_t j = 0; j < k; ++j) chosen += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
                std::vector<double> y(static_cast<size_t>(d.ne[0]), 0.0);
                for (int64_t j = 0; j < k; ++j) {
                    const int64_t e = order[static_cast<size_t>(j)];
                    const double w = p[static_cast<size_t>(e)] / (d.param_i(1) != 0 ? chosen : sum);
                    std::vector<double> h(static_cast<size_t>(F));
                    for (int64_t f = 0; f < F; ++f) {
                        const double g = dot(row(*s[2], f, e), x), u = dot(row(*s[3], f, e), x);
                        h[static_cast<size_t>(f)] = g / (1.0 + std::exp(-g)) * u;
                    }
                    for (int64_t n = 0; n < d.ne[0]; ++n) y[static_cast<size_t>(n)] += w * dot(row(*s[4], n, e), h);
                }
                store(d, y, t);
            }
            return;
        }
        case Op::Scale:
            each_row(d, [&](int64_t i1, int64_t i2, int64_t i3) {
                std::vector<double> a = row(*s[0], i1, i2, i3);
                for (double& v : a) v *= d.param_f(0);
                store(d, a, i1, i2, i3);
            });
            return;
        case Op::SigmoidGate:
            each_row(d, [&](int64_t i1, int64_t i2, int64_t i3) {
                std::vector<double> a = row(*s[0], i1, i2, i3);
                const double g = row(*s[1], i1, i2, i3)[0];
                for (double& v : a) v /= 1.0 + std::exp(-g);
                store(d, a, i1, i2, i3);
            });
            return;
        case Op::Softcap:
            each_row(d, [&](int64_t i1, int64_t i2, int64_t i3) {
                std::vector<double> a = row(*s[0], i1, i2, i3);
                const double cap = d.param_f(0);
                for (double& v : a) v = cap * std::tanh(v / cap);
                store(d, a, i1, i2, i3);
            });
            return;
        case Op::SoftMax:
            each_row(d, [&](int64_t i1, int64_t i2, int64_t i3) {
                std::vector<double> a = row(*s[0], i1, i2, i3);
                double mx = -INFINITY, sum = 0;
                for (double& v : a) mx = std::max(mx, v *= d.param_f(0));
                for (double& v : a) sum += (v = std::exp(v - mx));
                for (double& v : a) v /= sum;
                store(d, a, i1, i2, i3);
            });
            return;
        case Op::Rope:
            rope_rows(d, *s[0], 0, *s[1], s[2]);
            return;
        case Op::RopeQK:
            rope_rows(d, *s[0], 0, *s[2], s[3]);
            rope_rows(d, *s[1], s[0]->ne[1], *s[2], s[3]);
            return;
        case Op::AddRmsNorm:
            for (int64_t r = 0; r < d.ne[1]; ++r) {
                std::vector<double> a = row(*s[0], r);
                const std::vector<double> b = row(*s[1], r);
                for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
                store(d, a, r, 0);
                store(d, rms(a, s[2], d.param_f(0)), r, 1);
            }
            return;
        case Op::Copy:
            each_row(d, [&](int64_t i1, int64_t i2, int64_t i3) { store(d, row(*s[0], i1, i2, i3), i1, i2, i3); });
            return;
        case Op::KvStore: {
            const Tensor& cache = *s[1];
            for (int64_t t = 0; t < s[0]->ne[1]; ++t) {
                store(cache, row(*s[0], t), i32(*s[3], t) * d.param_i(0) + i32(*s[2], t));
            }
            return;
        }
        case Op::Attention: {
            const Tensor &q = *s[0], &kc = *s[1], &vc = *s[2];
            const int64_t hd = q.ne[0], n_head = q.ne[1], n_kv = d.param_i(0), n_ctx = d.param_i(1);
            const double scale = d.param_f(2), cap = d.param_f(3);
            const int64_t window = d.param_i(4);
            for (int64_t t = 0; t < q.ne[2]; ++t) {
                std::vector<double> out(static_cast<size_t>(hd * n_head));
                const int64_t p = i32(*s[3], t), base = i32(*s[4], t) * n_ctx;
                const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
                for (int64_t h = 0; h < n_head; ++h) {
                    const int64_t kvh = h / (n_head / n_kv);
                    const std::vector<double> qv = row(q, h, t);
                    std::vector<double> sc;
                    double mx = -INFINITY;
                    for (int64_t j = lo; j <= p; ++j) {
                        const std::vector<double> k = row(kc, base + j);
                        double dot = 0;
                        for (int64_t i = 0; i < hd; ++i) dot += qv[static_cast<size_t>(i)] * k[static_cast<size_t>(kvh * hd + i)];
                        dot *= scale;
                        if (cap > 0) dot = cap * std::tanh(dot / cap);
                        sc.push_back(dot);
                        mx = std::max(mx, dot);
                    }
                    double sum = 0;
                    for (double& v : sc) sum += (v = std::exp(v - mx));
                    for (int64_t j = lo; j <= p; ++j) {
                        const std::vector<double> v = row(vc, base + j);
                        for (int64_t i = 0; i < hd; ++i) {
                            out[static_cast<size_t>(h * hd + i)] += sc[static_cast<size_t>(j - lo)] / sum * v[static_cast<size_t>(kvh * hd + i)];
                        }
                    }
                }
                store(d, out, t);
            }
            return;
        }
        default:
            throw Error(ErrorCode::Unsupported, std::string("reference backend: no ") + op_name(d.op));
    }
}

class RefBuffer final : public Buffer {
public:
    RefBuffer(Backend& b, size_t n) : Buffer(b, n, std::calloc(n == 0 ? 1 : n, 1)) {}
    ~RefBuffer() override { std::free(base()); }
    void write(size_t off, const void* src, size_t n) override { std::memcpy(static_cast<uint8_t*>(base()) + off, src, n); }
    void read(size_t off, void* dst, size_t n) const override { std::memcpy(dst, static_cast<const uint8_t*>(base()) + off, n); }
    void fill(size_t off, uint8_t v, size_t n) override { std::memset(static_cast<uint8_t*>(base()) + off, v, n); }
};

class ReferenceBackend final : public Backend {
public:
    const char* name() const override { return "reference"; }
    std::string description() const override { return "scalar double-precision reference"; }
    bool is_host() const override { return true; }
    size_t alignment() const override { return 64; }
    std::unique_ptr<Buffer> alloc(size_t size, BufferKind) override { return std::make_unique<RefBuffer>(*this, size); }
    bool supports(const Tensor& node) const override { return node.op != Op::None && node.op != Op::Count; }
    void compute(const std::vector<Tensor*>& nodes, const ComputeHints&) override {
        for (const Tensor* n : nodes) eval(*n);
    }
};

// Forwards to another backend's buffer, but belongs to the masked backend.
class ForwardingBuffer final : public Buffer {
public:
    ForwardingBuffer(Backend& owner, std::unique_ptr<Buffer> inner)
        : Buffer(owner, inner->size(), inner->base()), inner_(std::move(inner)) {}
    void write(size_t off, const void* src, size_t n) override { inner_->write(off, src, n); }
    void read(size_t off, void* dst, size_t n) const override { inner_->read(off, dst, n); }
    void fill(size_t off, uint8_t v, size_t n) override { inner_->fill(off, v, n); }

private:
    std::unique_ptr<Buffer> inner_;
};

class MaskedBackend final : public Backend {
public:
    MaskedBackend(Backend& inner, std::vector<Op> hidden, bool pretend_device = false)
        : inner_(inner), hidden_(std::move(hidden)), device_(pretend_device) {}
    const char* name() const override { return device_ ? "fake-device" : inner_.name(); }
    std::string description() const override { return inner_.description() + (device_ ? " (as a device)" : " (masked)"); }
    bool is_host() const override { return !device_ && inner_.is_host(); }
    size_t alignment() const override { return inner_.alignment(); }
    std::unique_ptr<Buffer> alloc(size_t size, BufferKind kind) override {
        return std::make_unique<ForwardingBuffer>(*this, inner_.alloc(size, kind));
    }
    bool supports(const Tensor& node) const override {
        for (Op op : hidden_) {
            if (node.op == op) return false;
        }
        return inner_.supports(node);
    }
    size_t weight_bytes(const Tensor& w) const override { return inner_.weight_bytes(w); }
    void upload_weight(const Tensor& w, const void* host) override { inner_.upload_weight(w, host); }
    void compute(const std::vector<Tensor*>& nodes, const ComputeHints& hints) override { inner_.compute(nodes, hints); }
    void set_tensor_async(const Tensor& t, const void* d, size_t o, size_t n) override { inner_.set_tensor_async(t, d, o, n); }
    void get_tensor_async(const Tensor& t, void* d, size_t o, size_t n) override { inner_.get_tensor_async(t, d, o, n); }
    void synchronize() override { inner_.synchronize(); }

private:
    Backend& inner_;
    std::vector<Op> hidden_;
    bool device_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

std::unique_ptr<Backend> make_masked_backend(Backend& inner, std::vector<Op> hidden) {
    return std::make_unique<MaskedBackend>(inner, std::move(hidden));
}

std::unique_ptr<Backend> make_fake_device(Backend& host_inner, std::vector<Op> hidden) {
    return std::make_unique<MaskedBackend>(host_inner, std::move(hidden), true);
}

}  // namespace lantern::test
