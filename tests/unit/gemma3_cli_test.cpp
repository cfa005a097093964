// Gemma 3 270M through the `lantern` tool: chat with its own (built-in Gemma)
// template, and a plain completion.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "cli_runner.h"

namespace lantern::test {
namespace {

std::string gemma3_arg() { return "-m " + shell_quote(gemma3_model_path().string()); }

// The packaged file is the pretrained checkpoint (google/gemma-3-270m, not
// the -it one; it has no tokenizer.chat_template), which does not follow chat
// turns: greedily it repeats the user's message. The float64 reference's
// greedy continuation of the same template tokens is the same sentence
// (reference_forward.py --generate 12), so this checks the template and the
// engine, not the model's manners.
TEST(Gemma3Cli, ChatAnswersGolden) {
    const CliOutput o = run_lantern("run " + gemma3_arg() + " --chat -st --temp 0 -n 16 -t 2 -p " +
                                    shell_quote("What is the capital of France? Answer in one sentence.") +
                                    " < /dev/null");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out.rfind("What is the capital of France? Answer in one sentence.\n", 0), 0u) << o.out;
    EXPECT_NE(o.err.find("gemma3"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("no chat template (a base model?)"), std::string::npos) << o.err;
}

// With the `plain` transcript template (User: / Assistant:), which a base
// model continues naturally, it answers; `--chat-template plain` also stops
// generation at the next "\nUser" turn. Two turns through one KV cache.
TEST(Gemma3Cli, PlainTemplateChatAnswers) {
    const std::string file = temp_path("gemma-chat-input.txt").string();
    std::ofstream(file) << "What is the capital of France?\nWhat is 2 + 2?\n";
    const CliOutput o = run_lantern("run " + gemma3_arg() + " --chat --chat-template plain --temp 0 -n 32 -t 2 < " +
                                    shell_quote(file));
    std::remove(file.c_str());
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out, "The capital of France is Paris.\n2 + 2 = 4.\n");
}

TEST(Gemma3Cli, CompletionGolden) {
    const CliOutput o = run_lantern("run " + gemma3_arg() + " --temp 0 -n 12 -t 2 -p " +
                                    shell_quote("Once upon a time, there was a little girl who") + " < /dev/null");
    ASSERT_EQ(o.exit_code, 0) << o.err;
    EXPECT_EQ(o.out, "Once upon a time, there was a little girl who loved to play with her dolls. She loved to play "
                     "with\n");
}

}  // namespace
}  // namespace lantern::test
