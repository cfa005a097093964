// The `lantern` tool as a user runs it: tokenizer vectors through
// `lantern tokenize`, errors on corrupt files, a golden chat answer.
#include <gtest/gtest.h>

#include <cstdlib>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "cli_runner.h"
#include "gguf/gguf.h"
#include "lantern/lantern.h"

namespace lantern::test {
namespace {

std::vector<std::string> split_inputs(const std::string& text) {
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
        const size_t at = text.find(sep, start);
        if (at == std::string::npos) break;
        parts.push_back(text.substr(start, at - start));
        start = at + sep.size();
    }
    return parts;
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Every vector of ../shared/testdata/vocab through the binary:
// `lantern tokenize --ids --no-bos --no-parse-special`.
TEST(Cli, TokenizeMatchesVocabVectors) {
    const std::filesystem::path dir = testdata_dir() / "vocab";
    ASSERT_TRUE(std::filesystem::exists(dir)) << dir;
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() != ".gguf") continue;
        ++files;
        const std::vector<std::string> inputs = split_inputs(read_file(entry.path().string() + ".inp"));
        std::vector<std::string> expected;
        std::stringstream outs(read_file(entry.path().string() + ".out"));
        for (std::string line; std::getline(outs, line);) expected.push_back(line);
        ASSERT_EQ(inputs.size(), expected.size()) << entry.path();
        for (size_t i = 0; i < inputs.size(); ++i) {
            const std::string in_file = temp_path("tok-input.txt").string();
            std::ofstream(in_file, std::ios::binary) << inputs[i];
            const CliOutput o = run_lantern("tokenize -m " + shell_quote(entry.path().string()) + " -f " + shell_quote(in_file) +
                                     " --ids --no-bos --no-parse-special");
            std::remove(in_file.c_str());
            ASSERT_EQ(o.exit_code, 0) << o.err;
            // "[1, 2, 3]\n" -> "1 2 3"
            std::string ids = o.out.substr(1, o.out.find(']') - 1);
            std::string want;
            std::stringstream ws(expected[i]);
            for (std::string tok; ws >> tok;) want += (want.empty() ? "" : ", ") + tok;
            EXPECT_EQ(ids, want) << entry.path().filename() << " input " << i;
        }
    }
    EXPECT_GE(files, 5);
}

// `lantern devices` says which CPU kernels the binary runs.
TEST(Cli, DevicesNamesTheCpuKernels) {
    const CliOutput o = run_lantern("devices");
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("cpu: " + cpu_kernels() + " kernels, "), std::string::npos) << o.out;
    // And the weight types it packs at load, where it packs any.
    std::string packed;
    for (const std::string& t : cpu_packed_types()) packed += (packed.empty() ? "; packed at load: " : " ") + t;
    if (!packed.empty()) {
        EXPECT_NE(o.out.find(packed + "\n"), std::string::npos) << o.out;
    }
    EXPECT_EQ(o.out.find("packed at load") != std::string::npos, !packed.empty()) << o.out;
    // And lantern bench records them with its figures.
    const CliOutput b = run_lantern("bench -r 1 -p 8 -n 2 -t 1 -o json");
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(b.out).at(0).at("cpu_kernels"), cpu_kernels()) << b.out;
}

// A build directory outside the checkout (LANTERN_BUILD_DIR=/elsewhere
// scripts/setup.sh) still finds the default model the set-up fetched.
TEST(Cli, DefaultModelFoundFromABuildOutsideTheCheckout) {
    if (std::getenv("LANTERN_MODEL") != nullptr) GTEST_SKIP() << "LANTERN_MODEL names the model";
    ASSERT_TRUE(std::filesystem::exists(default_model_path()));
    const std::filesystem::path bin = temp_path("relocated-build") / "bin";
    std::filesystem::create_directories(bin);
    std::filesystem::copy_file(lantern_binary(), bin / "lantern", std::filesystem::copy_options::overwrite_existing);
    // Run from that directory: no models/ beside the binary or below the cwd.
    const CliOutput o = run_binary((bin / "lantern").string(), "tokenize -p hi --ids", bin.string());
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.rfind("[", 0), 0u) << o.out;
    std::filesystem::remove_all(bin.parent_path());
}

// Generation that reaches the end of the context says so, not just stops.
TEST(Cli, FullContextIsReported) {
    const CliOutput o = run_lantern("run -c 32 -n 64 --temp 0 --ignore-eos -t 1 -p 'Once upon a time'");
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find("note: the context is full (32 tokens): generation stopped after"), std::string::npos) << o.err;
    const CliOutput enough = run_lantern("run -c 32 -n 4 --temp 0 --ignore-eos -t 1 -p 'Once upon a time'");
    EXPECT_EQ(enough.err.find("context is full"), std::string::npos) << enough.err;
}

// A corrupt or truncated GGUF: one line on stderr, exit code 1, no crash.
TEST(Cli, CorruptModelGivesOneLineError) {
    const std::string good = default_model_path().string();
    const std::string bad = temp_path("truncated.gguf").string();
    {
        std::ifstream in(good, std::ios::binary);
        std::vector<char> head(1 << 20);
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        std::ofstream(bad, std::ios::binary).write(head.data(), in.gcount());
    }
    const std::string garbage = temp_path("garbage.gguf").string();
    std::ofstream(garbage, std::ios::binary) << "GGUF\x03\x00\x00\x00 this is not a model";
    const std::string missing = temp_path("missing.gguf").string();
    for (const std::string& f : {bad, garbage, missing}) {
        for (const char* cmd : {"run -n 4 -p hi -m ", "bench -r 1 -p 8 -n 2 -m ", "tokenize -p hi -m "}) {
            const CliOutput o = run_lantern(std::string(cmd) + shell_quote(f));
            EXPECT_EQ(o.exit_code, 1) << cmd << f << ": " << o.err;
            EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
            EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
        }
    }
    std::remove(bad.c_str());
    std::remove(garbage.c_str());
}

// The README's first command: a coherent greedy answer through the template.
TEST(Cli, ChatAnswersGolden) {
    const CliOutput o = run_lantern("run --chat --single-turn --temp 0 -n 32 -p " +
                             shell_quote("What is the capital of France? Answer in one sentence.") + " < /dev/null");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out, "The capital of France is Paris.\n");
    EXPECT_NE(o.err.find("generation:"), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("no chat template"), std::string::npos) << o.err;  // SmolLM2 carries its own
}

// --chat-template-kwargs: the variables reach the template (here one that
// appends `extra` to the prompt: more prompt tokens), and anything but a
// JSON object is refused by name.
TEST(Cli, ChatTemplateVariables) {
    const std::string tmpl = shell_quote("{% for m in messages %}{{ m.content }}{% endfor %}"
                                         "{% if extra is defined %}{{ extra }}{% endif %}");
    auto prompt_tokens = [&](const std::string& more) {
        const CliOutput o = run_lantern("run --chat --single-turn --temp 0 -n 2 -t 1 -p " +
                                        shell_quote("Hi there, how are you?") + " --chat-template " + tmpl + more + " < /dev/null");
        EXPECT_EQ(o.exit_code, 0) << o.err;
        const size_t at = o.err.find("prompt: ");
        return at == std::string::npos ? -1 : std::atoi(o.err.c_str() + at + 8);
    };
    const int plain = prompt_tokens("");
    EXPECT_GT(plain, 0);
    EXPECT_GT(prompt_tokens(" --chat-template-kwargs " + shell_quote(R"({"extra": " Answer briefly, in English."})")), plain);
    // The same template from a file; a file that is not there is named.
    const std::string file = temp_path("template.jinja").string();
    {
        std::ofstream(file) << "{% for m in messages %}{{ m.content }}{% endfor %}"
                               "{% if extra is defined %}{{ extra }}{% endif %}";
    }
    const CliOutput from_file = run_lantern("run --chat --single-turn --temp 0 -n 2 -t 1 -p " +
                                            shell_quote("Hi there, how are you?") + " --chat-template-file " + file +
                                            " < /dev/null");
    EXPECT_EQ(from_file.exit_code, 0) << from_file.err;
    EXPECT_NE(from_file.err.find("prompt: " + std::to_string(plain) + " "), std::string::npos) << from_file.err;
    const CliOutput missing = run_lantern("run --chat -st -n 2 -p hi --chat-template-file /nonexistent/t.jinja");
    EXPECT_NE(missing.exit_code, 0);
    EXPECT_NE(missing.err.find("/nonexistent/t.jinja"), std::string::npos) << missing.err;
    const CliOutput bad = run_lantern("run --chat -st -n 2 -p hi --chat-template-kwargs '[1]'");
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--chat-template-kwargs must be a JSON object"), std::string::npos) << bad.err;
}

// A chat longer than the context goes on without its oldest exchanges. The
// context holds about two turns (a turn is ~20 prompt tokens and a reply of
// up to 24), whatever the replies say: the greedy text differs between the
// kernel sets (AVX2's replies are shorter than AVX-512's, and 160 tokens
// held all five of them).
TEST(Cli, ChatOutgrowingTheContextDropsTheOldestTurns) {
    const std::string input = temp_path("chat-turns.txt").string();
    std::ofstream(input) << "Name a fruit.\nName a color.\nName an animal.\nName a country.\nName a planet.\n";
    const CliOutput o = run_lantern("run --chat -c 96 -n 24 --temp 0 -t 1 < " + shell_quote(input));
    std::remove(input.c_str());
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find("note: the conversation outgrew the context (96 tokens): the oldest"), std::string::npos)
        << o.err;
    // A reply to every message, the last ones after the drop included.
    EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 5) << o.out;
    EXPECT_EQ(o.out.find("\n\n"), std::string::npos) << o.out;
}

// -l/--logit-bias: +100 makes a token the only choice, -inf bans it, and a
// malformed or out-of-vocabulary bias is a one-line error.
TEST(Cli, LogitBiasForcesAndBansTokens) {
    const CliOutput ids = run_lantern("tokenize --ids -p Yes");
    ASSERT_EQ(ids.exit_code, 0) << ids.err;
    ASSERT_EQ(ids.out.front(), '[') << ids.out;
    const std::string yes = ids.out.substr(1, ids.out.find(']') - 1);
    const std::string prompt = shell_quote("Once upon a time");
    CliOutput o = run_lantern("run -n 3 --temp 0 -t 1 -p " + prompt + " -l " + yes + "+100");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out, "Once upon a timeYesYesYes\n");
    const CliOutput plain = run_lantern("run -n 1 --temp 0 -t 1 -p " + prompt + " 2>/dev/null");
    const CliOutput first = run_lantern("tokenize --ids -p " + shell_quote(plain.out.substr(16, plain.out.size() - 17)));
    ASSERT_EQ(first.exit_code, 0) << first.err;
    const std::string top = first.out.substr(1, first.out.find_first_of(",]") - 1);
    o = run_lantern("run -n 1 --temp 0 -t 1 -p " + prompt + " --logit-bias " + top + "-inf");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out, plain.out);
    for (const char* bad : {"12x", "12+", "+3", "12*3", "99999999+1"}) {
        o = run_lantern("run -n 1 -p hi -l " + shell_quote(bad));
        EXPECT_EQ(o.exit_code, 1) << bad;
        EXPECT_NE(o.err.find("logit"), std::string::npos) << o.err;
    }
}

// --json: the chat reply is one JSON object.
TEST(Cli, JsonOutputIsOneObject) {
    const CliOutput o = run_lantern("run --chat --single-turn --json --temp 0 -n 96 -t 1 -p " +
                                    shell_quote("What is the capital of France? Reply in JSON.") + " < /dev/null");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const nlohmann::json parsed = nlohmann::json::parse(o.out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << o.out;
    EXPECT_TRUE(parsed.is_object()) << o.out;
}

// --json-schema: the reply follows the schema (given inline or as a file);
// a keyword it cannot enforce is an error naming it.
TEST(Cli, JsonSchemaOutput) {
    const std::string schema = R"({"type": "object", "properties": {"city": {"type": "string"},
        "big": {"type": "boolean"}}, "required": ["city", "big"]})";
    const std::string file = temp_path("schema.json").string();
    std::ofstream(file) << schema;
    for (const std::string& arg : {shell_quote(schema), shell_quote(file)}) {
        const CliOutput o = run_lantern("run --chat --single-turn --json-schema " + arg + " --temp 0 -n 96 -t 1 -p " +
                                        shell_quote("What is the capital of France? Reply in JSON.") + " < /dev/null");
        ASSERT_EQ(o.exit_code, 0) << o.err;
        const nlohmann::json v = nlohmann::json::parse(o.out, nullptr, false);
        ASSERT_TRUE(v.is_object()) << o.out;
        EXPECT_EQ(v.size(), 2u) << o.out;
        EXPECT_TRUE(v["city"].is_string() && v["big"].is_boolean()) << o.out;
    }
    const CliOutput bad = run_lantern("run -n 4 -p hi --json-schema " + shell_quote(R"x({"type": "string", "pattern": "(?=a)"})x"));
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("lookahead"), std::string::npos) << bad.err;
}

// DRY breaks the loop greedy decoding falls into; the other samplers of
// llama.cpp's run from the command line; bad settings are errors.
TEST(Cli, DryBreaksALoopAndTheOtherSamplersRun) {
    const std::string prompt = "the cat the cat the cat the cat";
    const std::string args = "run --temp 0 -n 40 -t 1 --ignore-eos --no-display-prompt -p " + shell_quote(prompt);
    const CliOutput loop = run_lantern(args);
    ASSERT_EQ(loop.exit_code, 0) << loop.err;
    EXPECT_NE(loop.out.find("the cat the cat the cat the cat the cat the cat"), std::string::npos) << loop.out;
    const CliOutput dry = run_lantern(args + " --dry-multiplier 0.8");
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_EQ(dry.out.find("the cat the cat"), std::string::npos) << dry.out;
    // Breakers that every token holds: no repeat is measured, so the loop stays.
    const CliOutput broken = run_lantern(args + " --dry-multiplier 0.8 --dry-sequence-breaker ' ' --dry-sequence-breaker t");
    ASSERT_EQ(broken.exit_code, 0) << broken.err;
    EXPECT_EQ(broken.out, loop.out);
    for (const char* more : {"--mirostat 2 --mirostat-ent 4", "--mirostat 1", "--typical 0.8 --top-nsigma 2",
                                    "--xtc-probability 0.5 --xtc-threshold 0.1"}) {
        const CliOutput o = run_lantern(std::string("run --temp 0.8 --seed 2 -n 16 -t 1 -p hello ") + more);
        EXPECT_EQ(o.exit_code, 0) << more << ": " << o.err;
    }
    const CliOutput bad = run_lantern("run -n 4 -p hi --mirostat 3");
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("mirostat must be 0 (off), 1 or 2"), std::string::npos) << bad.err;
}

// --grammar / --grammar-file: every reply of a chat matches the grammar (it
// starts over each turn); a bad grammar is an error naming where.
TEST(Cli, GrammarHoldsEveryReply) {
    const std::string grammar = "root ::= item{3}\nitem ::= \"- \" [A-Z] [a-z ]{2,30} \"\\n\"\n";
    const std::string file = temp_path("list.gbnf").string();
    std::ofstream(file) << grammar;
    const std::string input = temp_path("grammar-turns.txt").string();
    std::ofstream(input) << "Name three fruits.\nName three colors.\n";
    const CliOutput o = run_lantern("run --chat --grammar-file " + shell_quote(file) + " --temp 0 -n 64 -t 1 < " +
                                    shell_quote(input));
    std::remove(input.c_str());
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const std::regex reply("(- [A-Z][a-z ]{2,30}\n){3}");
    std::smatch m;
    std::string rest = o.out;
    int replies = 0;
    while (std::regex_search(rest, m, reply)) {
        ++replies;
        rest = m.suffix();
    }
    EXPECT_EQ(replies, 2) << o.out;
    const CliOutput yes = run_lantern("run --temp 0 -n 8 -t 1 --grammar " + shell_quote("root ::= (\"yes\" | \"no\") \".\"") +
                                      " -p " + shell_quote("Is water wet? Answer:"));
    ASSERT_EQ(yes.exit_code, 0) << yes.err;
    EXPECT_TRUE(yes.out.find("Answer:yes.\n") != std::string::npos || yes.out.find("Answer:no.\n") != std::string::npos)
        << yes.out;
    const CliOutput bad = run_lantern("run -n 4 -p hi --grammar " + shell_quote("root ::= item"));
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("line 1, column 10: rule 'item' is used but not defined"), std::string::npos) << bad.err;
}

// lantern quantize: the default model (Q4_1) in Q8_0 still gives the golden
// answer; K-quants fall back per row length; the same type copies bytes.
TEST(Cli, QuantizeWritesAWorkingModel) {
    const std::string in = default_model_path().string();
    const std::string q8 = temp_path("q8_0.gguf").string(), q4k = temp_path("q4_K.gguf").string(),
                      same = temp_path("q4_1.gguf").string();
    CliOutput o = run_lantern("quantize -m " + shell_quote(in) + " -o " + shell_quote(q8) + " --type q8_0 -t 2");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.err.find("matrices in q8_0"), std::string::npos) << o.err;
    {
        const auto f = gguf::File::open(q8);
        EXPECT_EQ(f->get_int("general.file_type"), 7);
        int matrices = 0;
        for (const gguf::TensorInfo& t : f->tensors()) {
            if (t.shape.size() < 2) {
                EXPECT_EQ(t.type, DType::F32) << t.name;  // norms keep their type
                continue;
            }
            EXPECT_EQ(t.type, DType::Q8_0) << t.name;
            ++matrices;
        }
        EXPECT_EQ(matrices, 30 * 7 + 1);
    }
    o = run_lantern("run -m " + shell_quote(q8) + " --chat --single-turn --temp 0 -n 32 -t 2 -p " +
                    shell_quote("What is the capital of France? Answer in one sentence.") + " < /dev/null");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out, "The capital of France is Paris.\n");

    // Q4_K: SmolLM2's 576-wide rows take Q5_0; ffn_down's 1,536-wide ones Q4_K.
    o = run_lantern("quantize -m " + shell_quote(in) + " -o " + shell_quote(q4k) + " --type q4_K -t 2");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    {
        const auto f = gguf::File::open(q4k);
        EXPECT_EQ(f->get_int("general.file_type"), 14);  // LLAMA_FTYPE_MOSTLY_Q4_K_S: no mix
        EXPECT_EQ(f->find_tensor("blk.0.ffn_down.weight")->type, DType::Q4_K);
        EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, DType::Q5_0);
        EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::Q5_0);
    }
    o = run_lantern("run -m " + shell_quote(q4k) + " -n 8 --temp 0 -t 2 -p " + shell_quote("Once upon a time"));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_GT(o.out.size(), std::string("Once upon a time").size() + 8) << o.out;

    // The file's own type: the Q4_1 matrices and the vectors copied byte for
    // byte; only the Q8_0 embedding table is converted.
    o = run_lantern("quantize -m " + shell_quote(in) + " -o " + shell_quote(same) + " --type q4_1");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    {
        const auto a = gguf::File::open(in), b = gguf::File::open(same);
        ASSERT_EQ(a->tensors().size(), b->tensors().size());
        for (size_t i = 0; i < a->tensors().size(); ++i) {
            const gguf::TensorInfo &x = a->tensors()[i], &y = b->tensors()[i];
            ASSERT_EQ(x.name, y.name);
            if (x.name == "token_embd.weight") {
                EXPECT_EQ(x.type, DType::Q8_0);
                EXPECT_EQ(y.type, DType::Q4_1);
                continue;
            }
            ASSERT_EQ(x.nbytes, y.nbytes) << x.name;
            EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0) << x.name;
        }
    }
    for (const std::string& f : {q8, q4k, same}) std::remove(f.c_str());
}

// q4_K_M: llama.cpp's mix, Q6_K for attn_v and ffn_down in the layers its
// use_more_bits picks (30 layers: 0-2, 5, 8, ..., 23, 26-29).
TEST(Cli, QuantizeMediumMix) {
    const std::string in = default_model_path().string(), out = temp_path("q4_K_M.gguf").string();
    const CliOutput o = run_lantern("quantize -m " + shell_quote(in) + " -o " + shell_quote(out) + " --type q4_K_M -t 2");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    {
        const auto f = gguf::File::open(out);
        EXPECT_EQ(f->get_int("general.file_type"), 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
        for (int i = 0; i < 30; ++i) {
            const bool more = i < 3 || i >= 26 || (i - 3) % 3 == 2;
            const std::string blk = "blk." + std::to_string(i);
            EXPECT_EQ(f->find_tensor(blk + ".ffn_down.weight")->type, more ? DType::Q6_K : DType::Q4_K) << i;
            // 576-wide rows: Q6_K and Q4_K fall back to Q8_0 and Q5_0.
            EXPECT_EQ(f->find_tensor(blk + ".attn_v.weight")->type, more ? DType::Q8_0 : DType::Q5_0) << i;
            EXPECT_EQ(f->find_tensor(blk + ".ffn_up.weight")->type, DType::Q5_0) << i;
        }
    }
    const CliOutput r = run_lantern("run -m " + shell_quote(out) + " --chat --single-turn --temp 0 -n 32 -t 2 -p " +
                                    shell_quote("What is the capital of France? Answer in one sentence.") + " < /dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "The capital of France is Paris.\n");
    std::remove(out.c_str());
}

// A mixture of experts: the 3-D expert tensors are quantized row by row,
// ffn_down_exps takes the mix's Q6_K where ffn_down would, the router stays
// f32 (as llama.cpp keeps it); the result runs.
TEST(Cli, QuantizeMixtureOfExperts) {
    const std::string in = temp_path("moe-f32.gguf").string(), out = temp_path("moe-q4_K_M.gguf").string();
    ASSERT_EQ(std::system(("python3 " + (source_dir() / "tests/reference/make_tiny_model.py").string() + " mixtral " +
                           shell_quote(in) + " --wide > /dev/null")
                              .c_str()),
              0);
    CliOutput o = run_lantern("quantize -m " + shell_quote(in) + " -o " + shell_quote(out) + " --type q4_K_M -t 2");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    {
        const auto f = gguf::File::open(out);
        EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight")->type, DType::F32);
        EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_exps.weight")->type, DType::Q4_K);
        EXPECT_EQ(f->find_tensor("blk.0.ffn_down_exps.weight")->type, DType::Q4_K);
        EXPECT_EQ(f->find_tensor("blk.1.ffn_down_exps.weight")->type, DType::Q6_K);  // the last eighth
    }
    o = run_lantern("run -m " + shell_quote(out) + " -n 8 --temp 0 -t 2 -p " + shell_quote("Once upon a time"));
    EXPECT_EQ(o.exit_code, 0) << o.err;
    std::remove(in.c_str());
    std::remove(out.c_str());
}

// --lora / --lora-scaled: an adapter written by gguf-py (as llama.cpp's
// converter writes them) changes the greedy text; at scale 0 it is the base
// model's; a scale that is not a number and a model given as an adapter are
// one-line errors.
TEST(Cli, LoraAdaptersApply) {
    const std::string model = temp_path("lora-cli-f32.gguf").string(), adapter = temp_path("lora-cli.gguf").string();
    const std::string ref = (source_dir() / "tests/reference").string();
    ASSERT_EQ(std::system(("python3 " + ref + "/make_tiny_model.py --type f32 llama " + shell_quote(model) +
                           " > /dev/null && python3 " + ref + "/make_lora.py " + shell_quote(model) + " " +
                           shell_quote(adapter) + " > /dev/null")
                              .c_str()),
              0);
    const std::string run = "run -m " + shell_quote(model) + " -n 8 --temp 0 -t 2 --no-display-prompt -p hello ";
    const CliOutput base = run_lantern(run);
    ASSERT_EQ(base.exit_code, 0) << base.err;
    const CliOutput adapted = run_lantern(run + "--lora " + shell_quote(adapter));
    ASSERT_EQ(adapted.exit_code, 0) << adapted.err;
    EXPECT_NE(adapted.out, base.out);
    EXPECT_NE(adapted.err.find("LoRA adapter: " + adapter + " (scale 1)"), std::string::npos) << adapted.err;
    const CliOutput zero = run_lantern(run + "--lora-scaled " + shell_quote(adapter) + " 0");
    ASSERT_EQ(zero.exit_code, 0) << zero.err;
    EXPECT_EQ(zero.out, base.out);
    CliOutput o = run_lantern(run + "--lora-scaled " + shell_quote(adapter) + " half");
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("'half' is not a number"), std::string::npos) << o.err;
    o = run_lantern(run + "--lora " + shell_quote(model));
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("LoRA adapter: general.type is not \"adapter\""), std::string::npos) << o.err;
    std::remove(model.c_str());
    std::remove(adapter.c_str());
}

// --rope-scaling/--rope-scale/--yarn-*: a file without scaling run with the
// flags generates what the same file with YaRN keys generates; bad values
// are refused naming the flag.
TEST(Cli, RopeScalingFlags) {
    const std::string plain = temp_path("rope-cli.gguf").string(), yarn = temp_path("rope-cli-yarn.gguf").string();
    const std::string ref = (source_dir() / "tests/reference").string();
    ASSERT_EQ(std::system(("python3 " + ref + "/make_tiny_model.py qwen2 " + shell_quote(plain) + " > /dev/null && python3 " +
                           ref + "/make_tiny_model.py qwen2 " + shell_quote(yarn) + " --yarn 4 > /dev/null")
                              .c_str()),
              0);
    const std::string run = " -n 12 --temp 0 -t 2 --no-display-prompt -p hello";
    const CliOutput keyed = run_lantern("run -m " + shell_quote(yarn) + run);
    ASSERT_EQ(keyed.exit_code, 0) << keyed.err;
    EXPECT_NE(keyed.err.find("rope scaling: contexts up to 1024 tokens"), std::string::npos) << keyed.err;
    const CliOutput flags =
        run_lantern("run -m " + shell_quote(plain) + run + " --rope-scaling yarn --rope-scale 4 --yarn-orig-ctx 256");
    ASSERT_EQ(flags.exit_code, 0) << flags.err;
    EXPECT_EQ(flags.out, keyed.out);
    const CliOutput off = run_lantern("run -m " + shell_quote(yarn) + run + " --rope-scaling none");
    const CliOutput base = run_lantern("run -m " + shell_quote(plain) + run);
    ASSERT_EQ(off.exit_code, 0) << off.err;
    EXPECT_EQ(off.out, base.out);
    CliOutput o = run_lantern("run -m " + shell_quote(plain) + run + " --rope-scale -2");
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("--rope-scale must be a positive number"), std::string::npos) << o.err;
    o = run_lantern("run -m " + shell_quote(plain) + run + " --rope-scaling cubic");
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("--rope-scaling"), std::string::npos) << o.err;
    o = run_lantern("run -m " + shell_quote(yarn) + run + " --yarn-beta-slow 0");
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("yarn_beta_slow must be positive"), std::string::npos) << o.err;
    std::remove(plain.c_str());
    std::remove(yarn.c_str());
}

// --suffix: the middle between the prompt and the suffix, from a model whose
// file names FIM tokens (a copy of the default model naming three of its
// special tokens); stdout is prefix, middle, suffix. A model without FIM
// tokens is refused by name.
TEST(Cli, SuffixFillsInTheMiddle) {
    const std::string copy = temp_path("fim-cli.gguf").string();
    {
        const auto f = gguf::File::open(default_model_path().string());
        gguf::Writer w;
        for (const auto& [key, value] : f->metadata()) w.set(key, value);
        w.set("tokenizer.ggml.fim_pre_token_id", uint32_t{3});
        w.set("tokenizer.ggml.fim_suf_token_id", uint32_t{4});
        w.set("tokenizer.ggml.fim_mid_token_id", uint32_t{6});
        for (const gguf::TensorInfo& t : f->tensors()) w.add_tensor(t.name, t.type, t.shape, t.data, t.nbytes);
        w.write(copy);
    }
    const std::string args = " -n 6 --temp 0 -t 2 -p 'def add(a, b):' --suffix 'print(add(1, 2))'";
    CliOutput o = run_lantern("run -m " + shell_quote(copy) + args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.rfind("def add(a, b):", 0), 0u) << o.out;
    EXPECT_GE(o.out.size(), std::string("print(add(1, 2))\n").size());
    EXPECT_EQ(o.out.substr(o.out.size() - std::string("print(add(1, 2))\n").size()), "print(add(1, 2))\n") << o.out;
    o = run_lantern("run" + args);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("no fill-in-the-middle tokens"), std::string::npos) << o.err;
    o = run_lantern("run --chat" + args);
    EXPECT_NE(o.exit_code, 0);
    EXPECT_NE(o.err.find("--suffix"), std::string::npos) << o.err;
    std::remove(copy.c_str());
}

// --layers: a shape's layers cut to a few (quick files of a large model's
// layer shape, for kernel benchmarks); the model runs.
TEST(Cli, SynthWithFewerLayers) {
    const std::string out = temp_path("synth-2-layers.gguf").string();
    const std::string vocab = (testdata_dir() / "vocab/ggml-vocab-llama-spm.gguf").string();
    CliOutput o = run_lantern("synth --shape smollm2-135m --layers 2 --type q8_0 -t 2 --vocab " + shell_quote(vocab) +
                              " -o " + shell_quote(out));
    ASSERT_EQ(o.exit_code, 0) << o.err;
    {
        const auto f = gguf::File::open(out);
        EXPECT_EQ(f->get_int("llama.block_count"), 2);
        EXPECT_NE(f->find_tensor("blk.1.ffn_down.weight"), nullptr);
        EXPECT_EQ(f->find_tensor("blk.2.ffn_down.weight"), nullptr);
    }
    o = run_lantern("run -m " + shell_quote(out) + " -n 4 --temp 0 -t 2 -p hello");
    EXPECT_EQ(o.exit_code, 0) << o.err;
    o = run_lantern("synth --shape smollm2-135m --layers 0 --vocab " + shell_quote(vocab) + " -o " + shell_quote(out));
    EXPECT_NE(o.exit_code, 0);
    std::remove(out.c_str());
}

TEST(Cli, QuantizeRefusesBadRequestsAndLeavesNoFile) {
    const std::string in = default_model_path().string(), out = temp_path("refused.gguf").string();
    for (const std::string& args : {"-m " + shell_quote(in) + " -o " + shell_quote(in) + " --type q8_0",
                                    "-m " + shell_quote(in) + " -o " + shell_quote(out) + " --type q9_0",
                                    "-m " + shell_quote(in) + " -o " + shell_quote(out) + " --type q8_K",
                                    "-m " + shell_quote(in) + " -o " + shell_quote(out) + " --type q4_K --output-type q5_K_M",
                                    "-m " + shell_quote(out + ".missing") + " -o " + shell_quote(out) + " --type q8_0"}) {
        const CliOutput o = run_lantern("quantize " + args);
        EXPECT_EQ(o.exit_code, 1) << args << ": " << o.err;
        EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
        EXPECT_FALSE(std::filesystem::exists(out)) << args;
    }
    EXPECT_TRUE(gguf::File::open(in) != nullptr);  // the input is untouched
}

// --draft-model: greedy speculative decoding gives the greedy text; with
// the model as its own draft nearly every guess is accepted.
TEST(Cli, SpeculativeDecodingGivesTheGreedyText) {
    const std::string model = shell_quote(default_model_path().string());
    const std::string base = "run -n 48 -t 2 -p " + shell_quote("The history of the printing press");
    const std::string args = base + " --temp 0";
    const CliOutput plain = run_lantern(args);
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    const CliOutput spec = run_lantern(args + " --draft-model " + model + " --draft 4");
    ASSERT_EQ(spec.exit_code, 0) << spec.err;
    EXPECT_EQ(spec.out, plain.out);
    const size_t at = spec.err.find("speculative: 48 tokens");
    ASSERT_NE(at, std::string::npos) << spec.err;
    const size_t pct = spec.err.find("accepted (", at);
    ASSERT_NE(pct, std::string::npos) << spec.err;
    EXPECT_GE(std::stoi(spec.err.substr(pct + 10)), 80) << spec.err;
    for (const char* bad : {" --temp 0.8", " --temp 0 --chat", " --temp 0 --json", " --temp 0 --draft 0"}) {
        const CliOutput o = run_lantern(base + " --draft-model " + model + bad + " < /dev/null");
        EXPECT_EQ(o.exit_code, 1) << bad;
        EXPECT_NE(o.err.find("--draft-model"), std::string::npos) << o.err;
    }
    if (std::filesystem::exists(gemma3_model_path())) {  // another vocabulary
        const CliOutput o = run_lantern(args + " --draft-model " + shell_quote(gemma3_model_path().string()));
        EXPECT_EQ(o.exit_code, 1);
        EXPECT_NE(o.err.find("vocabulary"), std::string::npos) << o.err;
    }
}

TEST(Cli, CompletionIsSeededAndReproducible) {
    const std::string args = "run -n 24 --temp 0.8 --seed 42 -p " + shell_quote("Once upon a time") + " 2>/dev/null";
    const CliOutput a = run_lantern(args), b = run_lantern(args);
    ASSERT_EQ(a.exit_code, 0);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.out.rfind("Once upon a time", 0), 0u);
    EXPECT_GT(a.out.size(), std::string("Once upon a time").size() + 20);
}

// -ctk/-ctv (llama.cpp's spellings) set the KV cache's types: the startup
// line reports them and the cache's size; bench lists them as llama-bench
// does; an unknown type is one line naming the option's value.
TEST(Cli, CacheTypesAreTakenAndReported) {
    const std::string prompt = " -p " + shell_quote("The capital of France is");
    const CliOutput f16 = run_lantern("run -c 256 -n 8 --temp 0 -t 2" + prompt);
    const CliOutput q8 = run_lantern("run -c 256 -n 8 --temp 0 -t 2 -ctk q8_0 -ctv q8_0" + prompt);
    ASSERT_EQ(f16.exit_code, 0) << f16.err;
    ASSERT_EQ(q8.exit_code, 0) << q8.err;
    EXPECT_NE(f16.err.find("KV cache: 5.6 MiB: K f16, V f16, 1 x 256 cells"), std::string::npos) << f16.err;
    EXPECT_NE(q8.err.find("KV cache: 3.0 MiB: K q8_0, V q8_0, 1 x 256 cells"), std::string::npos) << q8.err;
    EXPECT_EQ(q8.out, f16.out);  // the same greedy text: " Paris..."

    const CliOutput bench = run_lantern("bench -p 8 -n 4 -r 1 -t 2 --cache-type-k q8_0 -o json");
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    const nlohmann::json rows = nlohmann::json::parse(bench.out);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0]["type_k"], "q8_0");
    EXPECT_EQ(rows[0]["type_v"], "f16");

    const CliOutput bad = run_lantern("run -n 1 -ctv q3_K -p hi");
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("cache_type_v \"q3_K\" is not a KV cache type"), std::string::npos) << bad.err;
}

// bench takes lists as llama-bench does: every combination of threads,
// cache types and tests is a row; a batch-size list gets its column; a
// refused value names its option.
TEST(Cli, BenchMeasuresEveryCombinationOfItsLists) {
    const CliOutput j = run_lantern("bench -r 1 -p 8,16 -n 2 -t 1,2 -ctk f16,q8_0 -o json");
    ASSERT_EQ(j.exit_code, 0) << j.err;
    const nlohmann::json rows = nlohmann::json::parse(j.out);
    std::set<std::string> seen;
    for (const nlohmann::json& r : rows) {
        seen.insert(std::to_string(r["n_threads"].get<int>()) + " " + r["type_k"].get<std::string>() + " " +
                    r["test"].get<std::string>());
        EXPECT_GT(r["avg_ts"].get<double>(), 0.0) << r.dump();
    }
    std::set<std::string> want;
    for (const char* t : {"1", "2"}) {
        for (const char* k : {"f16", "q8_0"}) {
            for (const char* test : {"pp8", "pp16", "tg2"}) want.insert(std::string(t) + " " + k + " " + test);
        }
    }
    EXPECT_EQ(rows.size(), 12u);
    EXPECT_EQ(seen, want) << j.out;

    const CliOutput md = run_lantern("bench -r 1 -p 8 -n 0 -b 4 -b 8 -d 0,4 -t 1");
    ASSERT_EQ(md.exit_code, 0) << md.err;
    EXPECT_NE(md.out.find("| ngl | threads | n_batch | test | t/s |"), std::string::npos) << md.out;
    for (const char* row : {"| 4 | pp8 |", "| 8 | pp8 |", "| 4 | pp8 @ d4 |", "| 8 | pp8 @ d4 |"}) {
        EXPECT_NE(md.out.find(row), std::string::npos) << row << "\n" << md.out;
    }
    EXPECT_EQ(md.out.find("tg"), std::string::npos) << md.out;  // -n 0: no generation test

    const CliOutput bad = run_lantern("bench -r 1 -p 8,-1");
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.err.find("--n-prompt"), std::string::npos) << bad.err;

    // Models too: each file in turn (one missing: named, after the rows before it).
    const std::string model = shell_quote(default_model_path().string());
    const std::string missing = temp_path("no-such-bench-model.gguf").string();
    const CliOutput two = run_lantern("bench -r 1 -p 8 -n 0 -t 1 -o json -m " + model + " -m " + model);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(nlohmann::json::parse(two.out).size(), 2u) << two.out;
    const CliOutput gone = run_lantern("bench -r 1 -p 8 -n 0 -t 1 -m " + model + "," + shell_quote(missing));
    EXPECT_NE(gone.exit_code, 0);
    EXPECT_NE(gone.out.find("| pp8 |"), std::string::npos) << gone.out;
    EXPECT_NE(gone.err.find(missing), std::string::npos) << gone.err;
}

// --prompt-cache: the second run reuses the first's prompt state and gives
// the same greedy text; a prompt that shares only a start reuses that start;
// -ro leaves the file alone; a file that is not a state is never written.
TEST(Cli, PromptCacheReusesThePromptState) {
    const std::string cache = temp_path("prompt-cache.bin").string();
    std::filesystem::remove(cache);
    const std::string prompt = "Once upon a time, in a small village by the sea, there lived an old fisherman who";
    const std::string args = "run -n 12 --temp 0 --prompt-cache " + shell_quote(cache) + " -p ";
    const CliOutput fresh = run_lantern("run -n 12 --temp 0 -p " + shell_quote(prompt));
    const CliOutput first = run_lantern(args + shell_quote(prompt));
    ASSERT_EQ(first.exit_code, 0) << first.err;
    EXPECT_EQ(first.err.find("prompt cache:"), std::string::npos) << first.err;
    ASSERT_TRUE(std::filesystem::exists(cache));
    const CliOutput second = run_lantern(args + shell_quote(prompt));
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_NE(second.err.find("prompt cache: 18 of 19 prompt tokens reused"), std::string::npos) << second.err;
    EXPECT_NE(second.err.find("prompt: 1 tokens"), std::string::npos) << second.err;
    EXPECT_EQ(second.out, fresh.out);
    EXPECT_EQ(first.out, fresh.out);

    const auto stamp = std::filesystem::last_write_time(cache);
    const std::string other = "Once upon a time, in a big city";
    const CliOutput ro = run_lantern("run -n 8 --temp 0 --prompt-cache-ro --prompt-cache " + shell_quote(cache) +
                                     " -p " + shell_quote(other));
    ASSERT_EQ(ro.exit_code, 0) << ro.err;
    EXPECT_NE(ro.err.find("prompt cache: 7 of 9 prompt tokens reused"), std::string::npos) << ro.err;
    EXPECT_EQ(ro.out, run_lantern("run -n 8 --temp 0 -p " + shell_quote(other)).out);
    EXPECT_EQ(std::filesystem::last_write_time(cache), stamp);
    std::filesystem::remove(cache);

    const std::string not_state = temp_path("prompt-cache-not-state.txt").string();
    std::ofstream(not_state) << "precious notes";
    const CliOutput refused = run_lantern(args.substr(0, args.find("--prompt-cache")) + "--prompt-cache " +
                                          shell_quote(not_state) + " -p " + shell_quote(prompt));
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.err.find("is not a saved prompt state"), std::string::npos) << refused.err;
    std::ifstream in(not_state);
    std::string kept;
    std::getline(in, kept);
    EXPECT_EQ(kept, "precious notes");
    std::filesystem::remove(not_state);
    EXPECT_NE(run_lantern("run --chat --prompt-cache " + shell_quote(cache)).exit_code, 0);
}

}  // namespace
}  // namespace lantern::test
