// The byte classes of JSON's grammar (RFC 8259), shared by the JSON and
// JSON-schema checkers.
#pragma once

#include <cstdint>
#include <string_view>

namespace lantern::json_chars {

inline bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Text without the JSON whitespace at its start, its end, or both.
inline std::string_view ltrim(std::string_view s) {
    while (!s.empty() && is_space(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    return s;
}
inline std::string_view rtrim(std::string_view s) {
    while (!s.empty() && is_space(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}
inline std::string_view trim(std::string_view s) { return rtrim(ltrim(s)); }
inline bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
inline bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// The escapes \c of a JSON string (\u aside) and the characters they
// stand for, index for index.
constexpr char kEscapes[] = "\"\\/bfnrt";
constexpr char kEscaped[] = "\"\\/\b\f\n\r\t";
// The character \c stands for; -1: not an escape (or \u).
inline int unescape(unsigned char c) {
    for (int i = 0; kEscapes[i] != '\0'; ++i) {
        if (static_cast<unsigned char>(kEscapes[i]) == c) return static_cast<unsigned char>(kEscaped[i]);
    }
    return -1;
}

// A byte of a string's text as UTF-8 (RFC 8259 text is UTF-8): `due` counts
// the continuation bytes its sequence still needs. False: a byte out of
// sequence (a stray continuation byte, a sequence cut short, a byte no
// sequence starts with), which a byte-level token could otherwise write.
inline bool utf8_byte(unsigned char c, unsigned& due) {
    if (due > 0) {
        if ((c & 0xC0) != 0x80) return false;
        --due;
        return true;
    }
    if (c < 0x80) return true;
    if (c < 0xC2 || c > 0xF4) return false;
    due = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    return true;
}

// A number of at most `cap` bytes after its first takes byte c as its
// used-th: a digit while there is room, a point, 'e' or sign only with room
// for the digit that must follow it (a number is never left where it can
// neither go on nor end). Other bytes are no business of this.
inline bool number_room(unsigned char c, int used, int cap) {
    if (is_digit(c)) return used <= cap;
    if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') return used + 1 <= cap;
    return true;
}

// A \uXXXX escape as a UTF-16 unit, digit by digit: `code` holds the
// digits so far (i of them), `low_due` that a high surrogate came just
// before. False for a digit after which the escape can no longer be valid
// there: a low surrogate (DC00-DFFF) alone, or anything but one after a
// high surrogate (D800-DBFF). After the fourth digit, low_due says whether
// this one was a high surrogate, whose low one must follow at once.
inline bool unicode_digit(unsigned char c, int i, uint32_t& code, bool& low_due) {
    if (!is_hex(c)) return false;
    const uint32_t v = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
    if (i == 0 && low_due && v != 0xD) return false;
    if (i == 1 && code == 0xD && (low_due ? v < 0xC : v >= 0xC)) return false;
    code = code << 4 | v;
    if (i == 3) low_due = !low_due && code >= 0xD800 && code <= 0xDBFF;
    return true;
}

}  // namespace lantern::json_chars
