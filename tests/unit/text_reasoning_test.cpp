// Reasoning models' <think> blocks (chat/reasoning.h): a whole reply split
// into reasoning and answer, the prompt that opens a block, and the same
// split made as the reply is generated, piece by piece, however it is cut.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat/reasoning.h"
#include "chat/tool_calls.h"
#include "lantern/error.h"

namespace lantern {
namespace {

using Split = std::pair<std::string, std::string>;

TEST(Reasoning, SplitsAWholeReply) {
    EXPECT_EQ(split_reasoning("<think>\nThe user asks. Paris.\n</think>\n\nParis.", false),
              Split("The user asks. Paris.", "Paris."));
    EXPECT_EQ(split_reasoning("  <think></think>Hi", false), Split("", "Hi"));
    // No block: the reply as it is; a block later in the reply is answer too.
    EXPECT_EQ(split_reasoning(" Paris.\n", false), Split("", " Paris.\n"));
    EXPECT_EQ(split_reasoning("Hi <think>x</think>", false), Split("", "Hi <think>x</think>"));
    // Cut short inside the block: all reasoning.
    EXPECT_EQ(split_reasoning("<think>\nLet me see", false), Split("Let me see", ""));
    // The prompt opened the block (DeepSeek-R1): the reply starts inside it.
    EXPECT_EQ(split_reasoning("Hmm.\n</think>\n\nYes.", true), Split("Hmm.", "Yes."));
    EXPECT_EQ(split_reasoning("No tag at all", true), Split("No tag at all", ""));
    // Only the first closing tag ends the block.
    EXPECT_EQ(split_reasoning("<think>a</think>b</think>", false), Split("a", "b</think>"));
}

TEST(Reasoning, PromptsThatOpenABlock) {
    EXPECT_TRUE(prompt_opens_reasoning("<|Assistant|><think>\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));  // Qwen3, thinking off
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

// The reply fed in pieces cut at random (and byte by byte): the parts add
// up to split_reasoning's, and nothing is given out that is later taken back
// (reasoning never holds a tag; the answer never starts with a space).
TEST(Reasoning, StreamAddsUpToTheSplit) {
    const std::vector<std::pair<std::string, bool>> replies = {
        {"<think>\nThe user asks. Paris.\n</think>\n\nParis.", false},
        {"  <think>  a  b \n</think>  c d ", false},
        {" Paris.\n", false},
        {"<thi", false},
        {"   ", false},
        {"<think>\nunfinished </thin", false},
        {"<think>x</think", false},
        {"Hmm </ then.\n</think>\n\nYes.", true},
        {"<think>a</think>b</think>", false},
        {"<thinker>not a block", false},
        {"", true},
    };
    std::mt19937 rng(7);
    for (const auto& [reply, opened] : replies) {
        const Split want = split_reasoning(reply, opened);
        for (int trial = 0; trial < 40; ++trial) {
            ReasoningStream s(opened);
            std::string reasoning, answer;
            size_t at = 0;
            while (at < reply.size()) {
                const size_t n = trial == 0 ? 1 : 1 + rng() % 6;
                const ReasoningStream::Parts p = s.feed(std::string_view(reply).substr(at, n));
                EXPECT_FALSE(p.reasoning.find("</think>") != std::string::npos) << reply;
                reasoning += p.reasoning;
                answer += p.answer;
                at += n;
            }
            const ReasoningStream::Parts p = s.finish();
            reasoning += p.reasoning;
            answer += p.answer;
            EXPECT_EQ(Split(reasoning, answer), want) << "reply: " << reply << ", trial " << trial;
        }
    }
}

// An assistant turn's reasoning reaches the template as reasoning_content,
// and chat_template_kwargs are checked and parsed.
TEST(Reasoning, RequestsCarryReasoningAndTemplateVariables) {
    const ChatRequest r = parse_chat_request(R"({"messages": [{"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello", "reasoning_content": "Greet back."}],
        "chat_template_kwargs": {"enable_thinking": false}})");
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[1].reasoning_content, "Greet back.");
    EXPECT_EQ(r.template_kwargs, R"({"enable_thinking":false})");
    EXPECT_EQ(template_message(r.messages[1], true)["reasoning_content"], "Greet back.");
    EXPECT_FALSE(template_message(r.messages[0], true).contains("reasoning_content"));
    for (const char* bad : {R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": [1]})",
                            R"({"messages": [{"role": "assistant", "content": "x", "reasoning_content": 5}]})"}) {
        EXPECT_THROW(parse_chat_request(bad), Error) << bad;
    }
    // The variables reach the template.
    const ChatTemplate t = ChatTemplate::from_string(
        "{% for m in messages %}{{ m.content }}{% endfor %}"
        "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% else %}<think>{% endif %}",
        "", "");
    nlohmann::ordered_json extra = nlohmann::ordered_json::parse(r.template_kwargs);
    EXPECT_EQ(render_with_tools(t, r.messages, ChatTools{}, true, extra).text, "HiHello<think></think>");
    EXPECT_EQ(render_with_tools(t, r.messages, ChatTools{}, true).text, "HiHello<think>");
}

}  // namespace
}  // namespace lantern
