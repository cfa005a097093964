// KV-cache writes and causal attention over the cache.
//
// The cache of a layer holds n_seq slots of n_ctx_seq cells; the token at
// (seq s, position p) lives in cell s * n_ctx_seq + p. Positions and sequence
// ids are read from the step's input tensors, so the graph is the same at
// every decode position.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/cpu_math.h"
#include "core/half.h"

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

namespace lantern::cpu {

float dot_f32_f16(const float* a, const uint16_t* b, int64_t n) {
    int64_t i = 0;
    float s = 0.0f;
#if defined(__AVX512F__)
    __m512 acc = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        const __m512 vb = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
        acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), vb, acc);
    }
    s = _mm512_reduce_add_ps(acc);
#elif defined(__F16C__) && defined(__FMA__)
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 vb = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), vb, acc);
    }
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    lo = _mm_hadd_ps(lo, lo);
    lo = _mm_hadd_ps(lo, lo);
    s = _mm_cvtss_f32(lo);
#endif
    for (; i < n; ++i) s += a[i] * fp16_to_f32(b[i]);
    return s;
}

void axpy_f16(float w, const uint16_t* v, float* out, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    const __m512 vw = _mm512_set1_ps(w);
    for (; i + 16 <= n; i += 16) {
        const __m512 vv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)));
        _mm512_storeu_ps(out + i, _mm512_fmadd_ps(vw, vv, _mm512_loadu_ps(out + i)));
    }
#elif defined(__F16C__) && defined(__FMA__)
    const __m256 vw = _mm256_set1_ps(w);
    for (; i + 8 <= n; i += 8) {
        const __m256 vv = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
        _mm256_storeu_ps(out + i, _mm256_fmadd_ps(vw, vv, _mm256_loadu_ps(out + i)));
    }
#endif
    for (; i < n; ++i) out[i] += w * fp16_to_f32(v[i]);
}

namespace {

bool cache_type_ok(DType t) { return t == DType::F16 || t == DType::F32; }

float dot_cache(const float* q, const uint8_t* k, DType t, int64_t n) {
    return t == DType::F16 ? dot_f32_f16(q, reinterpret_cast<const uint16_t*>(k), n)
                           : dot_f32(q, reinterpret_cast<const float*>(k), n);
}

void axpy_cache(float w, const uint8_t* v, DType t, float* out, int64_t n) {
    if (t == DType::F16) {
        axpy_f16(w, reinterpret_cast<const uint16_t*>(v), out, n);
    } else {
        const float* vf = reinterpret_cast<const float*>(v);
        for (int64_t i = 0; i < n; ++i) out[i] += w * vf[i];
    }
}

}  // namespace

bool kv_store_accepts(const Tensor& dst) {
    return dst.src[0]->type == DType::F32 && cache_type_ok(dst.src[1]->type) && dst.src[2]->type == DType::I32 &&
           dst.src[3]->type == DType::I32;
}

void kv_store(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& src = *dst.src[0];
    const Tensor& cache = *dst.src[1];
    const int32_t* pos = data_at<const int32_t>(*dst.src[2]);
    const int32_t* seq = data_at<const int32_t>(*dst.src[3]);
    const int64_t n_ctx_seq = dst.param_i(0);
    const int64_t D = src.ne[0];
    int64_t begin, end;
    split_range(src.ne[1], ctx.ith, ctx.nth, begin, end);
    for (int64_t t = begin; t < end; ++t) {
        const int64_t cell = static_cast<int64_t>(seq[t]) * n_ctx_seq + pos[t];
        if (pos[t] < 0 || pos[t] >= n_ctx_seq || cell < 0 || cell >= cache.ne[1]) continue;  // validated upstream
        const float* in = reinterpret_cast<const float*>(row_ptr(src, t));
        uint8_t* out = row_ptr_mut(cache, cell);
        if (cache.type == DType::F16) {
            auto* o = reinterpret_cast<uint16_t*>(out);
            for (int64_t i = 0; i < D; ++i) o[i] = f32_to_fp16(in[i]);
        } else {
            std::memcpy(out, in, static_cast<size_t>(D) * sizeof(float));
        }
    }
}

bool attention_accepts(const Tensor& dst) {
    const Tensor& q = *dst.src[0];
    return q.type == DType::F32 && q.nb[0] == sizeof(float) && cache_type_ok(dst.src[1]->type) &&
           dst.src[2]->type == dst.src[1]->type && dst.src[3]->type == DType::I32 && dst.src[4]->type == DType::I32;
}

size_t attention_scratch(const Tensor& dst, int nth) {
    const size_t per_thread = static_cast<size_t>(dst.param_i(1)) + static_cast<size_t>(dst.src[0]->ne[0]) + 16;
    return per_thread * sizeof(float) * static_cast<size_t>(nth);
}

void attention(const KernelContext& ctx, const Tensor& dst) {
    const Tensor& q = *dst.src[0];
    const Tensor& kc = *dst.src[1];
    const Tensor& vc = *dst.src[2];
    const int32_t* pos = data_at<const int32_t>(*dst.src[3]);
    const int32_t* seq = data_at<const int32_t>(*dst.src[4]);
    const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
    const int64_t n_head_kv = dst.param_i(0), n_ctx_seq = dst.param_i(1);
    const float scale = dst.param_f(2), softcap = dst.param_f(3);
    const int64_t window = dst.param_i(4);
    const int64_t group = n_head / n_head_kv;
    const size_t elt = dtype_type_size(kc.type);

    float* scores = reinterpret_cast<float*>(ctx.scratch) +
                    static_cast<size_t>(ctx.ith) * (static_cast<size_t>(n_ctx_seq + hd) + 16);
    float* acc = scores + n_ctx_seq;

    int64_t begin, end;
    split_range(T * n_head, ctx.ith, ctx.nth, begin, end);
    for (int64_t w = begin; w < end; ++w) {
        const int64_t t = w / n_head, h = w % n_head;
        const int64_t kvh = h / group;
        const float* qv = reinterpret_cast<const float*>(row_ptr(q, h, t));
        float* out = reinterpret_cast<float*>(row_ptr_mut(dst, t)) + h * hd;
        const int64_t p = std::clamp<int64_t>(pos[t], 0, n_ctx_seq - 1);
        const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
        const int64_t base = static_cast<int64_t>(seq[t]) * n_ctx_seq;
        if (base < 0 || base + n_ctx_seq > kc.ne[1]) {
            std::memset(out, 0, static_cast<size_t>(hd) * sizeof(float));
            continue;
        }
        float mx = -INFINITY;
        for (int64_t j = lo; j <= p; ++j) {
            const uint8_t* krow = row_ptr(kc, base + j) + static_cast<size_t>(kvh * hd) * elt;
            float s = dot_cache(qv, krow, kc.type, hd) * scale;
            if (softcap > 0.0f) s = softcap * std::tanh(s / softcap);
            scores[j - lo] = s;
            mx = std::max(mx, s);
        }
        float sum = 0.0f;
        for (int64_t j = 0; j <= p - lo; ++j) {
            scores[j] = fast_exp(scores[j] - mx);
            sum += scores[j];
        }
        std::fill(acc, acc + hd, 0.0f);
        for (int64_t j = lo; j <= p; ++j) {
            const uint8_t* vrow = row_ptr(vc, base + j) + static_cast<size_t>(kvh * hd) * elt;
            axpy_cache(scores[j - lo], vrow, vc.type, acc, hd);
        }
        const float inv = 1.0f / sum;
        for (int64_t i = 0; i < hd; ++i) out[i] = acc[i] * inv;
    }
}

}  // namespace lantern::cpu
