// GGUF reader and writer: round trips, every malformed-file error, truncation,
// random corruption, and the real vocabulary files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "gguf/gguf.h"
#include "lantern/error.h"
#include "test_util.h"

namespace lantern::gguf {
namespace {

namespace fs = std::filesystem;

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good());
}

// A temp file removed at the end of the test.
struct TempFile {
    fs::path path;
    explicit TempFile(const std::string& name) : path(test::temp_path(name)) {}
    ~TempFile() { fs::remove(path); }
};

std::unique_ptr<File> load(const std::vector<uint8_t>& bytes, const std::string& name = "t.gguf") {
    TempFile f(name);
    write_bytes(f.path, bytes);
    return File::open(f.path.string());
}

// Opens bytes expected to be rejected; returns the error (fails the test if none).
Error rejection(const std::vector<uint8_t>& bytes) {
    TempFile f("bad.gguf");
    write_bytes(f.path, bytes);
    try {
        File::open(f.path.string());
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(f.path.string()), std::string::npos)
            << "message does not name the file: " << e.what();
        return e;
    }
    ADD_FAILURE() << "file was accepted";
    return Error(ErrorCode::InvalidArgument, "accepted");
}

#define EXPECT_REJECTED(bytes, error_code, text)                                         \
    do {                                                                                 \
        const Error err_ = rejection(bytes);                                             \
        EXPECT_EQ(err_.code(), error_code) << err_.what();                               \
        EXPECT_NE(std::string(err_.what()).find(text), std::string::npos) << err_.what(); \
    } while (0)

// Hand-assembled GGUF bytes, so tests can write any field, valid or not.
struct Raw {
    std::vector<uint8_t> b;
    template <typename T>
    Raw& put(T v) {
        const size_t at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
        return *this;
    }
    Raw& str(const std::string& s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        b.insert(b.end(), {'G', 'G', 'U', 'F'});
        return put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
    }
    Raw& kv_u32(const std::string& key, uint32_t v) { return str(key).put<uint32_t>(4).put<uint32_t>(v); }
    Raw& tensor_info(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
        str(name).put<uint32_t>(static_cast<uint32_t>(dims.size()));
        for (uint64_t d : dims) put<uint64_t>(d);
        return put<uint32_t>(type).put<uint64_t>(offset);
    }
    Raw& pad(size_t alignment = 32) {
        b.resize((b.size() + alignment - 1) / alignment * alignment);
        return *this;
    }
    Raw& zeros(size_t n) {
        b.resize(b.size() + n);
        return *this;
    }
};

// One F32 tensor of `dims` at offset 0 with its data, 0 metadata.
std::vector<uint8_t> one_tensor_file(std::vector<uint64_t> dims, uint32_t type, uint64_t offset,
                                     size_t data_bytes) {
    Raw r;
    r.header(1, 0).tensor_info("w", std::move(dims), type, offset).pad().zeros(data_bytes);
    return r.b;
}

// A small valid file with metadata of several kinds and two tensors; the last
// tensor's size is a multiple of the alignment, so the file has no trailing
// padding and every proper prefix is truncated somewhere that matters.
std::vector<uint8_t> small_valid_file() {
    Writer w;
    w.set("general.architecture", std::string("llama"));
    w.set("llama.block_count", uint32_t{2});
    w.set("llama.rope.freq_base", 10000.0f);
    w.set("tokenizer.ggml.tokens", Array::of(std::vector<std::string>{"<s>", "a", "bc"}));
    w.set("tokenizer.ggml.scores", Array::of(std::vector<float>{0.0f, -1.5f, -2.0f}));
    w.set("nested", Array::of(std::vector<Array>{Array::of(std::vector<int32_t>{1, 2}),
                                                  Array::of(std::vector<std::string>{"x"})}));
    const std::vector<uint8_t> q(dtype_row_size(DType::Q4_0, 64) * 2, 0x11);
    w.add_tensor("a", DType::Q4_0, {64, 2}, q.data(), q.size());
    const std::vector<float> f(8, 1.0f);
    w.add_tensor("b", DType::F32, {8}, f.data(), f.size() * 4);
    return w.serialize();
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (uint8_t& x : v) x = static_cast<uint8_t>(rng());
    return v;
}

// --- round trips -------------------------------------------------------------

class VersionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(VersionTest, EveryValueTypeRoundTrips) {
    std::vector<std::pair<std::string, Value>> kvs = {
        {"u8", uint8_t{250}},
        {"i8", int8_t{-100}},
        {"u16", uint16_t{65000}},
        {"i16", int16_t{-32000}},
        {"u32", uint32_t{4000000000u}},
        {"i32", int32_t{-2000000000}},
        {"f32", 3.25f},
        {"bool.true", true},
        {"bool.false", false},
        {"string", std::string("héllo\nworld")},
        {"string.empty", std::string()},
        {"u64", uint64_t{18000000000000000000ull}},
        {"i64", int64_t{-9000000000000000000ll}},
        {"f64", -1.0e300},
        {"arr.u8", Array::of(std::vector<uint8_t>{0, 255})},
        {"arr.i8", Array::of(std::vector<int8_t>{-128, 127})},
        {"arr.u16", Array::of(std::vector<uint16_t>{1, 65535})},
        {"arr.i16", Array::of(std::vector<int16_t>{-32768, 5})},
        {"arr.u32", Array::of(std::vector<uint32_t>{7, 4294967295u})},
        {"arr.i32", Array::of(std::vector<int32_t>{-1, 2, -3})},
        {"arr.f32", Array::of(std::vector<float>{0.5f, -0.25f})},
        {"arr.bool", Array::of(std::vector<bool>{true, false, true})},
        {"arr.string", Array::of(std::vector<std::string>{"a", "", "ccc"})},
        {"arr.u64", Array::of(std::vector<uint64_t>{1ull << 63})},
        {"arr.i64", Array::of(std::vector<int64_t>{-(1ll << 62)})},
        {"arr.f64", Array::of(std::vector<double>{1e-300, 2.5})},
        {"arr.empty", Array::of(std::vector<int32_t>{})},
        {"arr.nested", Array::of(std::vector<Array>{
                           Array::of(std::vector<int32_t>{1, 2, 3}),
                           Array::of(std::vector<std::string>{"x", "y"}),
                           Array::of(std::vector<Array>{Array::of(std::vector<double>{4.0})}),
                       })},
    };
    Writer w;
    w.set_version(GetParam());
    for (const auto& [k, v] : kvs) w.set(k, v);
    const auto f = load(w.serialize());

    EXPECT_EQ(f->version(), GetParam());
    ASSERT_EQ(f->metadata().size(), kvs.size());
    for (size_t i = 0; i < kvs.size(); ++i) {
        EXPECT_EQ(f->metadata()[i].first, kvs[i].first);
        EXPECT_EQ(value_type(f->metadata()[i].second), value_type(kvs[i].second)) << kvs[i].first;
        EXPECT_TRUE(f->metadata()[i].second == kvs[i].second) << kvs[i].first;
        ASSERT_NE(f->find(kvs[i].first), nullptr);
    }
    EXPECT_TRUE(f->tensors().empty());

    const Array* nested = f->get_array("arr.nested");
    ASSERT_NE(nested, nullptr);
    ASSERT_EQ(nested->size(), 3u);
    EXPECT_EQ(nested->arrays[0].int_at(2), 3);
    EXPECT_EQ(nested->arrays[1].strings[1], "y");
    EXPECT_EQ(nested->arrays[2].arrays[0].float_at(0), 4.0);
    EXPECT_EQ(f->get_array("arr.bool")->int_at(0), 1);
    EXPECT_EQ(f->get_array("arr.bool")->int_at(1), 0);
    EXPECT_EQ(f->get_array("arr.empty")->size(), 0u);
}

TEST_P(VersionTest, EveryTensorTypeRoundTrips) {
    Writer w;
    w.set_version(GetParam());
    w.set("general.architecture", std::string("test"));
    struct Expected {
        std::string name;
        DType type;
        std::vector<int64_t> shape;
        std::vector<uint8_t> data;
    };
    std::vector<Expected> expected;
    for (uint32_t id = 0; id < 64; ++id) {
        const std::optional<DType> t = dtype_from_id(id);
        if (!t) continue;
        const int64_t bs = dtype_block_size(*t);
        // Shapes of 1 to 4 dims, cycled through the types.
        std::vector<int64_t> shape = {bs * 2};
        for (size_t d = 1; d <= expected.size() % 4; ++d) shape.push_back(static_cast<int64_t>(d + 1));
        int64_t rows = 1;
        for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
        std::vector<uint8_t> data = random_bytes(dtype_row_size(*t, shape[0]) * rows, id);
        const std::string name = std::string("t.") + dtype_name(*t);
        w.add_tensor(name, *t, shape, data.data(), data.size());
        expected.push_back({name, *t, shape, std::move(data)});
    }
    ASSERT_GE(expected.size(), 29u);
    const auto f = load(w.serialize());

    ASSERT_EQ(f->tensors().size(), expected.size());
    EXPECT_EQ(f->data_offset() % 32, 0u);
    for (size_t i = 0; i < expected.size(); ++i) {
        const TensorInfo& t = f->tensors()[i];
        EXPECT_EQ(t.name, expected[i].name);
        EXPECT_EQ(t.type, expected[i].type);
        EXPECT_EQ(t.shape, expected[i].shape);
        EXPECT_EQ(t.offset % 32, 0u);
        ASSERT_EQ(t.nbytes, expected[i].data.size());
        EXPECT_EQ(std::memcmp(t.data, expected[i].data.data(), t.nbytes), 0) << t.name;
        EXPECT_EQ(f->find_tensor(t.name), &t);
    }
    EXPECT_EQ(f->find_tensor("missing"), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Gguf, VersionTest, ::testing::Values(2u, 3u));

TEST(Gguf, CustomAlignment) {
    for (size_t alignment : {size_t{1}, size_t{8}, size_t{64}, size_t{4096}}) {
        Writer w;
        w.set_alignment(alignment);
        const std::vector<uint8_t> a = random_bytes(6, 1), b = random_bytes(40, 2);
        w.add_tensor("a", DType::I16, {3}, a.data(), a.size());
        w.add_tensor("b", DType::F32, {2, 5}, b.data(), b.size());
        const auto f = load(w.serialize());
        EXPECT_EQ(f->alignment(), alignment);
        EXPECT_EQ(f->get_int("general.alignment"), static_cast<int64_t>(alignment));
        EXPECT_EQ(f->data_offset() % alignment, 0u);
        ASSERT_EQ(f->tensors().size(), 2u);
        EXPECT_EQ(f->tensors()[1].offset % alignment, 0u);
        EXPECT_EQ(std::memcmp(f->tensors()[0].data, a.data(), a.size()), 0);
        EXPECT_EQ(std::memcmp(f->tensors()[1].data, b.data(), b.size()), 0);
    }
}

TEST(Gguf, TypedGetters) {
    Writer w;
    w.set("u64.big", uint64_t{1} << 63);
    w.set("u32", uint32_t{7});
    w.set("i8", int8_t{-3});
    w.set("f32", 0.5f);
    w.set("b", true);
    w.set("s", std::string("text"));
    w.set("arr", Array::of(std::vector<int32_t>{1}));
    w.set("u32", uint32_t{9});  // replaces, keeping its position
    const auto f = load(w.serialize());

    EXPECT_EQ(f->metadata().size(), 7u);
    EXPECT_EQ(f->metadata()[1].first, "u32");
    EXPECT_EQ(f->get_int("u32"), 9);
    EXPECT_EQ(f->get_int("i8"), -3);
    EXPECT_EQ(f->get_float("u32"), 9.0);
    EXPECT_EQ(f->get_float("f32"), 0.5);
    EXPECT_EQ(f->get_bool("b"), true);
    EXPECT_EQ(f->get_string("s"), "text");
    EXPECT_NE(f->get_array("arr"), nullptr);

    EXPECT_FALSE(f->get_int("absent").has_value());
    EXPECT_FALSE(f->get_float("absent").has_value());
    EXPECT_FALSE(f->get_bool("absent").has_value());
    EXPECT_FALSE(f->get_string("absent").has_value());
    EXPECT_EQ(f->get_array("absent"), nullptr);

    auto expect_format = [](auto&& fn, const char* key) {
        try {
            fn();
            ADD_FAILURE() << key << " accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::Format);
            EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
        }
    };
    expect_format([&] { f->get_int("u64.big"); }, "u64.big");
    expect_format([&] { f->get_int("f32"); }, "'f32'");
    expect_format([&] { f->get_int("b"); }, "'b'");
    expect_format([&] { f->get_float("s"); }, "'s'");
    expect_format([&] { f->get_bool("u32"); }, "'u32'");
    expect_format([&] { f->get_string("arr"); }, "'arr'");
    expect_format([&] { f->get_array("s"); }, "'s'");

    const Array& arr = *f->get_array("arr");
    EXPECT_THROW(arr.int_at(1), Error);
    EXPECT_THROW(Array::of(std::vector<std::string>{"x"}).float_at(0), Error);
}

TEST(Gguf, WriterRejectsBadInput) {
    auto expect_invalid = [](auto&& fn, const char* text) {
        try {
            fn();
            ADD_FAILURE() << "accepted: " << text;
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
            EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
        }
    };
    Writer w;
    const std::vector<uint8_t> data(1024, 0);
    w.add_tensor("x", DType::F32, {4}, data.data(), 16);
    expect_invalid([&] { w.add_tensor("x", DType::F32, {4}, data.data(), 16); }, "duplicate");
    expect_invalid([&] { w.add_tensor("y", DType::F32, {4}, data.data(), 12); }, "12 bytes given");
    expect_invalid([&] { w.add_tensor("y", DType::Q4_0, {33}, data.data(), 18); }, "block size");
    expect_invalid([&] { w.add_tensor("y", DType::F32, {}, data.data(), 4); }, "dimensions");
    expect_invalid([&] { w.add_tensor("y", DType::F32, {1, 1, 1, 1, 1}, data.data(), 4); }, "dimensions");
    expect_invalid([&] { w.add_tensor("y", DType::F32, {0}, data.data(), 0); }, "not positive");
    expect_invalid([&] { w.add_tensor(std::string(64, 'n'), DType::F32, {1}, data.data(), 4); }, "name longer");
    expect_invalid([&] { w.add_tensor("y", static_cast<DType>(99), {1}, data.data(), 4); }, "unknown type");
    expect_invalid([&] { w.set_alignment(0); }, "power of two");
    expect_invalid([&] { w.set_alignment(48); }, "power of two");
    expect_invalid([&] { w.set("general.alignment", uint64_t{32}); }, "u32");
    expect_invalid([&] { w.set_version(1); }, "version 1");
    Array bad;
    bad.elem_type = ValueType::U32;
    bad.raw = {1, 2, 3};
    expect_invalid([&] { w.set("bad", bad); }, "multiple of 4");
    bad.elem_type = ValueType::STRING;
    expect_invalid([&] { w.set("bad", bad); }, "storage");
}

TEST(Gguf, WriteStreamsSourcesToDisk) {
    TempFile out("stream.gguf");
    Writer w;
    w.set("general.name", std::string("streamed"));
    int calls = 0;
    w.add_tensor("s", DType::Q8_0, {64, 3}, [&](uint8_t* dst, size_t n) {
        ++calls;
        for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(i * 7);
    });
    const std::vector<uint8_t> fixed = random_bytes(20, 3);
    w.add_tensor("fixed", DType::I8, {20}, fixed.data(), fixed.size());
    w.write(out.path.string());
    EXPECT_EQ(calls, 1);
    EXPECT_FALSE(fs::exists(out.path.string() + ".tmp"));

    const auto f = File::open(out.path.string());
    EXPECT_EQ(f->get_string("general.name"), "streamed");
    const TensorInfo* s = f->find_tensor("s");
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->nbytes, 34u * 2 * 3);
    for (size_t i = 0; i < s->nbytes; ++i) ASSERT_EQ(s->data[i], static_cast<uint8_t>(i * 7));
    EXPECT_EQ(std::memcmp(f->find_tensor("fixed")->data, fixed.data(), fixed.size()), 0);
    // The file on disk is byte for byte what serialize() builds.
    std::ifstream in(out.path, std::ios::binary);
    std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(disk, w.serialize());
}

TEST(Gguf, WriteFailuresLeaveNoFile) {
    Writer w;
    w.add_tensor("s", DType::F32, {4}, [](uint8_t*, size_t) {
        throw Error(ErrorCode::Unsupported, "source failed");
    });
    TempFile out("fail.gguf");
    EXPECT_THROW(w.write(out.path.string()), Error);
    EXPECT_FALSE(fs::exists(out.path));
    EXPECT_FALSE(fs::exists(out.path.string() + ".tmp"));

    Writer ok;
    try {
        ok.write("/nonexistent-dir/x.gguf");
        ADD_FAILURE() << "wrote into a missing directory";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Io);
        EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.gguf"), std::string::npos);
    }
}

// --- malformed files ----------------------------------------------------------

TEST(GgufMalformed, CannotOpen) {
    try {
        File::open("/nonexistent/model.gguf");
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::Io);
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
    }
    EXPECT_THROW(File::open(fs::temp_directory_path().string()), Error);
    EXPECT_REJECTED(std::vector<uint8_t>{}, ErrorCode::Format, "magic");
}

TEST(GgufMalformed, Header) {
    Raw magic;
    magic.b = {'G', 'G', 'M', 'L'};
    magic.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(0);
    EXPECT_REJECTED(magic.b, ErrorCode::Format, "bad magic 'GGML'");
    EXPECT_REJECTED(Raw().header(0, 0, 1).b, ErrorCode::Unsupported, "version 1");
    EXPECT_REJECTED(Raw().header(0, 0, 0x03000000u).b, ErrorCode::Unsupported, "big-endian");
    EXPECT_REJECTED(Raw().header(0, 0, 0).b, ErrorCode::Format, "version 0");
    EXPECT_REJECTED(Raw().header(0, 0, 4).b, ErrorCode::Unsupported, "version 4");
    EXPECT_REJECTED(Raw().header(uint64_t{1} << 60, 0).b, ErrorCode::Format, "tensor count");
    EXPECT_REJECTED(Raw().header(0, ~uint64_t{0}).b, ErrorCode::Format, "metadata count");
    // Each count alone would fit; together they cannot.
    Raw both;
    both.header(1, 2).zeros(40);
    EXPECT_REJECTED(both.b, ErrorCode::Format, "cannot fit");
}

TEST(GgufMalformed, Metadata) {
    Raw key_len;
    key_len.header(0, 1).put<uint64_t>(1000).zeros(20);
    EXPECT_REJECTED(key_len.b, ErrorCode::Format, "metadata #0: key: string length 1000");

    Raw value_len;
    value_len.header(0, 1).str("general.name").put<uint32_t>(8).put<uint64_t>(~uint64_t{0}).zeros(8);
    EXPECT_REJECTED(value_len.b, ErrorCode::Format, "metadata 'general.name': value: string length");

    Raw bad_type;
    bad_type.header(0, 1).str("k").put<uint32_t>(13).zeros(8);
    EXPECT_REJECTED(bad_type.b, ErrorCode::Format, "metadata 'k': value type: 13");

    Raw array_overflow;  // 2^62 u32 elements: the byte count overflows 64 bits
    array_overflow.header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 62).zeros(16);
    EXPECT_REJECTED(array_overflow.b, ErrorCode::Format, "metadata 'a': array length: count 4611686018427387904");

    Raw string_array;
    string_array.header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(3).str("x").zeros(4);
    EXPECT_REJECTED(string_array.b, ErrorCode::Format, "metadata 'a': array length");

    Raw array_type;
    array_type.header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0).zeros(4);
    EXPECT_REJECTED(array_type.b, ErrorCode::Format, "array element type: 77");

    Raw deep;
    deep.header(0, 1).str("deep").put<uint32_t>(9);
    for (int i = 0; i < 40; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
    deep.put<uint32_t>(0).put<uint64_t>(0);
    EXPECT_REJECTED(deep.b, ErrorCode::Format, "nested deeper");

    Raw dup;
    dup.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
    EXPECT_REJECTED(dup.b, ErrorCode::Format, "metadata 'k': duplicate key");
}

TEST(GgufMalformed, Alignment) {
    for (uint32_t a : {0u, 3u, 48u}) {
        Raw r;
        r.header(0, 1).kv_u32("general.alignment", a);
        EXPECT_REJECTED(r.b, ErrorCode::Format, "general.alignment");
    }
    Raw f32;
    f32.header(0, 1).str("general.alignment").put<uint32_t>(6).put<float>(32.0f);
    EXPECT_REJECTED(f32.b, ErrorCode::Format, "'general.alignment': is a f32");
    Raw huge;  // a valid power of two that pushes the data section off the file
    huge.header(1, 1).kv_u32("general.alignment", 1u << 31).tensor_info("w", {4}, 0, 0).zeros(16);
    EXPECT_REJECTED(huge.b, ErrorCode::Format, "data section");
}

TEST(GgufMalformed, TensorInfos) {
    EXPECT_REJECTED(one_tensor_file({}, 0, 0, 0), ErrorCode::Format, "tensor 'w': n_dims 0");
    EXPECT_REJECTED(one_tensor_file({1, 1, 1, 1, 1}, 0, 0, 64), ErrorCode::Format, "tensor 'w': n_dims 5");
    EXPECT_REJECTED(one_tensor_file({4, 0}, 0, 0, 64), ErrorCode::Format, "tensor 'w': dimension 1 (0) is zero");
    EXPECT_REJECTED(one_tensor_file({4, uint64_t{1} << 63}, 0, 0, 64), ErrorCode::Format,
                    "dimension 1 (9223372036854775808) is negative");
    EXPECT_REJECTED(one_tensor_file({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 64), ErrorCode::Format,
                    "element count overflows");
    // Fits int64 elements, but not in bytes as f64.
    EXPECT_REJECTED(one_tensor_file({uint64_t{1} << 62}, 28, 0, 64), ErrorCode::Format, "byte size overflows");
    EXPECT_REJECTED(one_tensor_file({4}, 99, 0, 64), ErrorCode::Unsupported, "tensor 'w': type id 99");
    EXPECT_REJECTED(one_tensor_file({32}, 4, 0, 64), ErrorCode::Unsupported, "type id 4");
    EXPECT_REJECTED(one_tensor_file({33}, 2, 0, 64), ErrorCode::Format, "ne[0] = 33 is not a multiple of the q4_0 block size 32");
    EXPECT_REJECTED(one_tensor_file({4}, 0, 16, 64), ErrorCode::Format, "tensor 'w': offset 16 is not a multiple of the alignment 32");
    EXPECT_REJECTED(one_tensor_file({4}, 0, 64, 64), ErrorCode::Format, "tensor 'w': offset 64 + 16 bytes lies outside");
    EXPECT_REJECTED(one_tensor_file({4}, 0, ~uint64_t{0} - 31, 64), ErrorCode::Format, "lies outside");
    EXPECT_REJECTED(one_tensor_file({32}, 0, 0, 64), ErrorCode::Format, "0 + 128 bytes lies outside");
    EXPECT_NO_THROW(load(one_tensor_file({16}, 0, 0, 64)));

    Raw dup;
    dup.header(2, 0).tensor_info("w", {4}, 0, 0).tensor_info("w", {4}, 0, 32).pad().zeros(64);
    EXPECT_REJECTED(dup.b, ErrorCode::Format, "tensor 'w': duplicate tensor name");

    Raw name;
    name.header(1, 0).put<uint64_t>(1ull << 40).zeros(64);
    EXPECT_REJECTED(name.b, ErrorCode::Format, "tensor info #0: name: string length");
}

TEST(GgufMalformed, EveryTruncationIsAnError) {
    const std::vector<uint8_t> full = small_valid_file();
    ASSERT_NO_THROW(load(full));
    TempFile f("trunc.gguf");
    for (size_t n = 0; n < full.size(); ++n) {
        write_bytes(f.path, std::vector<uint8_t>(full.begin(), full.begin() + static_cast<long>(n)));
        try {
            File::open(f.path.string());
            ADD_FAILURE() << "prefix of " << n << " of " << full.size() << " bytes accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::Format) << e.what();
        }
    }
}

TEST(GgufMalformed, RandomCorruptionNeverCrashes) {
    const std::vector<uint8_t> full = small_valid_file();
    std::mt19937 rng(1234);
    TempFile f("corrupt.gguf");
    int loaded = 0, rejected = 0;
    for (int trial = 0; trial < 400; ++trial) {
        std::vector<uint8_t> bytes = full;
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) {
            const size_t at = rng() % bytes.size();
            switch (rng() % 3) {
                case 0: bytes[at] = static_cast<uint8_t>(rng()); break;
                case 1: bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
                default: bytes[at] = (rng() % 2) ? 0xff : 0x00; break;
            }
        }
        if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
        write_bytes(f.path, bytes);
        try {
            const auto file = File::open(f.path.string());
            // Touch everything the file hands out.
            unsigned sum = 0;
            for (const TensorInfo& t : file->tensors()) {
                for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
            }
            for (const auto& kv : file->metadata()) sum += static_cast<unsigned>(kv.first.size());
            (void)sum;
            ++loaded;
        } catch (const Error&) {
            ++rejected;
        }
    }
    EXPECT_GT(rejected, 0);
    EXPECT_GT(loaded, 0);
}

// --- real files ------------------------------------------------------------------

TEST(GgufVocab, Gpt2) {
    const auto f = File::open((test::testdata_dir() / "vocab" / "ggml-vocab-gpt-2.gguf").string());
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f->get_string("general.architecture"), "gpt2");
    const Array* tokens = f->get_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->elem_type, ValueType::STRING);
    EXPECT_EQ(tokens->size(), 50257u);
    EXPECT_EQ(tokens->strings[0], "!");
    EXPECT_EQ(f->get_array("tokenizer.ggml.merges")->size(), 50000u);
    EXPECT_EQ(f->get_array("tokenizer.ggml.token_type")->elem_type, ValueType::I32);
    EXPECT_TRUE(f->get_int("tokenizer.ggml.bos_token_id").has_value());
    EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufVocab, LlamaSpm) {
    const auto f = File::open((test::testdata_dir() / "vocab" / "ggml-vocab-llama-spm.gguf").string());
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
    const Array* tokens = f->get_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_EQ(tokens->size(), 32000u);
    EXPECT_EQ(tokens->strings[1], "<s>");
    const Array* scores = f->get_array("tokenizer.ggml.scores");
    ASSERT_NE(scores, nullptr);
    EXPECT_EQ(scores->elem_type, ValueType::F32);
    EXPECT_EQ(scores->size(), 32000u);
    const Array* types = f->get_array("tokenizer.ggml.token_type");
    ASSERT_NE(types, nullptr);
    EXPECT_EQ(types->int_at(1), 3);  // <s> is a control token
    EXPECT_EQ(f->get_int("llama.vocab_size"), 32000);
    EXPECT_TRUE(f->get_bool("tokenizer.ggml.add_bos_token").has_value());
}

TEST(GgufVocab, AllVocabFilesLoad) {
    int n = 0;
    for (const auto& entry : fs::directory_iterator(test::testdata_dir() / "vocab")) {
        if (entry.path().extension() != ".gguf") continue;
        const auto f = File::open(entry.path().string());
        EXPECT_TRUE(f->get_string("tokenizer.ggml.model").has_value()) << entry.path();
        EXPECT_GT(f->get_array("tokenizer.ggml.tokens")->size(), 1000u) << entry.path();
        ++n;
    }
    EXPECT_GE(n, 5);
}

// A file the writer rebuilds from a real one is identical to it when the
// source was written by llama.cpp's own tooling: same layout decisions.
TEST(GgufVocab, RewriteIsByteIdentical) {
    const fs::path src = test::testdata_dir() / "vocab" / "ggml-vocab-llama-spm.gguf";
    const auto f = File::open(src.string());
    Writer w;
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    std::vector<uint8_t> rebuilt = w.serialize();
    std::ifstream in(src, std::ios::binary);
    std::vector<uint8_t> orig((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // llama.cpp does not pad a file that has no tensor data; Lantern pads the header.
    ASSERT_GE(rebuilt.size(), orig.size());
    EXPECT_LT(rebuilt.size() - orig.size(), 32u);
    rebuilt.resize(orig.size());
    EXPECT_TRUE(rebuilt == orig);
}

}  // namespace
}  // namespace lantern::gguf
