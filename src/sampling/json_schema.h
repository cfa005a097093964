// JSON schemas for constrained sampling (OpenAI's response_format
// json_schema, a forced tool call's arguments): JsonSchema compiles the
// subset of JSON Schema that OpenAI's structured outputs take and some more
// (what pydantic writes for dicts and tuples, patterns, formats), and
// SchemaState checks text against it byte by byte, as JsonState does for
// any JSON object.
//
// The subset:
//   type         object, array, string, number, integer, boolean, null, or a list of them
//   properties   with required; each listed property at most once, in any order
//   additionalProperties   the values of keys not listed: false (implied
//                beside properties), true, or a schema (pydantic's dict[str, X]);
//                an object schema without properties takes any keys, its values
//                any unless additionalProperties says
//   minProperties, maxProperties   keys of an object
//   items        an array's elements (absent: any values; false: none past
//                prefixItems)
//   prefixItems  the first elements' schemas, one each (pydantic's tuples)
//   allOf        of one schema (that schema)
//   enum, const  strings, numbers, booleans, null (written exactly as listed)
//   anyOf        any branches: the text is read against every branch that
//                still fits it (two object models of a pydantic union, say)
//   $ref         "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), as
//                pydantic writes nested models
//   minLength, maxLength   of strings (in characters; an escape is one)
//   minItems, maxItems     of arrays
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum   of numbers and
//                integers (such numbers are written without an exponent)
//   multipleOf   a decimal p / 10^d, p up to 10^9 and d up to 9 (0.01, 0.25, 5,
//                1e-3, 10^9): such numbers are written without an
//                exponent, with at most that many digits after the point and at
//                most 18 digits in all
//   format       of strings: date, time, date-time (RFC 3339: a time has its
//                offset, Z or +hh:mm), uuid; email, hostname, ipv4, ipv6, uri,
//                duration (as patterns: subsets, json_schema.cpp's format_as_pattern)
//   pattern      of strings: a regular expression (json_pattern.h says which);
//                the text of such a string writes its characters as they are
//                (escapes but \uXXXX: a model has no need of them there)
// Annotations (title, description, default, examples, $schema, $id, strict)
// and uniqueItems: false are ignored. Any other keyword (patternProperties,
// uniqueItems: true, if/then, ...) is refused, since it would not be
// enforced: a promise the sampler does not keep.
// At most 64 properties per object and 64 values per enum; numbers of at
// most 25 characters; nothing, not even spaces, after the value. At most
// kMaxPaths anyOf branches of one type, followed side by side while they
// fit the text; identical readings merge, and past kMaxPaths readings at
// once (unions nested in unions) the later ones are dropped: the text
// stays valid, but may no longer take some branch.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sampling/json_pattern.h"

namespace lantern {

class JsonSchema {
public:
    // Throws Error(InvalidArgument) naming the path and keyword it cannot take.
    static std::shared_ptr<const JsonSchema> parse(std::string_view json_text);

    enum Type : uint8_t {
        kObject = 1,
        kArray = 2,
        kString = 4,
        kNumber = 8,   // integers included
        kInteger = 16,
        kBool = 32,
        kNull = 64,
        kAnyType = 127,
    };
    struct Node {
        uint8_t types = kAnyType;
        // Objects: quoted keys ("\"name\"", as they are written) and their
        // nodes (`free`: no properties keyword); `extra`: the node of the
        // values of other keys, -1 if no other key may appear.
        bool free = true;
        std::vector<std::string> keys;
        std::vector<int> key_nodes;
        int extra = 0;
        uint64_t required = 0;
        uint32_t min_props = 0, max_props = UINT32_MAX;
        int items = 0;            // arrays: the elements' node (0: any value)
        std::vector<int> prefix;  // arrays: the first elements' nodes (prefixItems)
        uint32_t min_items = 0, max_items = UINT32_MAX;
        uint32_t min_length = 0, max_length = UINT32_MAX;  // strings, in characters
        enum class Format : uint8_t { None, Date, Time, DateTime, Uuid };
        Format format = Format::None;  // strings
        int pattern = -1;              // strings: JsonSchema::pattern(i); -1: none
        // Numbers: the range (open ends exclusive); bounded: either is set.
        // multiple: multipleOf as multiple / 10^multiple_scale (0: none);
        // such numbers have at most multiple_scale digits after the point,
        // 18 digits in all.
        bool bounded = false;
        uint32_t multiple = 0;
        uint8_t multiple_scale = 0;
        double min = -HUGE_VAL, max = HUGE_VAL;
        bool min_open = false, max_open = false;
        // enum/const: each allowed value as written (compact JSON); empty: none.
        std::vector<std::string> values;
        // anyOf: for each kind of first byte ({, [, ", number, true/false,
        // null), the branches that may start with it (nested anyOfs flattened).
        bool any_of = false;
        std::vector<int> branches[6];
    };
    const Node& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
    const JsonPattern& pattern(int i) const { return patterns_[static_cast<size_t>(i)]; }
    int root() const { return root_; }

private:
    friend class SchemaCompiler;
    std::vector<Node> nodes_;  // nodes_[0]: any value
    std::vector<JsonPattern> patterns_;
    int root_ = 0;
};

class SchemaState {
public:
    static constexpr int kMaxDepth = 32;
    // Whitespace bytes in a row between tokens: a newline and indentation
    // to depth 9 at two spaces (a small model may otherwise pad for long).
    static constexpr int kMaxSpaces = 20;
    static constexpr int kMaxNumber = 24;  // bytes of a number after its first
    // Digits of an integer: 18 fit an int64 wherever the reply is parsed
    // (a longer one becomes a double in most JSON parsers, nlohmann's too).
    static constexpr int kMaxIntegerDigits = 18;
    static constexpr int kMaxPaths = 16;   // readings of the text at once (anyOf branches of one type)

    explicit SchemaState(std::shared_ptr<const JsonSchema> schema);

    // Consumes one byte; false (and the state unchanged) if the text would
    // no longer be a prefix of a value the schema allows.
    bool feed(unsigned char c);
    bool feed(const std::string& text);  // all or nothing
    // The text is a whole value (a top-level number may end here too).
    bool complete() const;

private:
    enum class Kind : uint8_t { Object, Array, String, Number, Literal, Match };
    struct Frame {
        Kind kind;
        uint8_t phase;       // what comes next (per kind); a key's Match: 1 if a key not listed may
                             // still be written (other keys' values are additionalProperties')
        bool is_key;         // String/Match: an object's key
        bool integer;        // Number: no fraction or exponent
        int16_t node;        // Object/Array/Match: the schema node
        int16_t key;         // Object: the key whose value is read
        uint16_t pos;        // Match: bytes matched; Literal: bytes of the literal matched; Number: bytes;
                             // String of a format: where in its shape (format_byte); of a
                             // pattern: continuation bytes due
        bool negative;       // Number: after '-'
        uint32_t count;      // String: characters; Array: elements; Object: keys begun; Number:
                             // fraction digits in `set`
        uint64_t set;        // Object: keys seen; Match: candidates still matching; Number: its digits
                             // (at most 19; key: integer digits past them); String of a
                             // pattern: the pattern's states (pattern_char)
        const char* literal; // Literal: "true", "false" or "null"
        bool operator==(const Frame&) const = default;
    };
    // One reading of the text: the open values, innermost last. A byte
    // that starts a value of an anyOf with several branches of its kind
    // continues this path in the first and adds a copy per other branch to
    // `forks` (a value's start is always the last thing a byte does).
    struct Path {
        const JsonSchema* schema;
        Frame frames[kMaxDepth];
        int depth = 0;
        bool done = false;    // the top-level value is complete
        uint8_t spaces = 0;   // whitespace bytes in a row

        bool step(unsigned char c, std::vector<Path>& forks);
        bool complete() const;
        bool same_as(const Path& o) const;

    private:
        bool start_value(int node, unsigned char c, std::vector<Path>& forks);
        bool start_leaf(int node, int kind, unsigned char c);
        bool end_value();
        bool push(const Frame& f);
        bool between(Frame* top, unsigned char c, std::vector<Path>& forks);
        bool start_key(Frame* top, unsigned char c, std::vector<Path>& forks);
        bool key_not_listed(const Frame& f, unsigned char c, std::vector<Path>& forks);
        bool match_byte(Frame& f, unsigned char c, std::vector<Path>& forks);
        bool number_may_go_on(const Frame& f) const;
        bool number_in_range(const Frame& f) const;
        bool number_may_end(const Frame& f) const;
        bool number_checks(const Frame& f) const;
        bool format_byte(Frame& f, JsonSchema::Node::Format format, unsigned char c) const;
        bool pattern_char(Frame& f, uint32_t c) const;
        const std::vector<std::string>& match_texts(const Frame& f) const;
    };
    bool feed_byte(unsigned char c);

    std::shared_ptr<const JsonSchema> schema_;
    std::vector<Path> paths_;  // at least one
};

}  // namespace lantern
