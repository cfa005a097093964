// GBNF grammars (a request's "grammar", --grammar-file) and the text checked
// against them. Input: "grammar\0text". Any grammar text is either compiled
// or refused with an Error, as is a start too ambiguous to track; the rest
// takes any bytes without failing.
#include <memory>

#include "fuzz_input.h"
#include "lantern/error.h"
#include "sampling/grammar.h"
#include "sampling/grammar_constraint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = lantern::fuzz::parts(data, size, 2);
    std::shared_ptr<const lantern::Grammar> grammar;
    try {
        grammar = lantern::Grammar::parse(in[0]);
    } catch (const lantern::Error&) {
        return 0;
    }
    try {
        lantern::GrammarState state(grammar);
        for (const char c : in[1]) {
            const bool takes = state.takes(static_cast<unsigned char>(c));
            const bool fed = state.feed(static_cast<unsigned char>(c));
            if (fed && !takes) __builtin_trap();  // takes() false means feed() refuses
            if (!fed) break;
        }
        (void)state.complete();
        (void)state.can_continue();
    } catch (const lantern::Error&) {  // a start too ambiguous to track
    }
    return 0;
}
