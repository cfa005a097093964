// CPU kernels of every tensor type (quant/quant.h): quantize -> dequantize
// error bounds, vectorised quantizers against their scalar references, and
// every vec_dot tile shape against a float64 dot of the dequantized operands.
// Bit layouts are checked in base_quant_layout_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "lantern/error.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "test_util.h"

namespace lantern::quant {
namespace {

const DType kWeightTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                              DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,
                              DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS};
const DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1,
                           DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::Q2_K,
                           DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K,
                           DType::IQ4_NL, DType::IQ4_XS};

std::string type_name(const testing::TestParamInfo<DType>& info) { return dtype_name(info.param); }

std::vector<uint8_t> quantize(DType t, const std::vector<float>& x, bool reference) {
    std::vector<uint8_t> out(dtype_row_size(t, static_cast<int64_t>(x.size())));
    const TypeOps* ops = type_ops(t);
    (reference ? ops->from_float_ref : ops->from_float)(x.data(), out.data(), static_cast<int64_t>(x.size()));
    return out;
}

std::vector<float> dequantize(DType t, const void* data, int64_t n) {
    std::vector<float> out(static_cast<size_t>(n));
    dequantize_row(t, data, out.data(), n);
    return out;
}

double relative_rms_error(const std::vector<float>& x, const std::vector<float>& y) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
        ref += static_cast<double>(x[i]) * x[i];
    }
    return std::sqrt(err / ref);
}

std::vector<float> normal_floats(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// ---- the table --------------------------------------------------------------

TEST(QuantTable, EveryTypeHasItsKernels) {
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dtype_name(t));
        const TypeOps* ops = type_ops(t);
        ASSERT_NE(ops, nullptr);
        EXPECT_NE(ops->to_float, nullptr);
        EXPECT_NE(ops->from_float, nullptr);
        EXPECT_NE(ops->from_float_ref, nullptr);
    }
    for (DType t : kWeightTypes) {
        SCOPED_TRACE(dtype_name(t));
        const TypeOps* ops = type_ops(t);
        ASSERT_NE(ops->vec_dot, nullptr);
        EXPECT_GE(ops->max_nr, 1);
        EXPECT_GE(ops->max_nc, 1);
        EXPECT_GE(ops->wide_nr, 1);
        EXPECT_LE(ops->wide_nr, ops->max_nr);
        const TypeOps* act = type_ops(ops->vec_dot_type);
        ASSERT_NE(act, nullptr);
        EXPECT_NE(act->from_float, nullptr);
        // The activation row must cover the same elements block for block.
        EXPECT_EQ(dtype_block_size(ops->vec_dot_type) % dtype_block_size(t) == 0 ||
                      dtype_block_size(t) % dtype_block_size(ops->vec_dot_type) == 0,
                  true);
    }
    EXPECT_EQ(type_ops(DType::Q4_0)->vec_dot_type, DType::Q8_0);
    EXPECT_EQ(type_ops(DType::Q4_1)->vec_dot_type, DType::Q8_1);
    EXPECT_EQ(type_ops(DType::Q5_1)->vec_dot_type, DType::Q8_1);
    EXPECT_EQ(type_ops(DType::Q8_0)->vec_dot_type, DType::Q8_0);
    EXPECT_EQ(type_ops(DType::Q4_K)->vec_dot_type, DType::Q8_K);
}

// kernel_set() names what the compiler targeted (lantern devices prints it).
TEST(QuantTable, NamesTheInstructionSetItWasBuiltFor) {
    const std::string set = kernel_set();
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
    EXPECT_EQ(set.rfind("AVX-512", 0), 0u) << set;
#elif defined(__AVX2__) && defined(__FMA__)
    EXPECT_EQ(set.rfind("AVX2", 0), 0u) << set;
#elif defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
    EXPECT_EQ(set, "NEON SDOT");
#elif defined(__aarch64__)
    EXPECT_EQ(set, "NEON");
#else
    EXPECT_EQ(set, "scalar");
#endif
}

TEST(QuantTable, TypesWithoutKernelsAreUnsupported) {
    EXPECT_EQ(type_ops(DType::IQ2_XXS), nullptr);
    EXPECT_EQ(type_ops(DType::I32), nullptr);
    float out[256];
    uint8_t in[256] = {};
    try {
        dequantize_row(DType::IQ3_S, in, out, 256);
        FAIL() << "expected an Unsupported error";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Unsupported);
        EXPECT_NE(std::string(e.what()).find("iq3_s"), std::string::npos) << e.what();
    }
    EXPECT_THROW(quantize_row(DType::IQ1_S, out, in, 256), Error);
}

TEST(QuantTable, BlockLayoutsMatchDTypeTable) {
    EXPECT_EQ(dtype_type_size(DType::Q4_0), sizeof(BlockQ4_0));
    EXPECT_EQ(dtype_type_size(DType::Q4_1), sizeof(BlockQ4_1));
    EXPECT_EQ(dtype_type_size(DType::Q5_0), sizeof(BlockQ5_0));
    EXPECT_EQ(dtype_type_size(DType::Q5_1), sizeof(BlockQ5_1));
    EXPECT_EQ(dtype_type_size(DType::Q8_0), sizeof(BlockQ8_0));
    EXPECT_EQ(dtype_type_size(DType::Q8_1), sizeof(BlockQ8_1));
    EXPECT_EQ(dtype_type_size(DType::Q2_K), sizeof(BlockQ2_K));
    EXPECT_EQ(dtype_type_size(DType::Q3_K), sizeof(BlockQ3_K));
    EXPECT_EQ(dtype_type_size(DType::Q4_K), sizeof(BlockQ4_K));
    EXPECT_EQ(dtype_type_size(DType::Q5_K), sizeof(BlockQ5_K));
    EXPECT_EQ(dtype_type_size(DType::Q6_K), sizeof(BlockQ6_K));
    EXPECT_EQ(dtype_type_size(DType::Q8_K), sizeof(BlockQ8_K));
    EXPECT_EQ(dtype_type_size(DType::IQ4_NL), sizeof(BlockIQ4_NL));
    EXPECT_EQ(dtype_type_size(DType::IQ4_XS), sizeof(BlockIQ4_XS));
    EXPECT_EQ(dtype_block_size(DType::IQ4_NL), kQK);
    EXPECT_EQ(dtype_block_size(DType::IQ4_XS), kQKK);
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1}) {
        EXPECT_EQ(dtype_block_size(t), kQK);
    }
    for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K}) {
        EXPECT_EQ(dtype_block_size(t), kQKK);
    }
}

// ---- quantize -> dequantize -------------------------------------------------

// Relative RMS error allowed on uniform [-1, 1) and on normal inputs (the
// larger of the two, normal, is printed by the test; the bounds leave ~15%).
double error_bound(DType t) {
    switch (t) {
        case DType::F32: return 0.0;
        case DType::F16: return 3e-4;
        case DType::BF16: return 2.5e-3;
        case DType::Q8_0: case DType::Q8_1: return 0.0065;
        case DType::Q8_K: return 0.008;
        case DType::Q6_K: return 0.02;
        case DType::Q5_0: return 0.05;
        case DType::Q5_1: case DType::Q5_K: return 0.043;
        case DType::Q4_0: return 0.10;
        case DType::IQ4_NL: case DType::IQ4_XS: return 0.086;
        case DType::Q4_1: case DType::Q4_K: return 0.09;
        case DType::Q3_K: return 0.165;
        case DType::Q2_K: return 0.30;
        default: return 0.0;
    }
}

class QuantRoundTrip : public testing::TestWithParam<DType> {};

TEST_P(QuantRoundTrip, ErrorWithinBound) {
    const DType t = GetParam();
    const int64_t n = 16 * kQKK;
    for (uint32_t seed : {1u, 2u, 3u}) {
        for (bool normal : {false, true}) {
            const std::vector<float> x = normal ? normal_floats(n, seed) : test::random_floats(n, seed);
            for (bool reference : {true, false}) {
                const std::vector<uint8_t> q = quantize(t, x, reference);
                const double err = relative_rms_error(x, dequantize(t, q.data(), n));
                EXPECT_LE(err, error_bound(t)) << "seed " << seed << (normal ? " normal" : " uniform")
                                               << (reference ? " reference" : " fast");
                if (seed == 1 && reference) {
                    std::printf("  %-5s %s: relative RMS error %.5f (bound %.5f)\n", dtype_name(t),
                                normal ? "normal " : "uniform", err, error_bound(t));
                }
            }
        }
    }
}

TEST_P(QuantRoundTrip, ZeroRowsStayZero) {
    const DType t = GetParam();
    const int64_t n = 2 * kQKK;
    const std::vector<float> x(n, 0.0f);
    for (bool reference : {true, false}) {
        const std::vector<float> y = dequantize(t, quantize(t, x, reference).data(), n);
        for (float v : y) ASSERT_EQ(v, 0.0f);
    }
}

TEST_P(QuantRoundTrip, ConstantRowsAreAccurate) {
    const DType t = GetParam();
    const int64_t n = 2 * kQKK;
    for (float value : {0.75f, -3.0f}) {
        const std::vector<float> x(n, value);
        const std::vector<float> y = dequantize(t, quantize(t, x, true).data(), n);
        // One level of the coarsest types (Q2_K) is a third of the range.
        for (float v : y) ASSERT_NEAR(v, value, std::fabs(value) * 0.02f) << dtype_name(t);
    }
}

INSTANTIATE_TEST_SUITE_P(Quant, QuantRoundTrip, testing::ValuesIn(kAllTypes), type_name);

// ---- fast quantizers = reference ----------------------------------------------

// Blocks of very different magnitudes (fp16 scales from subnormal to near
// overflow), an all-zero block, exact rounding ties, a NaN, an infinity and
// a block whose f32 scale is subnormal.
std::vector<float> hard_inputs(int64_t n, uint32_t seed) {
    std::vector<float> x = test::random_floats(static_cast<size_t>(n), seed);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> exponent(-28, 14);
    for (int64_t b = 0; b < n / kQK; ++b) {
        const float scale = std::ldexp(1.0f, exponent(rng));
        for (int j = 0; j < kQK; ++j) x[b * kQK + j] *= scale;
    }
    for (int j = 0; j < kQK; ++j) x[j] = 0.0f;
    for (int j = 0; j < kQK; ++j) x[kQK + j] = static_cast<float>(j - 16) * 0.5f;  // ties
    x[kQK] = -127.0f;
    x[2 * kQK + 3] = std::numeric_limits<float>::quiet_NaN();
    x[3 * kQK + 5] = std::numeric_limits<float>::infinity();
    for (int j = 0; j < kQK; ++j) x[4 * kQK + j] = 1e-37f * static_cast<float>(j - 7);  // subnormal scale
    return x;
}

TEST(QuantFast, ActivationQuantizersMatchReferenceBitForBit) {
    for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q8_1, DType::Q8_K}) {
        SCOPED_TRACE(dtype_name(t));
        for (uint32_t seed : {7u, 8u, 9u}) {
            const std::vector<float> x = hard_inputs(8 * kQKK, seed);
            EXPECT_EQ(quantize(t, x, false), quantize(t, x, true)) << "seed " << seed;
        }
    }
}

TEST(QuantFast, HalfConversionsOfOddLengthsAndSpecialValues) {
    std::vector<float> x = test::random_floats(37, 3, -70000.0f, 70000.0f);
    x[0] = std::numeric_limits<float>::infinity();
    x[1] = -std::numeric_limits<float>::quiet_NaN();
    x[2] = 1e-30f;
    x[3] = -6e-8f;
    x[4] = 65519.0f;
    for (DType t : {DType::F16, DType::BF16}) {
        EXPECT_EQ(quantize(t, x, false), quantize(t, x, true)) << dtype_name(t);
        const std::vector<uint8_t> h = quantize(t, x, true);
        const std::vector<float> y = dequantize(t, h.data(), 37);
        std::vector<float> y_scalar(37);
        for (int i = 0; i < 37; ++i) {
            uint16_t v;
            std::memcpy(&v, h.data() + 2 * i, 2);
            y_scalar[i] = t == DType::F16 ? fp16_to_f32(v) : bf16_to_f32(v);
        }
        EXPECT_EQ(std::memcmp(y.data(), y_scalar.data(), 37 * sizeof(float)), 0) << dtype_name(t);
    }
}

// ---- vec_dot tiles ------------------------------------------------------------

// Rows of `count` x n elements of type t with `pad` spare bytes after each row.
struct Rows {
    DType type;
    int64_t n;
    size_t stride;
    std::vector<uint8_t> bytes;
    std::vector<std::vector<float>> values;  // dequantized

    Rows(DType t, int64_t n_, int count, uint32_t seed, FromFloatFn quantize)
        : type(t), n(n_), stride(dtype_row_size(t, n_) + 48), bytes(stride * count, 0xA5) {
        for (int r = 0; r < count; ++r) {
            const std::vector<float> x = test::random_floats(static_cast<size_t>(n), seed + r);
            quantize(x.data(), bytes.data() + r * stride, n);
            values.push_back(dequantize(t, bytes.data() + r * stride, n));
        }
    }
    const void* row(int r) const { return bytes.data() + r * stride; }
};

class QuantDot : public testing::TestWithParam<DType> {};

TEST_P(QuantDot, EveryTileShapeMatchesFloat64Dot) {
    const DType t = GetParam();
    const TypeOps* ops = type_ops(t);
    const TypeOps* act = type_ops(ops->vec_dot_type);
    const int64_t block = std::max(dtype_block_size(t), dtype_block_size(ops->vec_dot_type));
    // Odd block counts exercise the kernels' tails, 16 and 35 blocks whole and
    // partial chunks of 16; plain types also get a length that is no multiple
    // of any vector width.
    std::vector<int64_t> lengths = {block, 3 * block, 8 * block, 16 * block, 35 * block};
    if (block == 1) lengths = {7, 100, 1024};
    for (int64_t n : lengths) {
        SCOPED_TRACE("n = " + std::to_string(n));
        const Rows w(t, n, ops->max_nr, 100, ops->from_float_ref);
        const Rows a(ops->vec_dot_type, n, ops->max_nc, 200, act->from_float);
        for (int nr = 1; nr <= ops->max_nr; ++nr) {
            for (int nc = 1; nc <= ops->max_nc; ++nc) {
                const size_t ldc = static_cast<size_t>(nr) + 3;
                const float sentinel = -12345.0f;
                std::vector<float> s(ldc * nc + 8, sentinel);
                ops->vec_dot(n, s.data(), ldc, w.row(0), w.stride, a.row(0), a.stride, nr, nc);
                for (int c = 0; c < nc; ++c) {
                    for (size_t r = 0; r < ldc; ++r) {
                        const float got = s[c * ldc + r];
                        if (r >= static_cast<size_t>(nr)) {
                            ASSERT_EQ(got, sentinel) << "wrote outside the tile at r " << r << " c " << c;
                            continue;
                        }
                        double expect = 0, magnitude = 0;
                        for (int64_t k = 0; k < n; ++k) {
                            const double p = static_cast<double>(w.values[r][k]) * a.values[c][k];
                            expect += p;
                            magnitude += std::fabs(p);
                        }
                        const double tol = 2e-6 * magnitude + 1e-6;
                        ASSERT_NEAR(got, expect, tol) << "tile " << nr << "x" << nc << " r " << r << " c " << c;
                    }
                }
                for (size_t i = ldc * nc; i < s.size(); ++i) ASSERT_EQ(s[i], sentinel);
            }
        }
    }
}

TEST_P(QuantDot, NegativeAndLargeActivations) {
    // Activations using the full int8 range on both sides, and weights with
    // the largest quants, catch saturating int16 pair sums.
    const DType t = GetParam();
    const TypeOps* ops = type_ops(t);
    const int64_t n = 2 * kQKK;
    std::vector<float> wx(n), ax(n);
    for (int64_t k = 0; k < n; ++k) {
        wx[k] = (k % 3 == 0) ? 1.0f : -1.0f;
        ax[k] = (k % 2 == 0) ? 1.0f : -1.0f;
        if (k % 32 == 5) ax[k] = 0.01f;
    }
    std::vector<uint8_t> wq(dtype_row_size(t, n)), aq(dtype_row_size(ops->vec_dot_type, n));
    ops->from_float_ref(wx.data(), wq.data(), n);
    type_ops(ops->vec_dot_type)->from_float(ax.data(), aq.data(), n);
    const std::vector<float> wv = dequantize(t, wq.data(), n), av = dequantize(ops->vec_dot_type, aq.data(), n);
    double expect = 0, magnitude = 0;
    for (int64_t k = 0; k < n; ++k) {
        expect += static_cast<double>(wv[k]) * av[k];
        magnitude += std::fabs(static_cast<double>(wv[k]) * av[k]);
    }
    float got = 0;
    ops->vec_dot(n, &got, 1, wq.data(), 0, aq.data(), 0, 1, 1);
    EXPECT_NEAR(got, expect, 2e-6 * magnitude + 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Quant, QuantDot, testing::ValuesIn(kWeightTypes), type_name);

}  // namespace
}  // namespace lantern::quant
