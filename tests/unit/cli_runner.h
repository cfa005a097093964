// Runs the built `lantern` binary as a user would, for the tests that check
// the tool's output (perplexity, golden chat answers of the real models).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util.h"

namespace lantern::test {

struct CliOutput {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
};

inline std::string lantern_binary() {
    return (std::filesystem::path(LANTERN_BINARY_DIR) / "bin" / "lantern").string();
}

// Single-quoted for the shell.
inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// `BINARY ARGS` (ARGS already quoted) with stdout and stderr captured, in
// directory cwd when given.
inline CliOutput run_binary(const std::string& binary, const std::string& args, const std::string& cwd = "") {
    const std::string err_file = temp_path("cli-runner-stderr.txt").string();
    const std::string cmd = (cwd.empty() ? "" : "cd " + shell_quote(cwd) + " && ") + shell_quote(binary) + " " + args +
                            " 2> " + shell_quote(err_file);
    CliOutput o;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return o;
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) o.out.append(buf.data(), n);
    const int status = pclose(p);
    o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream e(err_file);
    std::stringstream ss;
    ss << e.rdbuf();
    o.err = ss.str();
    std::remove(err_file.c_str());
    return o;
}

// `lantern ARGS`, the binary of this build.
inline CliOutput run_lantern(const std::string& args) { return run_binary(lantern_binary(), args); }

}  // namespace lantern::test
