// JSON schemas (response_format, a tool's parameters) and the text checked
// against them. Input: "schema\0text". A schema is either compiled or refused
// with an Error; a compiled one takes any bytes; plain JSON mode too.
#include <memory>

#include "fuzz_input.h"
#include "lantern/error.h"
#include "sampling/json_constraint.h"
#include "sampling/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto in = lantern::fuzz::parts(data, size, 2);
    lantern::JsonState plain;
    for (const char c : in[1])
        if (!plain.feed(static_cast<unsigned char>(c))) break;
    (void)plain.complete();

    std::shared_ptr<const lantern::JsonSchema> schema;
    try {
        schema = lantern::JsonSchema::parse(in[0]);
    } catch (const lantern::Error&) {
        return 0;
    }
    lantern::SchemaState state(schema);
    for (const char c : in[1])
        if (!state.feed(static_cast<unsigned char>(c))) break;
    (void)state.complete();
    return 0;
}
