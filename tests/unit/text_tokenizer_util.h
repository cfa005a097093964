// Helpers shared by the tokenizer tests: loading vocab-only GGUFs and the
// .inp/.out test vectors beside them.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace lantern::test {

inline Tokenizer load_tokenizer(const std::filesystem::path& gguf_path,
                                Tokenizer::WarningFn on_warning = nullptr) {
    auto file = gguf::File::open(gguf_path.string());
    return Tokenizer(vocab_data_from_gguf(*file), std::move(on_warning));
}

inline std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The inputs of a .inp file: each input is followed by "\n__ggml_vocab_test__\n".
inline std::vector<std::string> read_vocab_inputs(const std::filesystem::path& path) {
    const std::string text = read_file(path);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    size_t pos = 0;
    for (size_t next; (next = text.find(sep, pos)) != std::string::npos; pos = next + sep.size()) {
        inputs.push_back(text.substr(pos, next - pos));
    }
    EXPECT_EQ(pos, text.size()) << path << ": text after the last separator";
    return inputs;
}

// The expected ids of a .out file: one line per input, ids separated by spaces.
inline std::vector<std::vector<int32_t>> read_vocab_outputs(const std::filesystem::path& path) {
    std::vector<std::vector<int32_t>> outputs;
    std::istringstream lines(read_file(path));
    for (std::string line; std::getline(lines, line);) {
        std::istringstream ids(line);
        std::vector<int32_t> row;
        for (int32_t id; ids >> id;) row.push_back(id);
        outputs.push_back(std::move(row));
    }
    return outputs;
}

// Printable form of a string for failure messages.
inline std::string escaped(std::string_view s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20) {
            char buf[8];
            snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    return out;
}

// Strings that stress every stage: unicode, emoji, digits, whitespace runs, code.
inline const std::vector<std::string>& tricky_strings() {
    static const std::vector<std::string> strings = {
        "",
        " ",
        "   ",
        "\n",
        "\n\n\n",
        " \t \r\n \u00a0 x",
        "Hello world",
        " Hello world 123456 3.14159 1,000,000",
        "I'm sure they'll say you've been 'told' we'd DONE it. IT'S",
        "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c4pfel Stra\u00dfe \u0130stanbul",
        "\u043d\u0435\u0449\u043e \u043d\u0430 \u0411\u044a\u043b\u0433\u0430\u0440\u0441\u043a\u0438",
        "\u6211\u60f3\u5728apple\u5de5\u4f5c1314151\u5929\uff5e \u3053\u3093\u306b\u3061\u306f \uc548\ub155\ud558\uc138\uc694",
        "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd \u0928\u092e\u0938\u094d\u0924\u0947 \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
        "\U0001F680 (normal) \U0001F636\u200d\U0001F32B\ufe0f \U0001F469\u200d\U0001F469\u200d\U0001F467 \u2705 \U0001F999\U0001F999",
        "def f(x):\n    return x**2  # square\n\tif x >= 10 and y != 3: pass\n",
        "int main() { std::vector<int> v{1,2,3}; return v[0] << 2; } // C++",
        "<html><body class=\"x\">&amp; &#x27;</body></html>",
        "!!!!!!??????......------=======''''''``````\"\"\"\"",
        "\u00bd \u2153 \u2167 \u0663\u0664 \U0001D7D8",
        "trailing spaces   ",
        "  leading",
    };
    return strings;
}

}  // namespace lantern::test
