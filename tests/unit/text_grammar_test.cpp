// GBNF grammars: the compiler's errors, what GrammarState matches (against
// std::regex on regular grammars, exhaustively over short texts), random walks
// that never dead-end, and the token constraint's draws.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "lantern/error.h"
#include "sampling/grammar.h"
#include "sampling/grammar_constraint.h"
#include "sampling/sampler.h"

namespace lantern {
namespace {

struct Fed {
    bool accepted;  // every byte was taken
    bool complete;  // and the text matches whole
};

Fed feed(const std::shared_ptr<const Grammar>& g, const std::string& text) {
    GrammarState s(g);
    for (const char c : text) {
        if (!s.feed(static_cast<unsigned char>(c))) return {false, false};
    }
    return {true, s.complete()};
}

bool matches(const std::string& grammar, const std::string& text) { return feed(Grammar::parse(grammar), text).complete; }

std::string error_of(const std::string& grammar) {
    try {
        Grammar::parse(grammar);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
        return e.what();
    }
    return "";
}

TEST(Grammar, ErrorsNameWhatAndWhere) {
    EXPECT_EQ(error_of("root ::= \"a\"\nfoo = \"b\""), "grammar: line 2, column 5: expected '::='");
    EXPECT_EQ(error_of("root ::= \"abc"), "grammar: line 1, column 10: unterminated literal");
    EXPECT_EQ(error_of("root ::= [a-z"), "grammar: line 1, column 10: unterminated character class");
    EXPECT_EQ(error_of("root ::= x\n"), "grammar: line 1, column 10: rule 'x' is used but not defined");
    EXPECT_EQ(error_of("answer ::= \"yes\""), "grammar: no 'root' rule");
    EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "grammar: line 2, column 1: rule 'root' is defined twice");
    EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar: line 1, column 11: unknown escape '\\q'");
    EXPECT_EQ(error_of("root ::= \"a\"{3,2}"), "grammar: line 1, column 13: a repetition's most is below its least");
    EXPECT_EQ(error_of("root ::= \"a\"{5000}"), "grammar: line 1, column 14: a repetition count over 1000");
    EXPECT_EQ(error_of("root ::= ( \"a\" "), "grammar: line 1, column 16: expected ')'");
    EXPECT_EQ(error_of("root ::= [z-a]"), "grammar: line 1, column 10: a range's end comes before its start");
    EXPECT_EQ(error_of("root ::= \"a\" ) \"b\""), "grammar: line 1, column 14: unexpected ')'");
    EXPECT_EQ(error_of("root ::= \"\\u12\""), "grammar: line 1, column 11: expected 4 hex digits");
    EXPECT_EQ(error_of("root ::= \"\\uD800\""), "grammar: line 1, column 11: not a character");
    // Left recursion, direct, through another rule, and a repetition of what
    // can be empty: a parse stack would expand them for ever.
    EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("rule 'root' can reach itself"), std::string::npos);
    EXPECT_NE(error_of("root ::= x\nx ::= \"y\"? root").find("can reach itself"), std::string::npos);
    EXPECT_NE(error_of("root ::= (\"a\"?)*").find("rule 'root' can reach itself"), std::string::npos);
    // Right recursion and recursion after a character are fine.
    EXPECT_EQ(error_of("root ::= \"(\" root \")\" | \"\""), "");
    EXPECT_EQ(error_of("root ::= \"a\" root | \"a\""), "");
}

// What a request could send to exhaust the server: deep groups, repetitions
// of repetitions, long chains of rules.
TEST(Grammar, LimitsHold) {
    EXPECT_EQ(error_of("root ::= " + std::string(65, '(') + "\"a\"" + std::string(65, ')')),
              "grammar: line 1, column 74: groups nested deeper than 64");
    EXPECT_EQ(error_of("root ::= " + std::string(64, '(') + "\"a\"" + std::string(64, ')')), "");
    // References are not expanded: this is a few thousand elements.
    EXPECT_EQ(error_of("root ::= x{1000}\nx ::= y{1000} y{1000}\ny ::= \"ab\"{1000}"), "");
    EXPECT_NE(error_of("root ::= \"" + std::string(1100, 'a') + "\"{1000}").find("more than 1048576 elements"),
              std::string::npos);
    // Repeated groups are helper rules, so this stays small.
    EXPECT_EQ(error_of("root ::= ((\"ab\"{1000}){1000}){1000}"), "");
    // A chain of 20,000 rules, each the next: neither the checks nor the
    // stacks' expansion recurse on it.
    std::string chain = "root ::= r0\n";
    for (int i = 0; i < 20000; ++i) {
        chain.append("r").append(std::to_string(i)).append(" ::= r").append(std::to_string(i + 1));
        chain.append(" | \"").append(std::to_string(i % 10)).append("\"\n");
    }
    chain += "r20000 ::= \"!\"\n";
    EXPECT_TRUE(matches(chain, "!"));
    EXPECT_TRUE(matches(chain, "7"));
    EXPECT_FALSE(matches(chain, "77"));
    // Paths through optional parts meet again: expanded once, not 2^200 times.
    const std::string paths = "root ::= x{200} \"!\"\nx ::= y | y\ny ::= \"a\" | \"\"";
    EXPECT_TRUE(matches(paths, "aaa!"));
    EXPECT_TRUE(matches(paths, std::string(200, 'a') + "!"));
    EXPECT_FALSE(matches(paths, std::string(201, 'a') + "!"));
    // Bounded repetitions of what may be empty, nested: a quarter of a million
    // ways to begin (found by fuzz/grammar, which timed out on it). Refused
    // at once, at the start or at the character that leads there.
    const std::string wide = "(\"a\"? (\"a\"? \"b\"*){500} \"b\"*){500}";
    try {
        GrammarState s(Grammar::parse("root ::= " + wide));
        ADD_FAILURE() << "a start past the bounds was taken";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
        EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
    }
    GrammarState later(Grammar::parse("root ::= \"x\" w | \"y\"\nw ::= " + wide));
    EXPECT_FALSE(later.feed('x'));
    EXPECT_TRUE(later.feed('y'));
    EXPECT_TRUE(later.complete());
}

// Mangled grammars parse or are refused, and what parses takes any bytes
// without failing (run under the sanitizers in CI's ASan job, if any).
TEST(Grammar, MangledGrammarsNeverCrash) {
    const std::vector<std::string> seeds = {
        "root ::= (\"a\" | [b-d]+ x){2,3} \"!\"?\nx ::= [^\\n]* # c\n",
        "root ::= \"\\x41\\u00e9\" . (y | \"\")*\ny ::= \"(\" root \")\"\n",
    };
    std::mt19937 rng(9);
    const std::string junk = "()[]{}|*+?.:=\"\\#-^,0123456789 \nabxyz\xC3\xA9\xFF";
    int parsed = 0;
    for (int i = 0; i < 3000; ++i) {
        std::string g = seeds[static_cast<size_t>(i) % seeds.size()];
        for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
            const size_t at = rng() % (g.size() + 1);
            switch (rng() % 3) {
                case 0: g.insert(at, 1, junk[rng() % junk.size()]); break;
                case 1: if (at < g.size()) g.erase(at, 1); break;
                default: if (at < g.size()) g[at] = junk[rng() % junk.size()]; break;
            }
        }
        std::shared_ptr<const Grammar> grammar;
        try {
            grammar = Grammar::parse(g);
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
            continue;
        }
        ++parsed;
        GrammarState s(grammar);
        for (int k = 0; k < 40; ++k) {
            const auto b = static_cast<unsigned char>(junk[rng() % junk.size()]);
            EXPECT_EQ(s.takes(b), GrammarState(s).feed(b));  // these grammars stay within the bounds
            s.feed(b);
        }
    }
    EXPECT_GT(parsed, 100);
}

TEST(Grammar, Syntax) {
    // Comments, rules over several lines (inside parentheses, after ::= and
    // |), rules used before they are defined, CRLF line ends.
    const std::string g =
        "# a greeting\r\n"
        "root ::=\r\n"
        "   greeting (\r\n"
        "     \", \" name   # who\r\n"
        "   )? \"!\"\r\n"
        "greeting ::= \"hello\" |\r\n"
        "   \"hi\"\r\n"
        "name ::= [A-Z] [a-z]*\r\n";
    EXPECT_TRUE(matches(g, "hello!"));
    EXPECT_TRUE(matches(g, "hi, Ada!"));
    EXPECT_FALSE(matches(g, "hi, ada!"));
    EXPECT_FALSE(matches(g, "hi, Ada"));
    EXPECT_TRUE(feed(Grammar::parse(g), "hi, Ad").accepted);
    EXPECT_FALSE(feed(Grammar::parse(g), "hey").accepted);
    // Escapes in literals and classes; '.' is any character.
    EXPECT_TRUE(matches(R"(root ::= "\x41\t\u00e9\n\"\\")", "A\t\xC3\xA9\n\"\\"));
    EXPECT_TRUE(matches(R"(root ::= [\]\-\\]+)", "]-\\]"));
    EXPECT_TRUE(matches(R"(root ::= [^"\\]* .)", "caf\xC3\xA9 \xF0\x9F\x99\x82?"));
    EXPECT_FALSE(matches(R"(root ::= [^"\\]*)", "a\"b"));
    // A '-' at a class's end is itself.
    EXPECT_TRUE(matches("root ::= [a-]+", "a-a"));
    // Repetitions.
    EXPECT_TRUE(matches("root ::= \"ab\"{2} \"c\"{1,} \"d\"{0,2}", "ababcccdd"));
    EXPECT_FALSE(matches("root ::= \"ab\"{2} \"c\"{1,} \"d\"{0,2}", "ababccddd"));
    EXPECT_FALSE(matches("root ::= \"ab\"{2} \"c\"{1,}", "ab c"));
    EXPECT_TRUE(matches("root ::= \"x\"{ 2 , 3 }", "xxx"));
    EXPECT_TRUE(matches("root ::= \"\"", ""));
    EXPECT_TRUE(matches("root ::= ", ""));
    EXPECT_FALSE(matches("root ::= ", "a"));
    // UTF-8 in literals and class ranges.
    EXPECT_TRUE(matches("root ::= \"\xC3\xA9t\xC3\xA9\" [\xCE\xB1-\xCF\x89]+", "\xC3\xA9t\xC3\xA9\xCE\xB2\xCE\xB3"));
}

TEST(Grammar, BytesAreDecodedAsUtf8) {
    const auto g = Grammar::parse("root ::= [\xCE\xB1-\xCF\x89]");  // Greek small letters
    GrammarState s(g);
    EXPECT_FALSE(s.takes(0xC3));  // é's lead byte: nothing in range begins so
    EXPECT_TRUE(s.takes(0xCE));
    ASSERT_TRUE(s.feed(0xCE));
    EXPECT_FALSE(s.complete());
    EXPECT_FALSE(s.takes(0x80));  // U+0380: below alpha
    EXPECT_TRUE(s.takes(0xB2));
    ASSERT_TRUE(s.feed(0xB2));
    EXPECT_TRUE(s.complete());
    // Invalid UTF-8 is never taken, even by '.'.
    GrammarState any(Grammar::parse("root ::= .*"));
    EXPECT_FALSE(any.takes(0xFF));
    EXPECT_FALSE(any.takes(0xC0));  // overlong
    EXPECT_FALSE(any.takes(0x80));  // a continuation with no lead
    ASSERT_TRUE(any.feed(0xED));
    EXPECT_FALSE(any.takes(0xA0));  // U+D800..: surrogates
    EXPECT_TRUE(any.takes(0x9F));
    ASSERT_TRUE(any.feed(std::string("\x9F\xBF")));
    EXPECT_TRUE(any.complete());
}

TEST(Grammar, LongRepetitionsKeepStacksShort) {
    // Right recursion leaves nothing on the stack, so 20,000 characters cost
    // no more per character than the first.
    const auto g = Grammar::parse("root ::= (\"a\" | \"b\")* \"!\"");
    GrammarState s(g);
    for (int i = 0; i < 20000; ++i) ASSERT_TRUE(s.feed(static_cast<unsigned char>(i % 3 ? 'a' : 'b')));
    EXPECT_FALSE(s.complete());
    ASSERT_TRUE(s.feed('!'));
    EXPECT_TRUE(s.complete());
    EXPECT_FALSE(s.can_continue());
    // Nesting is what the stack is for.
    const auto nest = Grammar::parse("root ::= \"(\" root \")\" | \"\"");
    EXPECT_TRUE(feed(nest, std::string(500, '(') + std::string(500, ')')).complete);
    EXPECT_FALSE(feed(nest, std::string(500, '(') + std::string(499, ')')).complete);
    EXPECT_FALSE(feed(nest, "())").accepted);
    // An ambiguous grammar: equal stacks merge.
    EXPECT_TRUE(feed(Grammar::parse("root ::= (\"a\" | \"a\" \"a\" | \"aaa\")*"), std::string(3000, 'a')).complete);
}

// Regular grammars against std::regex: every text over a small alphabet up
// to five characters, matched or not alike, and a text refused at a byte
// matches nothing that continues it.
TEST(Grammar, AgreesWithRegexOnEveryShortText) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"root ::= [a-b]{1,3} (\"x\" | \"yz\")* \"!\"?", "[a-b]{1,3}(x|yz)*!?"},
        {"root ::= (\"a\" [^a]?)+ | \"z\"{2,}", "(a[^a]?)+|z{2,}"},
        {"root ::= x \"!\" x\nx ::= ([ab] \"y\"?)*", "([ab]y?)*!([ab]y?)*"},
        {"root ::= . . | \"\"", "..|"},
    };
    const std::string alphabet = "abxyz!";
    for (const auto& [gbnf, re] : cases) {
        const auto g = Grammar::parse(gbnf);
        const std::regex r(re);
        std::vector<std::string> texts = {""};
        for (size_t begin = 0, len = 0; len < 5; ++len) {
            const size_t end = texts.size();
            for (size_t i = begin; i < end; ++i) {
                for (const char c : alphabet) texts.push_back(texts[i] + c);
            }
            begin = end;
        }
        int matched = 0;
        for (const std::string& t : texts) {
            const Fed f = feed(g, t);
            ASSERT_EQ(f.complete, std::regex_match(t, r)) << gbnf << " on '" << t << "'";
            matched += f.complete;
        }
        EXPECT_GT(matched, 10) << gbnf;
    }
}

TEST(Grammar, RandomWalksNeverDeadEnd) {
    // A JSON grammar written from RFC 8259 (whitespace capped).
    const std::string json =
        "root   ::= object\n"
        "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\")\n"
        "object ::= \"{\" ws ( string ws \":\" ws value ws (\",\" ws string ws \":\" ws value ws)* )? \"}\"\n"
        "array  ::= \"[\" ws ( value ws (\",\" ws value ws)* )? \"]\"\n"
        "string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\"\n"
        "number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?\n"
        "ws     ::= [ \\t\\n]{0,3}\n";
    const auto g = Grammar::parse(json);
    std::string alphabet = "\n\t";
    for (char b = 0x20; b < 0x7f; ++b) alphabet += b;
    std::mt19937 rng(5);
    int closed = 0;
    for (int walk = 0; walk < 200; ++walk) {
        GrammarState s(g);
        std::string text;
        while (text.size() < 120 && !(s.complete() && (rng() % 2 == 0 || !s.can_continue()))) {
            std::string next;
            for (const char b : alphabet) {
                if (s.takes(static_cast<unsigned char>(b))) next += b;
            }
            ASSERT_FALSE(next.empty()) << "dead end after: " << text;
            const char b = next[rng() % next.size()];
            ASSERT_TRUE(s.feed(static_cast<unsigned char>(b)));
            text += b;
        }
        if (!s.complete()) continue;
        ++closed;
        EXPECT_EQ(text.front(), '{');
        EXPECT_EQ(text.back(), '}');
    }
    EXPECT_GT(closed, 20);
    EXPECT_TRUE(feed(g, R"({"a": [1, -2.5e3, "x\u00e9\n", {}], "b": null})").complete);
    EXPECT_FALSE(feed(g, R"({"a": 01})").accepted);
}

// A toy vocabulary; the last token ends generation.
const std::vector<std::string> kPieces = {"yes", "no", "ye", "s", " ", "maybe", "", "\xC3", "\xA9", "<eos>"};

GrammarConstraint toy(const std::string& grammar) {
    std::vector<bool> eog(kPieces.size(), false);
    eog.back() = true;
    std::vector<std::string> pieces = kPieces;
    pieces.back() = "";
    return GrammarConstraint(pieces, eog, Grammar::parse(grammar));
}

TEST(GrammarConstraint, GreedyDrawsFollowTheGrammarAndEndOnlyWhenComplete) {
    SamplerParams p;
    p.temperature = 0.0f;
    TokenSampler greedy(p, static_cast<int32_t>(kPieces.size()));
    // The logits prefer "maybe", the empty piece and the end token, then
    // "ye", which only "s" may follow.
    const std::vector<float> logits = {1.0f, 2.0f, 5.0f, 0.5f, 0.1f, 9.0f, 8.0f, 0.2f, 0.3f, 7.0f};
    GrammarConstraint c = toy("root ::= (\"yes\" | \"no\") (\" \" (\"yes\" | \"no\"))?");
    std::string text;
    int32_t t = -1;
    for (int step = 0; step < 10 && t != 9; ++step) {
        t = c.sample(greedy, logits.data());
        if (t != 9) text += kPieces[static_cast<size_t>(t)];
    }
    EXPECT_EQ(t, 9);
    EXPECT_EQ(text, "yes");  // complete, and the end token outranks " "
    // When nothing can follow, only the end token is left.
    GrammarConstraint one = toy("root ::= \"no\"");
    EXPECT_EQ(one.sample(greedy, logits.data()), 1);
    EXPECT_FALSE(one.allows(4));
    EXPECT_EQ(one.sample(greedy, logits.data()), 9);
    // A character split across tokens: its first byte alone is allowed.
    GrammarConstraint e = toy("root ::= \"\xC3\xA9\"");
    EXPECT_TRUE(e.allows(7));
    EXPECT_FALSE(e.allows(8));
    EXPECT_FALSE(e.allows(9));
    e.advance(7);
    EXPECT_TRUE(e.allows(8));
    EXPECT_FALSE(e.allows(9));
    e.advance(8);
    EXPECT_TRUE(e.allows(9));
    e.reset();
    EXPECT_FALSE(e.allows(8));
}

TEST(GrammarConstraint, SampledTextsMatch) {
    SamplerParams q;
    q.temperature = 1.5f;
    q.top_k = 0;
    q.top_p = 1.0f;
    q.min_p = 0.0f;
    q.seed = 11;
    TokenSampler hot(q, static_cast<int32_t>(kPieces.size()));
    const std::vector<float> flat(kPieces.size(), 0.0f);
    const std::string grammar = "root ::= (\"yes\" | \"no\") (\" \" (\"yes\" | \"no\" | \"\xC3\xA9\"))*";
    const auto g = Grammar::parse(grammar);
    int ended = 0;
    for (int run = 0; run < 50; ++run) {
        GrammarConstraint r = toy(grammar);
        std::string out;
        bool end = false;
        for (int step = 0; step < 30 && !end; ++step) {
            const int32_t k = r.sample(hot, flat.data());
            end = k == 9;
            if (!end) out += kPieces[static_cast<size_t>(k)];
        }
        if (!end) continue;
        ++ended;
        EXPECT_TRUE(feed(g, out).complete) << out;
    }
    EXPECT_GT(ended, 10);
}

}  // namespace
}  // namespace lantern
