// Text helpers for the Jinja interpreter: UTF-8 and the Python string semantics
// that chat templates observe (str.strip/split/title, repr of strings and floats,
// json.dumps escaping). Strings are UTF-8 bytes; lengths, indices and slices
// count code points, as Python's str does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lantern::jinja {

// UTF-8 <-> code points. Invalid bytes decode to U+FFFD.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
// Code points in s (Python's len()).
size_t utf8_length(std::string_view s);
bool is_ascii(std::string_view s);

// Python's str.isspace() for one code point.
bool py_isspace(char32_t c);

// str.strip / lstrip / rstrip: `chars` absent = whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / rsplit: `sep` absent = runs of whitespace; maxsplit < 0 = no limit.
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right = false);
// str.splitlines() (without keepends).
std::vector<std::string> py_splitlines(std::string_view s);
// str.replace(old, new, count); count < 0 = all.
std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

// Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic; other
// code points are left as they are.
char32_t py_toupper(char32_t c);
char32_t py_tolower(char32_t c);
bool py_isupper(char32_t c);
bool py_islower(char32_t c);
bool py_isalpha(char32_t c);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
// str.isupper() / str.islower(): at least one cased character, none of the other case.
bool py_str_isupper(std::string_view s);
bool py_str_islower(std::string_view s);
// str.title(): a cased letter after an uncased character is upper-cased, the rest lowered.
std::string py_str_title(std::string_view s);

// repr() of a str: single quotes unless the text holds ' and no ".
std::string py_repr_string(std::string_view s);
// repr() / str() of a float: shortest round-trip digits, Python's layout
// ("1.0", "0.1", "1e-05", "1.5e+16", "inf", "nan").
std::string py_repr_float(double v);

// A JSON string literal the way Python's json.dumps writes it.
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace lantern::jinja
