// The byte classes of JSON's grammar (RFC 8259), shared by the JSON and
// JSON-schema checkers.
#pragma once

namespace lantern::json_chars {

inline bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
inline bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
inline bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace lantern::json_chars
