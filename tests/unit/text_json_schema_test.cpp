// JSON schemas for constrained sampling (sampling/json_schema.h): documents a
// schema allows and the byte each forbidden one is stopped at, the keywords it
// refuses, and the JSON constraint following a schema on a toy vocabulary
// whose logits prefer what the schema forbids.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lantern/error.h"
#include "sampling/json_constraint.h"
#include "sampling/json_schema.h"

namespace lantern {
namespace {

const char* kPerson = R"({"type": "object", "title": "a person",
  "properties": {"name": {"type": "string", "description": "full name"}, "age": {"type": "integer"},
                 "tags": {"type": "array", "items": {"type": "string"}}, "role": {"enum": ["admin", "user"]},
                 "score": {"type": ["number", "null"]}, "address": {"type": "object"}},
  "required": ["name", "age"], "additionalProperties": false})";

// Fed byte by byte: whether every byte was taken, and then complete.
std::pair<bool, bool> fed(const char* schema, const std::string& text) {
    SchemaState s(JsonSchema::parse(schema));
    for (char c : text) {
        if (!s.feed(static_cast<unsigned char>(c))) return {false, false};
    }
    return {true, s.complete()};
}

// Bytes of text taken before the first refused one (its length: all).
size_t taken_bytes(const char* schema, const std::string& text) {
    SchemaState s(JsonSchema::parse(schema));
    for (size_t i = 0; i < text.size(); ++i) {
        if (!s.feed(static_cast<unsigned char>(text[i]))) return i;
    }
    return text.size();
}

TEST(JsonSchema, AllowsWhatTheSchemaAllows) {
    for (const char* doc : {R"({"name": "Ada", "age": 36})",
                            R"({"age":36,"name":"Ada","tags":["x", "y"],"role":"admin","score":null})",
                            R"( { "name" : "A\"b\u00e9" , "age" : -3 , "score" : 1.5e3 , "tags" : [ ] })",
                            R"({"name": "Ada", "age": 0, "address": {"city": "Paris", "zip": [7, 5], "ok": true}})",
                            R"({"name": "", "age": 1, "score": -0.25})"}) {
        const auto [taken, complete] = fed(kPerson, doc);
        EXPECT_TRUE(taken) << doc;
        EXPECT_TRUE(complete) << doc;
    }
    // Text in UTF-8, sequences whole (a byte-level token may hold a stray byte).
    EXPECT_EQ(fed(kPerson, "{\"name\": \"\xE2\x82\xAC\", \"age\": 1}"), std::make_pair(true, true));
    EXPECT_FALSE(fed(kPerson, "{\"name\": \"\x82").first);
    EXPECT_FALSE(fed(kPerson, "{\"name\": \"\xE2\x82\"").first);
    // Unfinished but on the way.
    for (const char* prefix : {"", "{", R"({"na)", R"({"name": "Ada", "age": 3)", R"({"name": "Ada", "ro)"}) {
        const auto [taken, complete] = fed(kPerson, prefix);
        EXPECT_TRUE(taken) << prefix;
        EXPECT_FALSE(complete) << prefix;
    }
}

TEST(JsonSchema, StopsWhatTheSchemaForbids) {
    for (const char* doc : {
             R"({"name": "Ada"})",                             // age is required: '}' refused
             R"({"name": 5, "age": 1})",                       // a number where a string must be
             R"({"name": "Ada", "age": 3.5})",                 // an integer
             R"({"name": "Ada", "age": 1, "extra": 1})",       // not a property
             R"({"name": "Ada", "age": 1, "role": "root"})",   // not in the enum
             R"({"name": "a", "name": "b", "age": 1})",        // a key twice
             R"({"name": "Ada", "age": 1, "tags": [1]})",      // items are strings
             R"({"name": "Ada", "age": 1, "score": true})",    // number or null
             R"([1])",                                         // an object at the top
             R"({"name": "Ada", "age": 1} x)",                 // nothing after it
         }) {
        const auto [taken, complete] = fed(kPerson, doc);
        EXPECT_FALSE(taken && complete) << doc;
        EXPECT_FALSE(taken) << doc;
    }
}

TEST(JsonSchema, EnumsAnyOfAndScalars) {
    const char* numbers = R"({"enum": [1, 10, true, "a"]})";
    EXPECT_EQ(fed(numbers, "1"), std::make_pair(true, true));  // a top-level number may end here
    EXPECT_EQ(fed(numbers, "10"), std::make_pair(true, true));
    EXPECT_EQ(fed(numbers, "\"a\""), std::make_pair(true, true));
    EXPECT_EQ(fed(numbers, "true"), std::make_pair(true, true));
    EXPECT_FALSE(fed(numbers, "2").first);
    EXPECT_FALSE(fed(numbers, "100").first);
    EXPECT_FALSE(fed(numbers, "\"b\"").first);
    const char* either = R"({"anyOf": [{"type": "string"}, {"type": "object", "properties": {"x": {"type": "integer"}}}]})";
    EXPECT_EQ(fed(either, "\"hi\""), std::make_pair(true, true));
    EXPECT_EQ(fed(either, R"({"x": 1})"), std::make_pair(true, true));
    EXPECT_FALSE(fed(either, "5").first);
    EXPECT_FALSE(fed(either, R"({"y": 1})").first);
    EXPECT_EQ(fed(R"({"const": "yes"})", "\"yes\""), std::make_pair(true, true));
    EXPECT_EQ(fed(R"({"type": "array", "items": {"type": "boolean"}})", "[true, false]"), std::make_pair(true, true));
    EXPECT_FALSE(fed(R"({"type": "array", "items": {"type": "boolean"}})", "[null]").first);
    EXPECT_EQ(fed(R"({"type": "integer"})", "-120"), std::make_pair(true, true));
    EXPECT_FALSE(fed(R"({"type": "integer"})", "1.5").first);
    // Numbers are capped (a model may write digits until it runs out), and
    // nothing follows the value, not even spaces.
    EXPECT_TRUE(fed(R"({"type": "number"})", std::string(25, '1')).first);
    EXPECT_FALSE(fed(R"({"type": "number"})", std::string(26, '1')).first);
    // A point only with room for the digit that must follow it.
    EXPECT_EQ(taken_bytes(R"({"type": "number"})", std::string(24, '1') + ".5"), 24u);
    EXPECT_EQ(fed(R"({"type": "number"})", std::string(23, '1') + ".5"), std::make_pair(true, true));
    EXPECT_FALSE(fed(kPerson, R"({"name": "Ada", "age": 1} )").first);
    EXPECT_EQ(fed("true", R"({"any": [1, {"thing": null}]})"), std::make_pair(true, true));  // true: anything
}

// Pydantic's shape: nested models in $defs behind $ref (a tree refers to
// itself), optional fields as anyOf with null; and the length and count
// limits.
TEST(JsonSchema, ReferencesAndLimits) {
    const char* tree = R"({"$defs": {"Node": {"type": "object", "title": "Node",
        "properties": {"label": {"type": "string", "maxLength": 3},
                       "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}, "maxItems": 2},
                       "color": {"anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}], "default": null}},
        "required": ["label"]},
        "Color": {"enum": ["red", "blue"], "type": "string", "title": "Color"}},
      "$ref": "#/$defs/Node"})";
    EXPECT_EQ(fed(tree, R"({"label": "a", "kids": [{"label": "b", "color": "red"}, {"label": "c", "kids": []}]})"),
              std::make_pair(true, true));
    EXPECT_EQ(fed(tree, R"({"label": "\u00e9t\"", "color": null})"), std::make_pair(true, true));  // escapes: one each
    // UTF-16 escapes only as characters: a surrogate pair whole, no low surrogate alone.
    EXPECT_EQ(fed(R"({"type": "string"})", R"("\uD83D\uDE00")"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(R"({"type": "string"})", R"("\uDE00")"), 4u);
    EXPECT_EQ(taken_bytes(R"({"type": "string"})", R"("\uD83D")"), 7u);
    EXPECT_FALSE(fed(tree, R"({"label": "abcd")").first);                           // maxLength 3
    EXPECT_FALSE(fed(tree, R"({"label": "a", "kids": [{"label": "b"}, {"label": "c"}, )").first);  // maxItems 2
    EXPECT_FALSE(fed(tree, R"({"label": "a", "color": "green")").first);
    const char* limits = R"({"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 2})";
    EXPECT_EQ(fed(limits, R"(["ab", "éé"])"), std::make_pair(true, true));  // characters, not bytes
    EXPECT_FALSE(fed(limits, R"(["ab"])").first);                           // minItems 2
    EXPECT_FALSE(fed(limits, R"(["ab", "a"])").first);                      // minLength 2
}

// anyOf branches of one JSON type, as pydantic writes a union of models:
// the text is read against each branch that still fits, so keys of either
// model are taken until one rules the other out, and a value must satisfy
// the branch it ends in.
TEST(JsonSchema, UnionsOfOneType) {
    const char* pets = R"({"$defs": {
        "Cat": {"type": "object", "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer"}},
                "required": ["kind", "lives"], "additionalProperties": false},
        "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
                "required": ["kind"], "additionalProperties": false}},
      "type": "object", "properties": {"pets": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/Cat"},
                                                                                      {"$ref": "#/$defs/Dog"}]}}},
      "required": ["pets"]})";
    EXPECT_EQ(fed(pets, R"({"pets": [{"kind": "cat", "lives": 9}, {"kind": "dog"}, {"kind": "dog", "good": true}]})"),
              std::make_pair(true, true));
    EXPECT_EQ(fed(pets, R"({"pets": [{"lives": 9, "kind": "cat"}]})"), std::make_pair(true, true));  // any key order
    EXPECT_FALSE(fed(pets, R"({"pets": [{"kind": "cat", "good": true)").first);  // a cat has no "good"
    EXPECT_FALSE(fed(pets, R"({"pets": [{"kind": "cat"})").first);               // a cat needs its lives
    EXPECT_FALSE(fed(pets, R"({"pets": [{"kind": "dog", "lives": 1)").first);    // a dog has none
    EXPECT_FALSE(fed(pets, R"({"pets": [{"good": true, "kind": "cat")").first);
    EXPECT_EQ(fed(pets, R"({"pets": [{"kind": "dog"}]})"), std::make_pair(true, true));
    // Integer or number, nested anyOfs flattened, strings with different limits.
    const char* mixed = R"({"anyOf": [{"type": "integer"}, {"anyOf": [{"type": "number"}, {"enum": ["ab", 7]}]},
                                      {"type": "string", "maxLength": 1}]})";
    for (const char* ok : {"12", "-1.5e3", "7", "\"ab\"", "\"x\"", "\"\""}) {
        EXPECT_EQ(fed(mixed, ok), std::make_pair(true, true)) << ok;
    }
    EXPECT_FALSE(fed(mixed, "\"abc").first);  // neither "ab" nor one character
    EXPECT_FALSE(fed(mixed, "\"xy").first);
    EXPECT_FALSE(fed(mixed, "true").first);
    // Up to kMaxPaths branches of one type; more are refused (the checker
    // follows that many readings at once).
    auto objects = [](int n) {
        std::string out = R"({"anyOf": [)";
        for (int i = 0; i < n; ++i) {
            out += (i ? ", " : "") + std::string(R"({"type": "object", "properties": {"k)") + std::to_string(i) +
                   R"(": {"type": "integer"}}, "required": ["k)" + std::to_string(i) + R"("]})";
        }
        return out + "]}";
    };
    const std::string most = objects(SchemaState::kMaxPaths);
    EXPECT_EQ(fed(most.c_str(), R"({"k15": 1})"), std::make_pair(true, true));
    EXPECT_EQ(fed(most.c_str(), R"({"k1": 1})"), std::make_pair(true, true));
    EXPECT_FALSE(fed(most.c_str(), R"({"k1": 1, )").first);  // each branch has one property
    EXPECT_FALSE(fed(most.c_str(), R"({"j)").first);
    EXPECT_THROW(JsonSchema::parse(objects(SchemaState::kMaxPaths + 1)), Error);
}

// Numeric ranges (pydantic's Field(ge=, gt=, le=, lt=)): each byte of a
// bounded number must leave some completion in range, and the number must
// be in range where it ends.
TEST(JsonSchema, NumberRanges) {
    const char* rating = R"({"type": "integer", "minimum": 1, "maximum": 5})";
    for (const char* ok : {"1", "3", "5"}) EXPECT_EQ(fed(rating, ok), std::make_pair(true, true)) << ok;
    for (const char* bad : {"0", "6", "15", "-1", "1.5", "1e0"}) EXPECT_FALSE(fed(rating, bad).first) << bad;
    const char* unit = R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})";
    for (const char* ok : {"0.5", "1", "1.0", "0.001", "0.999"}) EXPECT_EQ(fed(unit, ok), std::make_pair(true, true)) << ok;
    EXPECT_EQ(fed(unit, "0"), std::make_pair(true, false));    // 0.5 may follow; 0 itself is out
    EXPECT_EQ(fed(unit, "0.0"), std::make_pair(true, false));
    for (const char* bad : {"1.5", "2", "-0.5", "1e-1", "0.5e0"}) EXPECT_FALSE(fed(unit, bad).first) << bad;
    const char* negative = R"({"type": "number", "minimum": -2.5, "exclusiveMaximum": -1})";
    for (const char* ok : {"-2.5", "-2", "-1.01"}) EXPECT_EQ(fed(negative, ok), std::make_pair(true, true)) << ok;
    EXPECT_EQ(fed(negative, "-1"), std::make_pair(true, false));  // -1.5 may follow
    for (const char* bad : {"-3", "-2.6", "0", "-1.0 "}) EXPECT_FALSE(fed(negative, bad).first) << bad;
    // Large bounds: digits may follow as long as the range still holds.
    const char* big = R"({"type": "integer", "minimum": 1000, "maximum": 20000})";
    EXPECT_EQ(fed(big, "1"), std::make_pair(true, false));
    EXPECT_EQ(fed(big, "19999"), std::make_pair(true, true));
    EXPECT_FALSE(fed(big, "20001").first);
    EXPECT_EQ(fed(big, "300"), std::make_pair(true, false));  // 3,000 may follow
    EXPECT_EQ(fed(big, "3000"), std::make_pair(true, true));
    EXPECT_FALSE(fed(big, "30000").first);
    // An unbounded integer stops at 18 digits (it must fit an int64 where
    // the reply is parsed); a number may go on.
    const std::string digits18(18, '7');
    EXPECT_EQ(fed(R"({"type": "integer"})", digits18), std::make_pair(true, true));
    EXPECT_EQ(fed(R"({"type": "integer"})", "-" + digits18), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(R"({"type": "integer"})", digits18 + "7"), 18u);
    EXPECT_EQ(taken_bytes(R"({"type": "integer"})", "-" + digits18 + "7"), 19u);
    EXPECT_EQ(fed(R"({"type": "number"})", digits18 + "7"), std::make_pair(true, true));
    EXPECT_EQ(fed(R"({"properties": {"n": {"type": "integer"}}})", "{\"n\": " + digits18 + "}"),
              std::make_pair(true, true));
    // Inside an object, where the byte after the number ends it.
    const char* person = R"({"properties": {"age": {"type": "integer", "minimum": 0, "maximum": 150}}, "required": ["age"]})";
    EXPECT_EQ(fed(person, R"({"age": 42})"), std::make_pair(true, true));
    EXPECT_FALSE(fed(person, R"({"age": 200})").first);
    EXPECT_FALSE(fed(person, R"({"age": -1})").first);
}

// String formats as pydantic writes them for date, time, datetime and UUID
// fields: the shape byte by byte, months, days, hours and minutes in range,
// and a time's fraction and offset.
TEST(JsonSchema, StringFormats) {
    auto of = [](const char* format) { return std::string(R"({"type": "string", "format": ")") + format + "\"}"; };
    const std::string date = of("date"), time = of("time"), stamp = of("date-time"), uuid = of("uuid");
    for (const char* ok : {"\"2024-02-29\"", "\"2000-02-29\"", "\"1999-12-31\"", "\"2000-10-01\"", "\"2024-04-30\""}) {
        EXPECT_EQ(fed(date.c_str(), ok), std::make_pair(true, true)) << ok;
    }
    for (const char* bad : {"\"2024-13", "\"2024-00", "\"2024-01-32", "\"2024-01-00", "\"24-01-01", "\"2024-01-01T", "\"2024/",
                            "\"2023-02-29", "\"1900-02-29", "\"2024-02-30", "\"2024-04-31", "\"2024-02-3"}) {
        EXPECT_FALSE(fed(date.c_str(), bad).first) << bad;
    }
    EXPECT_EQ(fed(date.c_str(), "\"2024-01"), std::make_pair(true, false));
    for (const char* ok : {"\"23:59:59Z\"", "\"00:00:00.5+02:00\"", "\"12:30:00-05:30\""}) {
        EXPECT_EQ(fed(time.c_str(), ok), std::make_pair(true, true)) << ok;
    }
    for (const char* bad : {"\"24:00", "\"12:60", "\"12:30:00\"", "\"12:30:00.Z", "\"12:30:00+2:", "\"12:30:00Z0"}) {
        EXPECT_FALSE(fed(time.c_str(), bad).first) << bad;
    }
    EXPECT_EQ(fed(stamp.c_str(), "\"2026-11-26T15:51:01.123456Z\""), std::make_pair(true, true));
    EXPECT_FALSE(fed(stamp.c_str(), "\"2026-11-26 15").first);
    EXPECT_EQ(fed(uuid.c_str(), "\"123e4567-e89b-12d3-a456-426614174000\""), std::make_pair(true, true));
    EXPECT_FALSE(fed(uuid.c_str(), "\"123e4567e").first);
    EXPECT_FALSE(fed(uuid.c_str(), "\"123g").first);
    // Formats held as patterns.
    const std::string email = of("email"), ipv4 = of("ipv4"), uri = of("uri");
    for (const char* ok : {"\"ada.lovelace+x@example.co.uk\"", "\"a_1@b.io\""}) {
        EXPECT_EQ(fed(email.c_str(), ok), std::make_pair(true, true)) << ok;
    }
    for (const char* bad : {"\"ada@example\"", "\".ada@x.io", "\"a..b", "\"a@-x", "\"a@x.c\"", "\"a b", "\"@x"}) {
        EXPECT_FALSE(fed(email.c_str(), bad).first) << bad;
    }
    EXPECT_FALSE(fed(email.c_str(), "\"" + std::string(250, 'a') + "@example.com\"").first);  // over 254 characters
    for (const char* ok : {"\"192.168.0.1\"", "\"255.255.255.255\"", "\"0.0.0.0\""}) {
        EXPECT_EQ(fed(ipv4.c_str(), ok), std::make_pair(true, true)) << ok;
    }
    for (const char* bad : {"\"256", "\"1.2.3\"", "\"01.", "\"1.2.3.4.", "\"1.2.3.400"}) {
        EXPECT_FALSE(fed(ipv4.c_str(), bad).first) << bad;
    }
    for (const char* ok : {"\"https://example.org/a?b=c#d\"", "\"mailto:ada@example.org\"", "\"http://x.io/%20y\""}) {
        EXPECT_EQ(fed(uri.c_str(), ok), std::make_pair(true, true)) << ok;
    }
    for (const char* bad : {"\"1http:", "\"http://a b", "\"http://x/%2g", "\"http:\"", "\"no-scheme\""}) {
        EXPECT_FALSE(fed(uri.c_str(), bad).first) << bad;
    }
    const std::string host = of("hostname"), ipv6 = of("ipv6"), duration = of("duration");
    for (const char* ok : {"\"example.org\"", "\"a-1.b\"", "\"localhost\""}) {
        EXPECT_EQ(fed(host.c_str(), ok), std::make_pair(true, true)) << ok;
    }
    for (const char* bad : {"\"-a", "\"a-.", "\"a..b", "\"a_b", "\"abcdefghijklmnopqrstu"}) {  // 21 characters: over the subset's label
        EXPECT_FALSE(fed(host.c_str(), bad).first) << bad;
    }
    EXPECT_EQ(fed(ipv6.c_str(), "\"2001:db8:0:0:0:ff00:42:8329\""), std::make_pair(true, true));
    for (const char* bad : {"\"2001::", "\"12345", "\"1:2:3:4:5:6:7:8:"}) EXPECT_FALSE(fed(ipv6.c_str(), bad).first) << bad;
    for (const char* ok : {"\"P3DT0H0M0S\"", "\"P0DT12H30M0.5S\""}) {
        EXPECT_EQ(fed(duration.c_str(), ok), std::make_pair(true, true)) << ok;
    }
    for (const char* bad : {"\"P\"", "\"P1D\"", "\"P12345", "\"PT1H", "\"P1DT1H1M1S2", "\"1D"}) {
        EXPECT_FALSE(fed(duration.c_str(), bad).first) << bad;
    }
    // In an object: the format holds for the value, not the keys.
    const char* event = R"({"properties": {"on": {"type": "string", "format": "date"}}, "required": ["on"]})";
    EXPECT_EQ(fed(event, R"({"on": "2026-11-26"})"), std::make_pair(true, true));
    EXPECT_FALSE(fed(event, R"({"on": "tomorrow"})").first);
}

// Patterned strings checked byte by byte: escapes decoded, UTF-8 sequences
// one character, keys untouched, unions of patterns followed side by side.
TEST(JsonSchema, StringPatterns) {
    const char* phone = R"({"type": "object", "properties": {"tel": {"type": "string", "pattern": "^\\+?\\d{2,3}( \\d{3})+$"},
        "code": {"type": "string", "pattern": "^[a-z\"/]+$", "maxLength": 4}}, "required": ["tel"]})";
    EXPECT_EQ(fed(phone, R"({"tel": "+33 612 345"})"), std::make_pair(true, true));
    EXPECT_EQ(fed(phone, R"({"tel": "44 123", "code": "a\"b/"})"), std::make_pair(true, true));  // escapes decoded
    EXPECT_EQ(fed(phone, R"({"tel": "44 123", "code": "a\/b"})"), std::make_pair(true, true));
    EXPECT_FALSE(fed(phone, R"({"tel": "44")").first);          // the quote before a whole match
    EXPECT_FALSE(fed(phone, R"({"tel": "44a)").first);
    EXPECT_FALSE(fed(phone, R"({"tel": "44 123", "code": "\u0061"})").first);  // no \u escapes in patterned text
    EXPECT_FALSE(fed(phone, R"({"tel": "44 123", "code": "a\nb"})").first);     // \n is not in the class
    EXPECT_FALSE(fed(phone, R"({"tel": "44\)").first);  // no escape can go on: the backslash is refused
    EXPECT_FALSE(fed(phone, R"({"tel": "44 123", "code": "abcde"})").first);    // maxLength still holds
    // A maxLength ends no text before a match fits: "abc" leaves 2 of 5
    // characters, and the pattern needs 3 more.
    const char* tight = R"({"type": "string", "pattern": "^[a-z]+-\\d{3}$", "maxLength": 5})";
    EXPECT_EQ(fed(tight, "\"a-123\""), std::make_pair(true, true));
    EXPECT_FALSE(fed(tight, "\"ab").first);
    // And a minLength no text short of it: "ab" could end at "ab-12" (5);
    // "abc" may go on to 6.
    const char* wide = R"({"type": "string", "pattern": "^[a-c]{1,3}-\\d{1,2}$", "minLength": 6})";
    EXPECT_EQ(fed(wide, "\"abc-12\""), std::make_pair(true, true));
    EXPECT_FALSE(fed(wide, "\"a-").first);  // a-12 at most: 4 characters
    EXPECT_FALSE(fed(wide, "\"abc-1\"").first);
    // Keys are not the value's pattern; a union of patterned strings keeps
    // every branch that still fits.
    const char* either = R"({"anyOf": [{"type": "string", "pattern": "^\\d+$"}, {"type": "string", "pattern": "^[a-f]+$"}]})";
    EXPECT_EQ(fed(either, "\"123\""), std::make_pair(true, true));
    EXPECT_EQ(fed(either, "\"abc\""), std::make_pair(true, true));
    EXPECT_FALSE(fed(either, "\"1a").first);
    // Non-ASCII text: one character at its first byte.
    const char* word = R"({"type": "string", "pattern": "^caf.$"})";
    EXPECT_EQ(fed(word, "\"caf\xC3\xA9\""), std::make_pair(true, true));
    EXPECT_FALSE(fed(word, "\"caf\xC3\xA9x").first);
    EXPECT_FALSE(fed(word, "\"caf\xA9").first);      // a continuation byte without its lead
    EXPECT_FALSE(fed(word, "\"caf\xC3\"").first);   // a sequence cut short
    EXPECT_FALSE(fed(word, "\"caf\xC3x").first);
    try {
        JsonSchema::parse(R"({"type": "string", "pattern": "(a"})");
        ADD_FAILURE() << "an unclosed group was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(".pattern"), std::string::npos) << e.what();
    }
}

// multipleOf: whole multiples, written as integers; with a range, both hold.
TEST(JsonSchema, Multiples) {
    const char* five = R"({"type": "number", "multipleOf": 5})";
    for (const char* ok : {"0", "5", "-15", "1000000"}) EXPECT_EQ(fed(five, ok), std::make_pair(true, true)) << ok;
    EXPECT_EQ(fed(five, "12"), std::make_pair(true, false));  // 120 is still to come
    EXPECT_FALSE(fed(five, "5.0").first);                     // written as an integer
    EXPECT_FALSE(fed(five, "5e1").first);
    EXPECT_FALSE(fed(five, "1234567890123456781").first);    // past 18 digits
    const char* list = R"({"type": "array", "items": {"type": "integer", "multipleOf": 7, "minimum": 10, "maximum": 30}})";
    EXPECT_EQ(fed(list, "[14, 21, 28]"), std::make_pair(true, true));
    EXPECT_FALSE(fed(list, "[15,").first);  // 15 ends here: not a multiple
    EXPECT_FALSE(fed(list, "[7,").first);   // below the minimum
    EXPECT_FALSE(fed(list, "[35").first);   // above the maximum
    // No multiple in range starts 25 (25 itself is none, 250.. are past 30).
    EXPECT_EQ(taken_bytes(list, "[25"), 2u);
    // No point where no fraction can land in the range: 23.x is not above 100.
    EXPECT_EQ(taken_bytes(R"({"type": "number", "exclusiveMinimum": 100})", "23."), 2u);
    EXPECT_EQ(fed(R"({"type": "number", "exclusiveMinimum": 100})", "230.5"), std::make_pair(true, true));
    // A large multiple: digits go on only while a multiple can still be reached.
    const char* big = R"({"type": "integer", "multipleOf": 1000000000})";
    EXPECT_EQ(fed(big, "3000000000"), std::make_pair(true, true));
    EXPECT_FALSE(fed(big, "300000000000000001").first);  // 18 digits, none left to reach one
}

// Fractional multiples: at most as many digits after the point as the
// multiple has, and only digits from which a multiple can still be reached.
TEST(JsonSchema, FractionalMultiples) {
    const char* cents = R"({"type": "number", "multipleOf": 0.01})";
    for (const char* ok : {"1.25", "0.5", "-3", "12", "0.07", "0"}) EXPECT_EQ(fed(cents, ok), std::make_pair(true, true)) << ok;
    EXPECT_EQ(taken_bytes(cents, "1.255"), 4u);
    EXPECT_EQ(taken_bytes(cents, "1e2"), 1u);  // no exponent
    // Any number's exponent has at most two digits: the value stays a finite double.
    EXPECT_EQ(fed(R"({"type": "number"})", "-2.5E+99"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(R"({"type": "number"})", "31E813"), 5u);
    const char* quarters = R"({"type": "number", "multipleOf": 0.25})";
    for (const char* ok : {"0.75", "2", "1.5", "-0.25"}) EXPECT_EQ(fed(quarters, ok), std::make_pair(true, true)) << ok;
    EXPECT_EQ(taken_bytes(quarters, "0.3"), 2u);                    // no multiple of 0.25 starts 0.3
    EXPECT_EQ(fed(quarters, "0.2"), std::make_pair(true, false));  // 0.25 is still to come
    const char* halves = R"({"type": "number", "multipleOf": 2.5})";
    for (const char* ok : {"5", "7.5", "-2.5", "10"}) EXPECT_EQ(fed(halves, ok), std::make_pair(true, true)) << ok;
    EXPECT_EQ(taken_bytes(halves, "7.6"), 2u);
    EXPECT_EQ(fed(halves, "3"), std::make_pair(true, false));  // 30 or 32.5 may come
    EXPECT_EQ(fed(R"({"multipleOf": 1e-3, "type": "number"})", "0.125"), std::make_pair(true, true));
    // Integers: a multiple of 0.5 is any integer, of 2.5 a multiple of 5.
    EXPECT_EQ(fed(R"({"type": "integer", "multipleOf": 0.5})", "7"), std::make_pair(true, true));
    EXPECT_EQ(fed(R"({"type": "integer", "multipleOf": 2.5})", "10"), std::make_pair(true, true));
    EXPECT_EQ(fed(R"({"type": "integer", "multipleOf": 2.5})", "7"), std::make_pair(true, false));
    const char* ranged = R"({"type": "number", "multipleOf": 0.5, "minimum": 0, "maximum": 1})";
    for (const char* ok : {"0.5", "1", "0"}) EXPECT_EQ(fed(ranged, ok), std::make_pair(true, true)) << ok;
    EXPECT_EQ(taken_bytes(ranged, "1.5"), 2u);
}

// Pydantic's dict[str, X] (additionalProperties as a schema, beside listed
// properties too), object sizes, tuples (prefixItems) and allOf of one
// schema. Each forbidden text stops at the byte that breaks it.
TEST(JsonSchema, OtherKeysSizesAndTuples) {
    const char* scores = R"({"type": "object", "additionalProperties": {"type": "integer"}})";
    EXPECT_EQ(fed(scores, R"({"a": 1, "b c": -2})"), std::make_pair(true, true));
    EXPECT_EQ(fed(scores, "{}"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(scores, R"({"a": "x"})"), 6u);
    EXPECT_EQ(taken_bytes(scores, R"({"a": 1.5})"), 7u);

    // Listed keys keep their schemas; any other key takes additionalProperties'.
    const char* named = R"({"properties": {"name": {"type": "string"}, "a\"b": {"type": "boolean"}},
        "required": ["name"], "additionalProperties": {"type": "integer"}})";
    for (const char* doc : {R"({"name": "x", "age": 3})", R"({"nam": 1, "name": "y"})", R"({"names": 2, "name": "z"})",
                            R"({"na\"me": 1, "name": "q"})", R"({"a\n": 1, "a\"b": true, "name": "r"})",
                            R"({"name": "s", "a\"bc": 4, "": 5})"}) {
        EXPECT_EQ(fed(named, doc), std::make_pair(true, true)) << doc;
    }
    EXPECT_EQ(taken_bytes(named, R"({"name": 5})"), 9u);               // a listed key's schema
    EXPECT_EQ(taken_bytes(named, R"({"age": "x"})"), 8u);              // the others'
    EXPECT_EQ(taken_bytes(named, R"({"a\"b": 1})"), 9u);               // a listed key with an escape
    EXPECT_EQ(taken_bytes(named, R"({"name": "x", "name": "y"})"), 19u);  // twice: its closing quote
    EXPECT_EQ(taken_bytes(named, R"({"age": 1})"), 9u);                // name is required
    EXPECT_EQ(taken_bytes(R"({"type": "object", "additionalProperties": false})", R"({"a": 1})"), 1u);
    EXPECT_EQ(fed(R"({"type": "object", "additionalProperties": false})", "{}"), std::make_pair(true, true));

    // Sizes; and where the required keys fill what maxProperties leaves, only they may come.
    const char* sized = R"({"type": "object", "minProperties": 1, "maxProperties": 2})";
    EXPECT_EQ(taken_bytes(sized, "{}"), 1u);
    EXPECT_EQ(fed(sized, R"({"a": 1, "b": {}})"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(sized, R"({"a": 1, "b": 2, "c": 3})"), 15u);
    const char* tight = R"({"properties": {"a": {}, "b": {}, "c": {}}, "required": ["c"], "maxProperties": 2})";
    EXPECT_EQ(fed(tight, R"({"a": 1, "c": 2})"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(tight, R"({"a": 1, "b": 2})"), 10u);
    EXPECT_EQ(taken_bytes(R"({"properties": {"a": {}, "b": {}}, "minProperties": 2})", R"({"a": 1})"), 7u);

    // Tuples: an element per prefixItems schema, then items' (false: none).
    const char* pair = R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "minItems": 2,
        "maxItems": 2})";
    EXPECT_EQ(fed(pair, R"([1, "a"])"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(pair, R"(["a", 1])"), 1u);
    EXPECT_EQ(taken_bytes(pair, R"([1, 2])"), 4u);
    EXPECT_EQ(taken_bytes(pair, R"([1])"), 2u);
    EXPECT_EQ(taken_bytes(pair, R"([1, "a", 2])"), 7u);
    const char* closed = R"({"prefixItems": [{"type": "integer"}], "items": false})";
    EXPECT_EQ(fed(closed, "[7]"), std::make_pair(true, true));
    EXPECT_EQ(fed(closed, "[]"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(closed, "[7, 8]"), 2u);
    const char* rest = R"({"prefixItems": [{"type": "string"}], "items": {"type": "integer"}})";
    EXPECT_EQ(fed(rest, R"(["a", 1, 2])"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(rest, R"(["a", "b"])"), 6u);

    // allOf of one schema, as some generators wrap a $ref that has a description.
    const char* wrapped = R"({"$defs": {"P": {"type": "integer"}},
        "properties": {"x": {"allOf": [{"$ref": "#/$defs/P"}], "description": "d"}}})";
    EXPECT_EQ(fed(wrapped, R"({"x": 1})"), std::make_pair(true, true));
    EXPECT_EQ(taken_bytes(wrapped, R"({"x": "a"})"), 6u);
}

// Random walks through what the checker accepts, byte by byte, as a
// sampler would walk it: it never leaves the text at a dead end (no byte
// goes on, yet the value is not complete), and every text it calls
// complete is JSON that holds to the schema (checked here on its own).
TEST(JsonSchema, RandomWalksEndInValidDocuments) {
    using nlohmann::json;
    struct Case {
        const char* schema;
        std::function<bool(const json&)> holds;
    };
    // Integers past 64 bits parse as doubles: whole ones count.
    auto whole = [](const json& v) {
        return v.is_number_integer() || v.is_number_unsigned() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
    };
    auto all_ints = [&](const json& o) { return std::all_of(o.begin(), o.end(), whole); };
    std::vector<Case> cases = {
        {R"({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 3})",
         [&](const json& j) { return j.is_object() && j.size() >= 1 && j.size() <= 3 && all_ints(j); }},
        {R"({"properties": {"a": {"type": "boolean"}, "ab": {"type": "null"}, "b": {"type": "string", "maxLength": 3}},
             "required": ["b"], "additionalProperties": {"type": "integer"}, "maxProperties": 2})",
         [&](const json& j) {
             if (!j.is_object() || j.size() > 2 || !j.contains("b") || !j["b"].is_string()) return false;
             for (const auto& [k, v] : j.items()) {
                 const bool ok = k == "a" ? v.is_boolean() : k == "ab" ? v.is_null() : k == "b" ? v.is_string() : whole(v);
                 if (!ok) return false;
             }
             return true;
         }},
        {R"({"type": "array", "prefixItems": [{"type": "integer"}, {"enum": ["x", "y"]}], "items": false, "minItems": 1})",
         [&](const json& j) {
             return j.is_array() && !j.empty() && j.size() <= 2 && whole(j[0]) &&
                    (j.size() == 1 || j[1] == "x" || j[1] == "y");
         }},
        {R"({"type": "number", "multipleOf": 0.25, "minimum": -3, "maximum": 3})",
         [](const json& j) {
             const double v = j.get<double>();
             return j.is_number() && v >= -3 && v <= 3 && std::fabs(v * 4 - std::round(v * 4)) < 1e-9;
         }},
    };
    // The older keywords too (JSON validity and no dead end are what is checked there).
    auto any = [](const json&) { return true; };
    for (const char* more : {kPerson,
                             R"({"type": "object", "properties": {"p": {"type": "array", "items": {"anyOf": [
                                 {"type": "object", "properties": {"k": {"const": "a"}, "n": {"type": "integer"}},
                                  "required": ["k", "n"]},
                                 {"type": "object", "properties": {"k": {"const": "b"}, "g": {"type": "boolean"}},
                                  "required": ["k"]}]}}}, "required": ["p"]})",
                             R"({"type": "string", "pattern": "^[a-c]{2,5}x?$", "minLength": 3, "maxLength": 5})",
                             R"({"type": "string", "format": "date"})",
                             R"({"type": "string", "format": "email", "maxLength": 12})",
                             R"({"type": "integer", "minimum": 10, "maximum": 99, "multipleOf": 7})",
                             R"({"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 2, "maxItems": 3})",
                             R"({"type": "string", "format": "date-time"})",
                             R"({"type": "string", "format": "ipv4"})",
                             R"({"type": "string", "pattern": "a+b*", "maxLength": 4})",
                             R"({"anyOf": [{"type": "integer", "minimum": 5, "maximum": 9}, {"type": "number", "exclusiveMinimum": 100},
                                           {"type": "string", "maxLength": 2}, {"enum": [1, "xy", null]}]})",
                             R"({"type": "number", "minimum": -1.5, "exclusiveMaximum": 0.25, "multipleOf": 0.125})",
                             R"({"type": "integer", "exclusiveMinimum": -1000000000000, "maximum": -999999999990, "multipleOf": 3})",
                             R"({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"},
                                 "minProperties": 2, "maxProperties": 2})"}) {
        cases.push_back({more, any});
    }
    // Every printable ASCII byte and the JSON spaces (a dead end is one no
    // byte at all gets past; non-ASCII text is tested elsewhere).
    std::string alphabet = "\n\t";
    for (char b = 0x20; b < 0x7f; ++b) alphabet += b;
    std::mt19937 rng(11);
    for (const Case& c : cases) {
        const auto schema = JsonSchema::parse(c.schema);
        int completed = 0;
        for (int walk = 0; walk < 300; ++walk) {
            SchemaState s(schema);
            std::string text;
            while (text.size() < 200) {
                if (s.complete() && rng() % 4 == 0) break;
                std::string next;
                for (char b : alphabet) {
                    SchemaState probe = s;
                    if (probe.feed(static_cast<unsigned char>(b))) next += b;
                }
                if (next.empty()) {
                    ASSERT_TRUE(s.complete()) << c.schema << "\ndead end after: " << json(text).dump();
                    break;
                }
                const char b = next[rng() % next.size()];
                ASSERT_TRUE(s.feed(static_cast<unsigned char>(b)));
                text += b;
            }
            if (!s.complete()) continue;  // cut by the length cap
            ++completed;
            const json j = json::parse(text, nullptr, false);
            ASSERT_FALSE(j.is_discarded()) << c.schema << "\nnot JSON: " << json(text).dump();
            EXPECT_TRUE(c.holds(j)) << c.schema << "\ndoes not hold: " << json(text).dump();
        }
        EXPECT_GT(completed, 30) << c.schema;
    }
}

TEST(JsonSchema, RefusesWhatItCannotEnforce) {
    // A schema too large for the checker's 16-bit node numbers: 64 x 64
    // objects of 5 properties each, over 20,000 subschemas.
    auto props = [](int n, const std::string& sub) {
        std::string out = R"({"type": "object", "properties": {)";
        for (int i = 0; i < n; ++i) out += (i ? ", " : "") + std::string("\"p") + std::to_string(i) + "\": " + sub;
        return out + "}}";
    };
    const std::string big = props(64, props(64, props(5, R"({"type": "string"})")));
    try {
        JsonSchema::parse(big);
        ADD_FAILURE() << "a schema of over 20,000 subschemas was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    }
    struct Case {
        const char* schema;
        const char* says;
    };
    for (const Case& c : {Case{R"({"type": "object", "patternProperties": {"^a": {}}})", ".patternProperties"},
                          Case{R"({"type": "string", "pattern": "(a)\\1"})", "backreferences"},
                          Case{R"({"type": "string", "pattern": "a", "format": "date"})", "pattern beside"},
                          Case{R"({"type": "string", "pattern": "^a{2}$", "minLength": 3})", "minLength characters"},
                          Case{R"({"properties": {"a": {"type": "number", "multipleOf": 1e-12}}})", ".properties.a.multipleOf"},
                          Case{R"({"type": "integer", "multipleOf": 10, "minimum": 1, "maximum": 9})", "no multiple"},
                          Case{R"({"type": "integer", "minimum": 1.2, "maximum": 1.8})", "no integer"},
                          Case{R"({"type": "number", "minimum": 3, "exclusiveMaximum": 3})", "minimum above"},
                          Case{R"({"enum": [1, 2], "minimum": 1})", "beside enum"},
                          Case{R"({"type": "string", "format": "iri"})", "'iri' is not supported"},
                          Case{R"({"type": "string", "format": "email", "pattern": "x"})", "pattern beside format"},
                          Case{R"({"type": "array", "uniqueItems": true})", ".uniqueItems"},
                          Case{R"({"anyOf": [{"type": "object", "propertyNames": {"maxLength": 2}}, {"type": "object"}]})",
                               ".anyOf[0].propertyNames"},
                          Case{R"({"allOf": [{"type": "object"}, {"required": []}]})", "several schemas"},
                          Case{R"({"allOf": [{"type": "object"}], "type": "object"})", "beside allOf"},
                          Case{R"({"properties": {"a": {}}, "minProperties": 2})", ".minProperties"},
                          Case{R"({"properties": {"a": {}, "b": {}}, "required": ["a", "b"], "maxProperties": 1})", ".maxProperties"},
                          Case{R"({"type": "object", "minProperties": 3, "maxProperties": 2})", "minProperties above"},
                          Case{R"({"properties": {"a": {}}, "required": ["b"]})", "'b'"},
                          Case{R"({"type": "decimal"})", "decimal"},
                          Case{R"({"$ref": "#/$defs/x"})", "not defined"},
                          Case{R"({"$ref": "other.json#/x"})", "only"},
                          Case{R"({"$defs": {"a": {}}, "$ref": "#/$defs/a", "type": "object"})", ".type"},
                          Case{R"({"type": "string", "minLength": 3, "maxLength": 2})", "minimum above"},
                          Case{R"({"enum": [[1]]})", "enum"},
                          Case{"not json", "valid JSON"}}) {
        try {
            JsonSchema::parse(c.schema);
            ADD_FAILURE() << c.schema << " was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
            EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
        }
    }
}

// The constraint with a schema: greedy picks that the logits would make
// otherwise ("}" at once, a key not in the schema, the wrong type) are
// refused, and the output ends only when the object is complete.
TEST(JsonSchema, ConstraintFollowsTheSchema) {
    const std::vector<std::string> pieces = {"{", "}", "\"name\"", "\"age\"", ":", " \"Ada\"", " 36", ",", "\"x\"",
                                             " 3.5", "<eos>"};
    std::vector<bool> eog(pieces.size(), false);
    eog.back() = true;
    std::vector<std::string> texts = pieces;
    texts.back() = "";
    JsonConstraint c(texts, eog, {}, JsonSchema::parse(R"({"properties": {"name": {"type": "string"},
        "age": {"type": "integer"}}, "required": ["name", "age"]})"));
    SamplerParams p;
    p.temperature = 0.0f;
    TokenSampler greedy(p, static_cast<int32_t>(pieces.size()));
    // Preference: end, "}", "x", " 3.5", then the rest.
    const std::vector<float> logits = {1.0f, 9.0f, 2.0f, 2.5f, 3.0f, 1.5f, 1.2f, 4.0f, 8.0f, 7.0f, 10.0f};
    std::string text;
    int32_t t = -1;
    for (int step = 0; step < 20 && t != 10; ++step) {
        t = c.sample(greedy, logits.data());
        if (t != 10) text += pieces[static_cast<size_t>(t)];
    }
    EXPECT_EQ(t, 10);
    // "x" is refused as a key and as the age, taken as the name.
    EXPECT_EQ(text, R"({"age": 36,"name":"x"})");
}

}  // namespace
}  // namespace lantern
