// Bit layouts of the quantized types: hand-built blocks with known bytes must
// dequantize to the published values, and random blocks must dequantize
// exactly as the published reference loops below (written from the format
// description, independently of src/quant's unpackers) do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace lantern::quant {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;      // 1.0
constexpr uint16_t kHalfTwo = 0x4000;      // 2.0
constexpr uint16_t kHalfHalf = 0x3800;     // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;  // 0.25
constexpr uint16_t kHalfMinusTwo = 0xC000;

template <class Block>
std::vector<float> decode(DType t, const Block& b, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, &b, y.data(), n);
    return y;
}

// ---- hand-built blocks ----------------------------------------------------------

TEST(QuantLayout, Q4_0LowNibblesAreTheFirstHalf) {
    BlockQ4_0 b{};
    b.d = kHalfOne;
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
    const std::vector<float> y = decode(DType::Q4_0, b, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], static_cast<float>(j - 8)) << j;
        EXPECT_EQ(y[16 + j], static_cast<float>(7 - j)) << j;
    }
}

TEST(QuantLayout, Q4_1AddsTheMin) {
    BlockQ4_1 b{};
    b.d = kHalfHalf;
    b.m = kHalfMinusTwo;
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((j + 1) % 16) << 4);
    const std::vector<float> y = decode(DType::Q4_1, b, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], 0.5f * j - 2.0f) << j;
        EXPECT_EQ(y[16 + j], 0.5f * ((j + 1) % 16) - 2.0f) << j;
    }
}

TEST(QuantLayout, Q5_0FifthBitIsBitJOfQh) {
    BlockQ5_0 b{};
    b.d = kHalfOne;
    const uint32_t qh = 0x8000'0001u | 1u << 17;  // elements 0, 17 and 31
    std::memcpy(b.qh, &qh, 4);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (15 - j) << 4);
    const std::vector<float> y = decode(DType::Q5_0, b, 32);
    EXPECT_EQ(y[0], 0.0f);    // 0 | 16 - 16
    EXPECT_EQ(y[1], -15.0f);  // 1 - 16
    EXPECT_EQ(y[15], -1.0f);
    EXPECT_EQ(y[16], -1.0f);  // high nibble of qs[0] = 15
    EXPECT_EQ(y[17], 14.0f);  // 14 | 16 - 16
    EXPECT_EQ(y[31], 0.0f);   // 0 | 16 - 16
}

TEST(QuantLayout, Q5_1FifthBitAndMin) {
    BlockQ5_1 b{};
    b.d = kHalfQuarter;
    b.m = kHalfOne;
    const uint32_t qh = 1u << 3 | 1u << 20;
    std::memcpy(b.qh, &qh, 4);
    b.qs[3] = 0x27;  // element 3: 7 | 16, element 19: 2
    b.qs[4] = 0x5F;  // element 4: 15, element 20: 5 | 16
    const std::vector<float> y = decode(DType::Q5_1, b, 32);
    EXPECT_EQ(y[3], 0.25f * 23 + 1.0f);
    EXPECT_EQ(y[19], 0.25f * 2 + 1.0f);
    EXPECT_EQ(y[4], 0.25f * 15 + 1.0f);
    EXPECT_EQ(y[20], 0.25f * 21 + 1.0f);
    EXPECT_EQ(y[0], 1.0f);
}

TEST(QuantLayout, Q8_0AndQ8_1AreScaledInt8) {
    BlockQ8_0 b{};
    b.d = kHalfTwo;
    BlockQ8_1 c{};
    c.d = kHalfHalf;
    c.s = kHalfMinusTwo;  // not used by dequantization
    for (int j = 0; j < 32; ++j) b.qs[j] = c.qs[j] = static_cast<int8_t>(j * 8 - 128);
    const std::vector<float> y = decode(DType::Q8_0, b, 32);
    const std::vector<float> z = decode(DType::Q8_1, c, 32);
    for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(y[j], 2.0f * (j * 8 - 128));
        EXPECT_EQ(z[j], 0.5f * (j * 8 - 128));
    }
}

TEST(QuantLayout, Q8_KIsF32ScaledInt8) {
    BlockQ8_K b{};
    b.d = 0.375f;
    for (int e = 0; e < 256; ++e) b.qs[e] = static_cast<int8_t>(e - 128);
    const std::vector<float> y = decode(DType::Q8_K, b, 256);
    for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.375f * (e - 128));
}

TEST(QuantLayout, Q2_KGroupsAndTwoBitPlanes) {
    BlockQ2_K b{};
    b.d = kHalfOne;
    b.dmin = kHalfTwo;
    b.scales[5] = 0x37;  // group 5 (elements 80..95): scale 7, min 3
    b.scales[12] = 0x21;  // group 12 (elements 192..207): scale 1, min 2
    b.qs[20] = 0x30;      // bits 4..5 -> element 128*0 + 32*2 + 20 = 84
    b.qs[32 + 3] = 0x20;  // bits 4..5 of the second half -> element 128 + 64 + 3 = 195
    const std::vector<float> y = decode(DType::Q2_K, b, 256);
    EXPECT_EQ(y[84], 7.0f * 3 - 2.0f * 3);
    EXPECT_EQ(y[85], -6.0f);
    EXPECT_EQ(y[195], 1.0f * 2 - 2.0f * 2);
    EXPECT_EQ(y[196], -4.0f);
    EXPECT_EQ(y[20], 0.0f);  // group 1: scale 0, min 0
}

TEST(QuantLayout, Q3_KSixBitScalesAndHighMask) {
    BlockQ3_K b{};
    b.d = kHalfHalf;
    // Group 9 (elements 144..159): low 4 bits in the high nibble of scales[1],
    // high 2 bits at bits 4..5 of scales[9]: 0b10'0101 = 37 -> 37 - 32 = 5.
    b.scales[1] = 0x50;
    b.scales[9] = 0x20;
    b.qs[32 + 22] = 0x03;  // element 150 = 128 + 22: low bits 3
    b.hmask[22] = 0x10;    // bit 4*1 + 0 set: no -4
    b.qs[32 + 23] = 0x01;  // element 151: low bits 1, hmask clear -> 1 - 4
    const std::vector<float> y = decode(DType::Q3_K, b, 256);
    EXPECT_EQ(y[150], 0.5f * 5 * 3);
    EXPECT_EQ(y[151], 0.5f * 5 * -3);
    EXPECT_EQ(y[0], 0.5f * -32 * -4);  // scale 0 - 32, quant 0 - 4
}

TEST(QuantLayout, Q4_KPackedScalesAndMins) {
    BlockQ4_K b{};
    b.d = kHalfOne;
    b.dmin = kHalfOne;
    // Sub-block 1: scale = scales[1] & 63 = 5, min = scales[5] & 63 = 2.
    // Sub-block 5: scale = (scales[9] & 0xF) | (scales[1] >> 6) << 4 = 16, min 0.
    // Sub-block 6: scale = (scales[10] & 0xF) | (scales[2] >> 6) << 4 = 51,
    //              min = (scales[10] >> 4) | (scales[6] >> 6) << 4 = 39.
    b.scales[1] = 0x45;
    b.scales[5] = 0x02;
    b.scales[2] = 0xC0;
    b.scales[6] = 0x80;
    b.scales[10] = 0x73;
    b.qs[7] = 0xE0;    // element 32 + 7 (sub-block 1 = high nibbles of qs[0..32)): 14
    b.qs[64] = 0x10;   // element 160 (sub-block 5, high nibble of qs[64]): 1
    b.qs[101] = 0x3A;  // element 197 (sub-block 6, low nibble): 10; element 229: 3
    const std::vector<float> y = decode(DType::Q4_K, b, 256);
    EXPECT_EQ(y[39], 5.0f * 14 - 2.0f);
    EXPECT_EQ(y[160], 16.0f);
    EXPECT_EQ(y[197], 51.0f * 10 - 39.0f);
    EXPECT_EQ(y[229], 0.0f);  // sub-block 7: scale 0, min 0
    EXPECT_EQ(y[64 + 2], 0.0f * 0 - 51.0f * 0);  // sub-block 2: scale = 0xC0 & 63 = 0, min = 0x80 & 63 = 0
}

TEST(QuantLayout, Q5_KFifthBitIsBitSOfQh) {
    BlockQ5_K b{};
    b.d = kHalfOne;
    b.dmin = kHalfOne;
    b.scales[1] = 0x45;
    b.scales[5] = 0x02;
    b.scales[2] = 0xC0;
    b.scales[6] = 0x80;
    b.scales[10] = 0x73;
    b.qs[7] = 0xE0;
    b.qs[101] = 0x0A;
    b.qh[7] = 1 << 1;  // element 39 is in sub-block 1
    b.qh[5] = 1 << 6;  // element 197 is in sub-block 6
    const std::vector<float> y = decode(DType::Q5_K, b, 256);
    EXPECT_EQ(y[39], 5.0f * 30 - 2.0f);
    EXPECT_EQ(y[197], 51.0f * 26 - 39.0f);
    EXPECT_EQ(y[7], 0.0f);  // sub-block 0: scale 0
}

TEST(QuantLayout, Q6_KLowAndHighBitSplit) {
    BlockQ6_K b{};
    b.d = kHalfQuarter;
    b.scales[15] = -3;
    b.scales[2] = 7;
    // Element 241 = 128 + 32*3 + 17: high nibble of ql[64 + 32 + 17], bits 6..7 of qh[32 + 17].
    b.ql[113] = 0xB0;
    b.qh[49] = 0x80;
    // Element 34 = 32*1 + 2: low nibble of ql[32 + 2], bits 2..3 of qh[2].
    b.ql[34] = 0x05;
    b.qh[2] = 0x04;
    const std::vector<float> y = decode(DType::Q6_K, b, 256);
    EXPECT_EQ(y[241], 0.25f * -3 * (43 - 32));
    EXPECT_EQ(y[34], 0.25f * 7 * (21 - 32));
    EXPECT_EQ(y[35], 0.25f * 7 * -32);
}

TEST(QuantLayout, HalfAndBFloat16) {
    const uint16_t h[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x3555};
    const float hf[] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, -0.0f, 0.333251953125f};
    std::vector<float> y(6);
    dequantize_row(DType::F16, h, y.data(), 6);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(y[i], hf[i]) << i;
    const uint16_t b[] = {0x3F80, 0x4049, 0xBF00, 0x0000};
    const float bf[] = {1.0f, 3.140625f, -0.5f, 0.0f};
    dequantize_row(DType::BF16, b, y.data(), 4);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], bf[i]) << i;
}

// ---- random blocks against the published reference loops --------------------

// Random bytes with sane fp16 scales (a random exponent, no inf/NaN).
struct RandomBytes {
    std::mt19937 rng;
    explicit RandomBytes(uint32_t seed) : rng(seed) {}
    template <class Block>
    void fill(Block& b) {
        auto* p = reinterpret_cast<uint8_t*>(&b);
        for (size_t i = 0; i < sizeof(Block); ++i) p[i] = static_cast<uint8_t>(rng());
    }
    uint16_t half() {
        std::uniform_real_distribution<float> m(-1.0f, 1.0f);
        std::uniform_int_distribution<int> e(-14, 3);
        return f32_to_fp16(std::ldexp(m(rng), e(rng)));
    }
};

float h2f(uint16_t h) { return fp16_to_f32(h); }

void reference_q4_0(const BlockQ4_0& x, float* y) {
    const float d = h2f(x.d);
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((x.qs[j] & 0x0F) - 8) * d;
        y[j + 16] = static_cast<float>((x.qs[j] >> 4) - 8) * d;
    }
}
void reference_q4_1(const BlockQ4_1& x, float* y) {
    const float d = h2f(x.d), m = h2f(x.m);
    for (int j = 0; j < 16; ++j) {
        y[j] = std::fma(static_cast<float>(x.qs[j] & 0x0F), d, m);
        y[j + 16] = std::fma(static_cast<float>(x.qs[j] >> 4), d, m);
    }
}
template <class Block>
void fifth_bits(const Block& x, int j, int& h0, int& h1) {
    uint32_t qh;
    std::memcpy(&qh, x.qh, 4);
    h0 = ((qh >> j) << 4) & 0x10;
    h1 = (qh >> (j + 12)) & 0x10;
}
void reference_q5_0(const BlockQ5_0& x, float* y) {
    const float d = h2f(x.d);
    for (int j = 0; j < 16; ++j) {
        int h0, h1;
        fifth_bits(x, j, h0, h1);
        y[j] = static_cast<float>(((x.qs[j] & 0x0F) | h0) - 16) * d;
        y[j + 16] = static_cast<float>(((x.qs[j] >> 4) | h1) - 16) * d;
    }
}
void reference_q5_1(const BlockQ5_1& x, float* y) {
    const float d = h2f(x.d), m = h2f(x.m);
    for (int j = 0; j < 16; ++j) {
        int h0, h1;
        fifth_bits(x, j, h0, h1);
        y[j] = std::fma(static_cast<float>((x.qs[j] & 0x0F) | h0), d, m);
        y[j + 16] = std::fma(static_cast<float>((x.qs[j] >> 4) | h1), d, m);
    }
}
void reference_q8_0(const BlockQ8_0& x, float* y) {
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(x.qs[j]) * h2f(x.d);
}
void reference_q2_K(const BlockQ2_K& x, float* y) {
    const float d = h2f(x.d), min = h2f(x.dmin);
    const uint8_t* q = x.qs;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
            for (int half = 0; half < 2; ++half) {
                const uint8_t sc = x.scales[is++];
                const float dl = d * static_cast<float>(sc & 0xF), ml = min * static_cast<float>(sc >> 4);
                for (int l = 0; l < 16; ++l) *y++ = std::fma(dl, static_cast<float>((q[l + 16 * half] >> shift) & 3), -ml);
            }
            shift += 2;
        }
        q += 32;
    }
}
void reference_q3_K(const BlockQ3_K& x, float* y) {
    uint32_t aux[4] = {};
    std::memcpy(aux, x.scales, 12);
    const uint32_t tmp = aux[2];
    constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    const float d_all = h2f(x.d);
    const uint8_t* q = x.qs;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
            for (int half = 0; half < 2; ++half) {
                const float dl = d_all * static_cast<float>(scales[is++] - 32);
                for (int l = 16 * half; l < 16 * half + 16; ++l) {
                    const int v = ((q[l] >> shift) & 3) - ((x.hmask[l] & m) ? 0 : 4);
                    *y++ = dl * static_cast<float>(v);
                }
            }
            shift += 2;
            m = static_cast<uint8_t>(m << 1);
        }
        q += 32;
    }
}
void scale_min(int j, const uint8_t* q, int& d, int& m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}
template <class Block>
void reference_q45_K(const Block& x, float* y, bool five) {
    const float d = h2f(x.d), min = h2f(x.dmin);
    const uint8_t* ql = x.qs;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
        int sc, m;
        scale_min(is + 0, x.scales, sc, m);
        const float d1 = d * static_cast<float>(sc), m1 = min * static_cast<float>(m);
        scale_min(is + 1, x.scales, sc, m);
        const float d2 = d * static_cast<float>(sc), m2 = min * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
            int q = ql[l] & 0xF;
            if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) q += five && (x.qh[l] & u1) ? 16 : 0;
            *y++ = std::fma(d1, static_cast<float>(q), -m1);
        }
        for (int l = 0; l < 32; ++l) {
            int q = ql[l] >> 4;
            if constexpr (sizeof(Block) == sizeof(BlockQ5_K)) q += five && (x.qh[l] & u2) ? 16 : 0;
            *y++ = std::fma(d2, static_cast<float>(q), -m2);
        }
        ql += 32;
        is += 2;
        u1 = static_cast<uint8_t>(u1 << 2);
        u2 = static_cast<uint8_t>(u2 << 2);
    }
}
void reference_q6_K(const BlockQ6_K& x, float* y) {
    const float d = h2f(x.d);
    const uint8_t* ql = x.ql;
    const uint8_t* qh = x.qh;
    const int8_t* sc = x.scales;
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
            y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
            y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
            y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

// Dequantizes `count` random blocks with dequantize_row and with the reference
// loop; the results must be identical bit for bit.
template <class Block, class Reference, class SetScales>
void check_random_blocks(DType t, int64_t block_size, Reference reference, SetScales set_scales) {
    constexpr int kCount = 64;
    RandomBytes random(static_cast<uint32_t>(t) + 11);
    std::vector<Block> blocks(kCount);
    for (Block& b : blocks) {
        random.fill(b);
        set_scales(b, random);
    }
    std::vector<float> got(kCount * block_size), expect(kCount * block_size);
    dequantize_row(t, blocks.data(), got.data(), kCount * block_size);
    for (int i = 0; i < kCount; ++i) reference(blocks[i], expect.data() + i * block_size);
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(f32_bits(got[i]), f32_bits(expect[i]))
            << dtype_name(t) << " element " << i << ": " << got[i] << " vs " << expect[i];
    }
}

TEST(QuantLayout, RandomBlocksDecodeAsThePublishedReference) {
    auto d_only = [](auto& b, RandomBytes& r) { b.d = r.half(); };
    auto d_m = [](auto& b, RandomBytes& r) {
        b.d = r.half();
        b.m = r.half();
    };
    auto d_dmin = [](auto& b, RandomBytes& r) {
        b.d = r.half();
        b.dmin = r.half();
    };
    check_random_blocks<BlockQ4_0>(DType::Q4_0, 32, reference_q4_0, d_only);
    check_random_blocks<BlockQ4_1>(DType::Q4_1, 32, reference_q4_1, d_m);
    check_random_blocks<BlockQ5_0>(DType::Q5_0, 32, reference_q5_0, d_only);
    check_random_blocks<BlockQ5_1>(DType::Q5_1, 32, reference_q5_1, d_m);
    check_random_blocks<BlockQ8_0>(DType::Q8_0, 32, reference_q8_0, d_only);
    check_random_blocks<BlockQ2_K>(DType::Q2_K, 256, reference_q2_K, d_dmin);
    check_random_blocks<BlockQ3_K>(DType::Q3_K, 256, reference_q3_K, d_only);
    check_random_blocks<BlockQ4_K>(
        DType::Q4_K, 256, [](const BlockQ4_K& b, float* y) { reference_q45_K(b, y, false); }, d_dmin);
    check_random_blocks<BlockQ5_K>(
        DType::Q5_K, 256, [](const BlockQ5_K& b, float* y) { reference_q45_K(b, y, true); }, d_dmin);
    check_random_blocks<BlockQ6_K>(DType::Q6_K, 256, reference_q6_K, d_only);
}

}  // namespace
}  // namespace lantern::quant
