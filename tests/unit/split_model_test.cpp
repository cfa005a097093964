// Models split across files as llama.cpp's gguf-split writes them: loaded
// whole from the first part, with the same logits as the single file;
// quantized into one file; and the ways a split can be wrong, each named.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include "gguf/gguf.h"
#include "gguf/split.h"
#include "lantern/error.h"
#include "lantern/lantern.h"
#include "model/quantize.h"
#include "test_util.h"

namespace lantern::test {
namespace {

// Writes `src` as n parts NAME-0000i-of-0000n.gguf beside `stem`, the
// tensors dealt out in order; returns the first part's path. `edit` may
// change a part's writer before it is written.
std::string split_file(const std::string& src, const std::string& stem, int n,
                       const std::function<void(int, gguf::Writer&)>& edit = {}) {
    auto f = gguf::File::open(src);
    const auto& tensors = f->tensors();
    const size_t per = (tensors.size() + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
    for (int i = 0; i < n; ++i) {
        gguf::Writer w;
        if (i == 0) {
            for (const auto& [key, value] : f->metadata()) w.set(key, value);
        }
        w.set("split.no", gguf::Value(static_cast<uint16_t>(i)));
        w.set("split.count", gguf::Value(static_cast<uint16_t>(n)));
        w.set("split.tensors.count", gguf::Value(static_cast<int32_t>(tensors.size())));
        for (size_t t = per * static_cast<size_t>(i); t < std::min(tensors.size(), per * static_cast<size_t>(i + 1)); ++t) {
            w.add_tensor(tensors[t].name, tensors[t].type, tensors[t].shape, tensors[t].data, tensors[t].nbytes);
        }
        if (edit) edit(i, w);
        w.write(gguf::split_part_path(stem + "-00001-of-0000" + std::to_string(n) + ".gguf", i, n));
    }
    return stem + "-00001-of-0000" + std::to_string(n) + ".gguf";
}

void remove_parts(const std::string& stem, int n) {
    for (int i = 0; i < n; ++i) {
        std::remove(gguf::split_part_path(stem + "-00001-of-0000" + std::to_string(n) + ".gguf", i, n).c_str());
    }
}

std::vector<int32_t> greedy(const std::string& path, int n) {
    ModelParams p;
    p.n_threads = 2;
    auto m = Model::load(path, p);
    Context ctx(*m, ContextParams{.n_ctx = 128});
    std::vector<int32_t> ids = m->tokenize("The capital of France is", true, false);
    Batch b;
    for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int>(i), 0, i + 1 == ids.size());
    ctx.decode(b);
    std::vector<int32_t> out;
    SamplerParams sp;
    sp.temperature = 0.0f;
    Sampler s(sp, m->n_vocab());
    for (int i = 0; i < n; ++i) {
        const int32_t t = s.sample(ctx.logits(0));
        out.push_back(t);
        Batch one;
        one.add(t, static_cast<int>(ids.size()) + i, 0, true);
        ctx.decode(one);
    }
    return out;
}

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(SplitModel, LoadsAsTheWholeFile) {
    const std::string whole = default_model_path().string();
    const std::string stem = temp_path("split-smollm2").string();
    const std::string first = split_file(whole, stem, 3);
    EXPECT_EQ(greedy(first, 12), greedy(whole, 12));
    ModelParams p;
    p.n_threads = 2;
    const ModelInfo a = Model::load(first, p)->info(), b = Model::load(whole, p)->info();
    EXPECT_EQ(a.n_params, b.n_params);
    EXPECT_GT(a.file_bytes, b.file_bytes * 9 / 10);
    remove_parts(stem, 3);
}

TEST(SplitModel, QuantizesIntoOneFile) {
    const std::string whole = default_model_path().string();
    const std::string stem = temp_path("split-q").string();
    const std::string first = split_file(whole, stem, 2);
    QuantizeOptions o;
    parse_quantize_type("q8_0", o);
    o.n_threads = 2;
    o.input_path = whole;
    o.output_path = temp_path("split-q-from-whole.gguf").string();
    quantize_model(o);
    o.input_path = first;
    o.output_path = temp_path("split-q-from-parts.gguf").string();
    quantize_model(o);
    EXPECT_EQ(bytes_of(temp_path("split-q-from-parts.gguf").string()), bytes_of(temp_path("split-q-from-whole.gguf").string()));
    std::remove(temp_path("split-q-from-whole.gguf").c_str());
    std::remove(temp_path("split-q-from-parts.gguf").c_str());
    remove_parts(stem, 2);
}

std::string load_error(const std::string& path, ErrorCode* code = nullptr) {
    try {
        Model::load(path, ModelParams{});
    } catch (const Error& e) {
        if (code != nullptr) *code = e.code();
        return e.what();
    }
    return "";
}

TEST(SplitModel, WrongSplitsAreNamed) {
    const std::string whole = default_model_path().string();
    const std::string stem = temp_path("split-bad").string();
    const std::string first = split_file(whole, stem, 3);
    const std::string second = gguf::split_part_path(first, 1, 3);
    EXPECT_NE(load_error(second).find("this is part 2 of 3 of a split model: open the first part, whose name ends in "
                                      "-00001-of-00003.gguf"),
              std::string::npos);
    // Renamed: the other parts cannot be found.
    const std::string renamed = temp_path("split-renamed.gguf").string();
    std::rename(first.c_str(), renamed.c_str());
    EXPECT_NE(load_error(renamed).find("split into 3 files, but this name does not end in -00001-of-00003.gguf"),
              std::string::npos);
    std::rename(renamed.c_str(), first.c_str());
    // A part missing.
    const std::string third = gguf::split_part_path(first, 2, 3);
    std::rename(third.c_str(), (third + ".away").c_str());
    ErrorCode code{};
    EXPECT_NE(load_error(first, &code).find(third), std::string::npos);
    EXPECT_EQ(code, ErrorCode::Io);
    std::rename((third + ".away").c_str(), third.c_str());
    remove_parts(stem, 3);
    // Parts that disagree on their numbering or on the tensor count.
    split_file(whole, stem, 3, [](int i, gguf::Writer& w) {
        if (i == 2) w.set("split.no", gguf::Value(static_cast<uint16_t>(1)));
    });
    EXPECT_NE(load_error(first).find("is not part 3 of 3"), std::string::npos);
    split_file(whole, stem, 3, [](int i, gguf::Writer& w) {
        if (i == 0) w.set("split.tensors.count", gguf::Value(static_cast<int32_t>(5)));
    });
    EXPECT_NE(load_error(first).find("tensors; split.tensors.count says 5"), std::string::npos);
    remove_parts(stem, 3);
}

}  // namespace
}  // namespace lantern::test
