#include "chat/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "chat/jinja_text.h"
#include "chat/jinja_value.h"

namespace lantern::jinja {

const char* token_kind_name(TokenKind kind) {
    switch (kind) {
        case TokenKind::Text: return "template data";
        case TokenKind::VarBegin: return "begin of print statement";
        case TokenKind::VarEnd: return "end of print statement";
        case TokenKind::BlockBegin: return "begin of statement block";
        case TokenKind::BlockEnd: return "end of statement block";
        case TokenKind::Name: return "name";
        case TokenKind::String: return "string";
        case TokenKind::Int: return "integer";
        case TokenKind::Float: return "float";
        case TokenKind::Op: return "operator";
        case TokenKind::Eof: return "end of template";
    }
    return "token";
}

namespace {

std::string normalize_newlines(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\r') {
            out += '\n';
            if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
        } else {
            out += s[i];
        }
    }
    return out;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
public:
    explicit Lexer(std::string_view src) : src_(src) {
        line_starts_.push_back(0);
        for (size_t i = 0; i < src.size(); ++i) {
            if (src[i] == '\n') line_starts_.push_back(i + 1);
        }
    }

    std::vector<Token> run() {
        bool line_starting = true;  // the text before the next tag starts a line
        while (pos_ < src_.size()) {
            const size_t tag = find_tag(pos_);
            std::string text(src_.substr(pos_, tag - pos_));
            if (tag == src_.size()) {
                emit_text(std::move(text), pos_);
                break;
            }
            const char kind = src_[tag + 1];  // '{', '%' or '#'
            const char sign = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
            if (sign == '-') {
                text = py_strip(text, std::nullopt, false, true);
            } else if (sign != '+' && kind != '{') {
                // lstrip_blocks: drop the whitespace between the line start and the tag.
                const size_t nl = text.rfind('\n');
                const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
                if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
                    std::all_of(text.begin() + std::ptrdiff_t(l_pos), text.end(), is_ws)) {
                    text.resize(l_pos);
                }
            }
            emit_text(std::move(text), pos_);
            pos_ = tag + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
            if (kind == '#') {
                line_starting = lex_comment(tag);
            } else if (kind == '%' && try_raw(tag)) {
                line_starting = last_end_newline_;
            } else {
                line_starting = lex_tag(kind == '{' ? TokenKind::VarBegin : TokenKind::BlockBegin, tag);
            }
        }
        auto [line, col] = where(src_.size());
        tokens_.push_back({TokenKind::Eof, "", line, col});
        return std::move(tokens_);
    }

private:
    std::pair<int, int> where(size_t offset) const {
        const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
        const size_t line = size_t(it - line_starts_.begin());
        return {int(line), int(offset - line_starts_[line - 1]) + 1};
    }

    [[noreturn]] void fail(size_t offset, const std::string& reason) const {
        RenderError err(reason);
        auto [line, col] = where(offset);
        err.locate(line, col);
        throw err;
    }

    size_t find_tag(size_t from) const {
        for (size_t i = from; i + 1 < src_.size(); ++i) {
            if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        }
        return src_.size();
    }

    void emit_text(std::string text, size_t offset) {
        if (text.empty()) return;
        auto [line, col] = where(offset);
        tokens_.push_back({TokenKind::Text, std::move(text), line, col});
    }

    void push(TokenKind kind, std::string text, size_t offset) {
        auto [line, col] = where(offset);
        tokens_.push_back({kind, std::move(text), line, col});
    }

    // After a tag's closing marker at pos_: `-` strips the following whitespace,
    // trim_blocks removes one newline after block and comment tags. Returns
    // whether what was consumed ended with a newline (the next text starts a line).
    bool after_tag_end(char sign, bool block_like) {
        bool newline = false;
        if (sign == '-') {
            while (pos_ < src_.size() && is_ws(src_[pos_])) newline = src_[pos_++] == '\n';
        } else if (sign != '+' && block_like && pos_ < src_.size() && src_[pos_] == '\n') {
            ++pos_;
            newline = true;
        }
        return newline;
    }

    bool lex_comment(size_t start) {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string_view::npos) fail(start, "Missing end of comment tag");
        const char sign = end > pos_ ? src_[end - 1] : '\0';
        pos_ = end + 2;
        return after_tag_end(sign == '-' || sign == '+' ? sign : '\0', true);
    }

    // `{% raw %}...{% endraw %}`: the body is text, tags and all.
    bool try_raw(size_t start) {
        size_t p = pos_;
        while (p < src_.size() && is_ws(src_[p])) ++p;
        if (src_.compare(p, 3, "raw") != 0 || (p + 3 < src_.size() && is_name_char(src_[p + 3]))) return false;
        p += 3;
        while (p < src_.size() && is_ws(src_[p])) ++p;
        char open_sign = '\0';
        if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) open_sign = src_[p++];
        if (src_.compare(p, 2, "%}") != 0) return false;
        pos_ = p + 2;
        after_tag_end(open_sign, true);
        // Find {%[-+]? endraw [-+]?%}
        for (size_t q = pos_; q + 1 < src_.size(); ++q) {
            if (src_[q] != '{' || src_[q + 1] != '%') continue;
            size_t r = q + 2;
            char close_lead = '\0';
            if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) close_lead = src_[r++];
            while (r < src_.size() && is_ws(src_[r])) ++r;
            if (src_.compare(r, 6, "endraw") != 0) continue;
            r += 6;
            while (r < src_.size() && is_ws(src_[r])) ++r;
            char close_sign = '\0';
            if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) close_sign = src_[r++];
            if (src_.compare(r, 2, "%}") != 0) continue;
            std::string body(src_.substr(pos_, q - pos_));
            if (close_lead == '-') body = py_strip(body, std::nullopt, false, true);
            emit_text(std::move(body), pos_);
            pos_ = r + 2;
            last_end_newline_ = after_tag_end(close_sign, true);
            return true;
        }
        fail(start, "Missing end of raw directive");
    }

    // Lexes the expression tokens of a {{ }} or {% %} tag up to its end marker.
    bool lex_tag(TokenKind begin, size_t start) {
        const bool block = begin == TokenKind::BlockBegin;
        const char close = block ? '%' : '}';
        push(begin, block ? "{%" : "{{", start);
        std::string open;  // unclosed ( [ { : an end marker inside them is an operator
        while (true) {
            while (pos_ < src_.size() && is_ws(src_[pos_])) ++pos_;
            if (pos_ >= src_.size()) {
                fail(start, block ? "Unexpected end of template: unclosed block tag '{%'"
                                  : "Unexpected end of template: unclosed variable tag '{{'");
            }
            if (open.empty()) {
                char sign = '\0';
                size_t p = pos_;
                if (src_[p] == '-' || (block && src_[p] == '+')) sign = src_[p++];
                if (p + 1 < src_.size() && src_[p] == close && src_[p + 1] == '}') {
                    push(block ? TokenKind::BlockEnd : TokenKind::VarEnd, block ? "%}" : "}}", pos_);
                    pos_ = p + 2;
                    return after_tag_end(sign, block);
                }
            }
            const char c = src_[pos_];
            if (is_name_start(c)) {
                const size_t b = pos_;
                while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
                push(TokenKind::Name, std::string(src_.substr(b, pos_ - b)), b);
            } else if (std::isdigit(static_cast<unsigned char>(c))) {
                lex_number();
            } else if (c == '\'' || c == '"') {
                lex_string();
            } else {
                static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%",
                                                   "~",  "[",  "]",  "(",  ")",  "{",  "}", ">", "<", "=", ".",
                                                   ":",  "|",  ",",  ";"};
                const char* op = nullptr;
                for (const char* candidate : kOps) {
                    if (src_.compare(pos_, std::char_traits<char>::length(candidate), candidate) == 0) {
                        op = candidate;
                        break;
                    }
                }
                if (!op) fail(pos_, std::string("unexpected char '") + c + "'");
                const std::string text(op);
                if (text == "(" || text == "[" || text == "{") open += text == "(" ? ')' : text == "[" ? ']' : '}';
                if (text == ")" || text == "]" || text == "}") {
                    if (open.empty()) fail(pos_, "unexpected '" + text + "'");
                    if (open.back() != text[0]) fail(pos_, "unexpected '" + text + "', expected '" + open.back() + "'");
                    open.pop_back();
                }
                push(TokenKind::Op, text, pos_);
                pos_ += text.size();
            }
        }
    }

    void lex_number() {
        const size_t b = pos_;
        auto digits = [&] {
            while (pos_ < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos_])) ||
                                          (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                           std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))))) {
                ++pos_;
            }
        };
        digits();
        bool is_float = false;
        if (pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
            ++pos_;
            digits();
            is_float = true;
        }
        if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
            size_t p = pos_ + 1;
            if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
            if (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) {
                pos_ = p;
                digits();
                is_float = true;
            }
        }
        std::string text(src_.substr(b, pos_ - b));
        text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
        push(is_float ? TokenKind::Float : TokenKind::Int, text, b);
    }

    // A string literal, decoded the way jinja2 does (Python's unicode-escape).
    void lex_string() {
        const size_t b = pos_;
        const char quote = src_[pos_++];
        std::string raw;
        while (true) {
            if (pos_ >= src_.size()) fail(b, "unexpected end of string: missing closing quote");
            const char c = src_[pos_];
            if (c == quote) {
                ++pos_;
                break;
            }
            if (c == '\\' && pos_ + 1 < src_.size()) {
                raw += c;
                raw += src_[pos_ + 1];
                pos_ += 2;
                continue;
            }
            raw += c;
            ++pos_;
        }
        std::string out;
        for (size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] != '\\' || i + 1 >= raw.size()) {
                out += raw[i];
                continue;
            }
            const char e = raw[++i];
            switch (e) {
                case '\n': break;  // line continuation
                case '\\': out += '\\'; break;
                case '\'': out += '\''; break;
                case '"': out += '"'; break;
                case 'a': out += '\a'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'v': out += '\v'; break;
                case 'x':
                case 'u':
                case 'U': {
                    const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    char32_t cp = 0;
                    if (i + n >= raw.size()) fail(b, "truncated \\" + std::string(1, e) + " escape in string");
                    for (size_t k = 1; k <= n; ++k) {
                        const int h = hex_value(raw[i + k]);
                        if (h < 0) fail(b, "truncated \\" + std::string(1, e) + " escape in string");
                        cp = cp * 16 + char32_t(h);
                    }
                    if (cp > 0x10FFFF) fail(b, "illegal Unicode character in string");
                    utf8_append(out, cp);
                    i += n;
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {  // up to three octal digits
                        char32_t cp = char32_t(e - '0');
                        for (int k = 0; k < 2 && i + 1 < raw.size() && raw[i + 1] >= '0' && raw[i + 1] <= '7'; ++k) {
                            cp = cp * 8 + char32_t(raw[++i] - '0');
                        }
                        utf8_append(out, cp);
                    } else {  // unknown escapes stay as written
                        out += '\\';
                        out += e;
                    }
            }
        }
        push(TokenKind::String, std::move(out), b);
    }

    std::string_view src_;
    size_t pos_ = 0;
    std::vector<size_t> line_starts_;
    std::vector<Token> tokens_;
    bool last_end_newline_ = false;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
    // As jinja2 does before lexing: every newline becomes \n, and with
    // keep_trailing_newline=False one final newline is dropped.
    std::string normalized = normalize_newlines(source);
    if (!normalized.empty() && normalized.back() == '\n') normalized.pop_back();
    return Lexer(normalized).run();
}

}  // namespace lantern::jinja
