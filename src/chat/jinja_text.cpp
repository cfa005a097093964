#include "chat/jinja_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja_value.h"

namespace lantern::jinja {

// ---------------------------------------------------------------- UTF-8 ----

namespace {

// Decodes one code point at s[i], advancing i; invalid input gives U+FFFD.
char32_t decode_one(std::string_view s, size_t& i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        ++i;
        return b0;
    }
    int n = 0;
    char32_t cp = 0;
    if ((b0 & 0xE0) == 0xC0) n = 1, cp = b0 & 0x1F;
    else if ((b0 & 0xF0) == 0xE0) n = 2, cp = b0 & 0x0F;
    else if ((b0 & 0xF8) == 0xF0) n = 3, cp = b0 & 0x07;
    else {
        ++i;
        return 0xFFFD;
    }
    if (i + size_t(n) >= s.size()) {  // truncated sequence
        ++i;
        return 0xFFFD;
    }
    for (int k = 1; k <= n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + size_t(k)]);
        if ((b & 0xC0) != 0x80) {
            ++i;
            return 0xFFFD;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    i += size_t(n) + 1;
    return cp;
}

}  // namespace

void utf8_append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

std::u32string utf8_decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) out += decode_one(s, i);
    return out;
}

std::string utf8_encode(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) utf8_append(out, c);
    return out;
}

size_t utf8_length(std::string_view s) {
    size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

bool is_ascii(std::string_view s) {
    for (char c : s) {
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    }
    return true;
}

// ------------------------------------------------------- classification ----

bool py_isspace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Upper <-> lower pairs that differ by a fixed offset over a range.
struct CaseRange {
    char32_t upper_first, upper_last;
    int32_t offset;  // lower = upper + offset
    bool alternating;  // upper/lower interleaved (U+0100 style): offset is 1
};

constexpr CaseRange kCaseRanges[] = {
    {U'A', U'Z', 32, false},          {0x00C0, 0x00D6, 32, false},   {0x00D8, 0x00DE, 32, false},
    {0x0100, 0x012F, 1, true},        {0x0132, 0x0137, 1, true},     {0x0139, 0x0148, 1, true},
    {0x014A, 0x0177, 1, true},        {0x0179, 0x017E, 1, true},     {0x0391, 0x03A1, 32, false},
    {0x03A3, 0x03A9, 32, false},      {0x0410, 0x042F, 32, false},   {0x0400, 0x040F, 80, false},
};

// For the alternating ranges, the upper-case member is the first of each pair.
bool alternating_is_upper(const CaseRange& r, char32_t c) { return ((c - r.upper_first) & 1) == 0; }

}  // namespace

char32_t py_toupper(char32_t c) {
    if (c == 0x00FF) return 0x0178;
    if (c == 0x03C2) return 0x03A3;  // final sigma
    for (const CaseRange& r : kCaseRanges) {
        if (r.alternating) {
            if (c >= r.upper_first && c <= r.upper_last && !alternating_is_upper(r, c)) return c - 1;
        } else if (c >= r.upper_first + char32_t(r.offset) && c <= r.upper_last + char32_t(r.offset)) {
            return c - char32_t(r.offset);
        }
    }
    return c;
}

char32_t py_tolower(char32_t c) {
    if (c == 0x0178) return 0x00FF;
    for (const CaseRange& r : kCaseRanges) {
        if (c < r.upper_first || c > r.upper_last) continue;
        if (r.alternating) return alternating_is_upper(r, c) ? c + 1 : c;
        return c + char32_t(r.offset);
    }
    return c;
}

bool py_isupper(char32_t c) { return py_tolower(c) != c; }
bool py_islower(char32_t c) { return py_toupper(c) != c || c == 0x00DF; }

bool py_isalpha(char32_t c) {
    if (c < 0x80) return (c | 32) >= 'a' && (c | 32) <= 'z';
    if (py_isupper(c) || py_islower(c)) return true;
    // Uncased scripts: CJK, kana, hangul, Arabic, Hebrew, Devanagari and Thai letters.
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3040 && c <= 0x30FF) || (c >= 0xAC00 && c <= 0xD7A3) ||
           (c >= 0x0620 && c <= 0x064A) || (c >= 0x05D0 && c <= 0x05EA) || (c >= 0x0904 && c <= 0x0939) ||
           (c >= 0x0E01 && c <= 0x0E30);
}

std::string py_upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        const char32_t c = decode_one(s, i);
        if (c == 0x00DF) out += "SS";  // the one multi-letter mapping in these ranges
        else utf8_append(out, py_toupper(c));
    }
    return out;
}

namespace {

bool is_cased(char32_t c) { return py_isupper(c) || py_islower(c); }

// Unicode's Case_Ignorable, for the characters text commonly holds.
bool is_case_ignorable(char32_t c) {
    return c == U'\'' || c == U'.' || c == U':' || c == U'^' || c == U'`' || c == 0xA8 || c == 0xAD || c == 0xAF ||
           c == 0xB4 || c == 0xB7 || c == 0xB8 || (c >= 0x02B0 && c <= 0x036F) || c == 0x2018 || c == 0x2019 ||
           c == 0x2024 || c == 0x2027;
}

// Lower-cases u[i] in context: a capital sigma after a cased letter and not
// before one (case-ignorable characters in between are skipped) is the final
// form, Python's Final_Sigma rule.
char32_t lower_at(const std::u32string& u, size_t i) {
    if (u[i] != 0x03A3) return py_tolower(u[i]);
    size_t b = i;
    while (b > 0 && is_case_ignorable(u[b - 1])) --b;
    size_t a = i + 1;
    while (a < u.size() && is_case_ignorable(u[a])) ++a;
    const bool after_cased = b > 0 && is_cased(u[b - 1]);
    const bool before_cased = a < u.size() && is_cased(u[a]);
    return after_cased && !before_cased ? 0x03C2 : 0x03C3;
}

// Title case of one letter: ß has no single capital, Python writes "Ss".
void append_title(std::string& out, char32_t c) {
    if (c == 0x00DF) out += "Ss";
    else utf8_append(out, py_toupper(c));
}

}  // namespace

std::string py_lower(std::string_view s) {
    const std::u32string u = utf8_decode(s);
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < u.size(); ++i) utf8_append(out, lower_at(u, i));
    return out;
}

bool py_str_isupper(std::string_view s) {
    bool cased = false;
    for (char32_t c : utf8_decode(s)) {
        if (py_islower(c)) return false;
        cased = cased || py_isupper(c);
    }
    return cased;
}

bool py_str_islower(std::string_view s) {
    bool cased = false;
    for (char32_t c : utf8_decode(s)) {
        if (py_isupper(c)) return false;
        cased = cased || py_islower(c);
    }
    return cased;
}

std::string py_capitalize(std::string_view s) {
    const std::u32string u = utf8_decode(s);
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < u.size(); ++i) {
        if (i == 0) append_title(out, u[0]);
        else utf8_append(out, lower_at(u, i));
    }
    return out;
}

std::string py_str_title(std::string_view s) {
    const std::u32string u = utf8_decode(s);
    std::string out;
    out.reserve(s.size());
    bool previous_cased = false;
    for (size_t i = 0; i < u.size(); ++i) {
        const char32_t c = u[i];
        if (is_cased(c)) {
            if (previous_cased) utf8_append(out, lower_at(u, i));
            else append_title(out, c);
            previous_cased = true;
        } else {
            utf8_append(out, c);
            previous_cased = false;
        }
    }
    return out;
}

// ------------------------------------------------------- str methods ----

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
    const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
    auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
    if (is_ascii(s) && (!chars || is_ascii(*chars))) {  // byte fast path
        size_t b = 0, e = s.size();
        if (left) while (b < e && strip_it(char32_t(static_cast<unsigned char>(s[b])))) ++b;
        if (right) while (e > b && strip_it(char32_t(static_cast<unsigned char>(s[e - 1])))) --e;
        return std::string(s.substr(b, e - b));
    }
    const std::u32string u = utf8_decode(s);
    size_t b = 0, e = u.size();
    if (left) while (b < e && strip_it(u[b])) ++b;
    if (right) while (e > b && strip_it(u[e - 1])) --e;
    return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right) {
    std::vector<std::string> parts;
    if (sep) {
        if (!from_right) {
            size_t pos = 0;
            while (maxsplit != 0) {
                const size_t hit = s.find(*sep, pos);
                if (hit == std::string_view::npos) break;
                parts.emplace_back(s.substr(pos, hit - pos));
                pos = hit + sep->size();
                if (maxsplit > 0) --maxsplit;
            }
            parts.emplace_back(s.substr(pos));
        } else {
            size_t end = s.size();
            while (maxsplit != 0 && end >= sep->size()) {
                const size_t hit = s.rfind(*sep, end - sep->size());
                if (hit == std::string_view::npos) break;
                parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
                end = hit;
                if (maxsplit > 0) --maxsplit;
            }
            parts.emplace_back(s.substr(0, end));
            std::reverse(parts.begin(), parts.end());
        }
        return parts;
    }
    // Runs of whitespace; leading and trailing whitespace give no empty parts.
    const std::u32string u = utf8_decode(s);
    if (!from_right) {
        size_t i = 0;
        while (true) {
            while (i < u.size() && py_isspace(u[i])) ++i;
            if (i == u.size()) break;
            if (maxsplit == 0) {  // the rest, trailing whitespace and all
                parts.push_back(utf8_encode(std::u32string_view(u).substr(i)));
                break;
            }
            size_t j = i;
            while (j < u.size() && !py_isspace(u[j])) ++j;
            parts.push_back(utf8_encode(std::u32string_view(u).substr(i, j - i)));
            if (maxsplit > 0) --maxsplit;
            i = j;
        }
    } else {
        size_t e = u.size();
        while (true) {
            while (e > 0 && py_isspace(u[e - 1])) --e;
            if (e == 0) break;
            if (maxsplit == 0) {  // the rest, leading whitespace and all
                parts.push_back(utf8_encode(std::u32string_view(u).substr(0, e)));
                break;
            }
            size_t b = e;
            while (b > 0 && !py_isspace(u[b - 1])) --b;
            parts.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
            if (maxsplit > 0) --maxsplit;
            e = b;
        }
        std::reverse(parts.begin(), parts.end());
    }
    return parts;
}

std::vector<std::string> py_splitlines(std::string_view s) {
    std::vector<std::string> lines;
    size_t start = 0, i = 0;
    while (i < s.size()) {
        const char c = s[i];
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' || c == '\x1e') {
            lines.emplace_back(s.substr(start, i - start));
            i += (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
            start = i;
        } else {
            ++i;
        }
    }
    if (start < s.size()) lines.emplace_back(s.substr(start));
    return lines;
}

std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
    std::string out;
    if (from.empty()) {  // Python inserts `to` between every code point and at both ends
        const std::u32string u = utf8_decode(s);
        int64_t done = 0;
        for (size_t i = 0; i <= u.size(); ++i) {
            if (count < 0 || done < count) {
                out += to;
                ++done;
            }
            if (i < u.size()) utf8_append(out, u[i]);
            check_bytes(out.size(), "a replaced string");
        }
        return out;
    }
    size_t pos = 0;
    while (count != 0) {
        const size_t hit = s.find(from, pos);
        if (hit == std::string_view::npos) break;
        out.append(s.substr(pos, hit - pos));
        out.append(to);
        check_bytes(out.size(), "a replaced string");
        pos = hit + from.size();
        if (count > 0) --count;
    }
    out.append(s.substr(pos));
    return out;
}

// ------------------------------------------------------------- repr ----

namespace {

// Python's str.isprintable() is false for control, format, separator (except
// the ASCII space) and surrogate code points; repr() escapes those.
bool py_isprintable(char32_t c) {
    if (c < 0x20 || (c >= 0x7F && c <= 0xA0)) return false;
    if (c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
        (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
        (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xD800 && c <= 0xDFFF) || (c >= 0x0600 && c <= 0x0605) ||
        c == 0x061C || c == 0x06DD || c == 0x070F || c == 0x180E) {
        return false;
    }
    return true;
}

void append_hex(std::string& out, uint32_t v, int digits) {
    static const char* hex = "0123456789abcdef";
    for (int k = digits - 1; k >= 0; --k) out += hex[(v >> (4 * k)) & 0xF];
}

}  // namespace

std::string py_repr_string(std::string_view s) {
    const bool has_single = s.find('\'') != std::string_view::npos;
    const bool has_double = s.find('"') != std::string_view::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (size_t i = 0; i < s.size();) {
        const char32_t c = decode_one(s, i);
        if (c == char32_t(quote) || c == U'\\') {
            out += '\\';
            out += char(c);
        } else if (c == U'\n') {
            out += "\\n";
        } else if (c == U'\r') {
            out += "\\r";
        } else if (c == U'\t') {
            out += "\\t";
        } else if (!py_isprintable(c)) {
            if (c < 0x100) out += "\\x", append_hex(out, c, 2);
            else if (c < 0x10000) out += "\\u", append_hex(out, c, 4);
            else out += "\\U", append_hex(out, c, 8);
        } else {
            utf8_append(out, c);
        }
    }
    out += quote;
    return out;
}

std::string py_repr_float(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
    const std::string sci(buf, res.ptr);  // "-1.2345e+17", "5e-05"
    const size_t epos = sci.find('e');
    const bool negative = sci[0] == '-';
    std::string digits;
    for (size_t i = negative ? 1 : 0; i < epos; ++i) {
        if (sci[i] != '.') digits += sci[i];
    }
    const int exp = std::stoi(sci.substr(epos + 1));
    std::string out = negative ? "-" : "";
    if (exp >= -4 && exp < 16) {  // fixed notation, as Python's repr
        if (exp >= 0) {
            const size_t int_len = size_t(exp) + 1;
            if (digits.size() <= int_len) {
                out += digits + std::string(int_len - digits.size(), '0') + ".0";
            } else {
                out += digits.substr(0, int_len) + "." + digits.substr(int_len);
            }
        } else {
            out.append("0.").append(size_t(-exp - 1), '0').append(digits);
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + ebuf;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
    std::string out = "\"";
    for (size_t i = 0; i < s.size();) {
        const auto byte = static_cast<unsigned char>(s[i]);
        if (byte >= 0x80) {
            if (!ensure_ascii) {  // copy the whole sequence
                const size_t start = i;
                decode_one(s, i);
                out.append(s.substr(start, i - start));
            } else {
                const char32_t c = decode_one(s, i);
                if (c >= 0x10000) {
                    const char32_t v = c - 0x10000;
                    out += "\\u", append_hex(out, 0xD800 + (v >> 10), 4);
                    out += "\\u", append_hex(out, 0xDC00 + (v & 0x3FF), 4);
                } else {
                    out += "\\u", append_hex(out, c, 4);
                }
            }
            continue;
        }
        ++i;
        switch (byte) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (byte < 0x20) out += "\\u", append_hex(out, byte, 4);
                else out += char(byte);
        }
    }
    out += '"';
    return out;
}

}  // namespace lantern::jinja
