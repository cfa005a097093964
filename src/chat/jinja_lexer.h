// Jinja lexer with the whitespace rules of jinja2 under trim_blocks=True and
// lstrip_blocks=True (Hugging Face's settings):
//   - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` /
//     `-#}` all whitespace after it;
//   - trim_blocks: the first newline after a block or comment tag is removed
//     (`+%}` keeps it);
//   - lstrip_blocks: spaces and tabs from the start of a line up to a block or
//     comment tag are removed (`{%+` keeps them);
//   - a single newline at the very end of the template is removed
//     (keep_trailing_newline=False); \r\n and \r in text become \n.
// `{% raw %}...{% endraw %}` comes out as one text token.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lantern::jinja {

enum class TokenKind {
    Text,        // template data between tags
    VarBegin,    // {{
    VarEnd,      // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,        // identifiers and keywords (if, and, true, ...)
    String,      // a string literal, escapes decoded
    Int,
    Float,
    Op,          // operators and punctuation: + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } . : | ,
    Eof,
};

struct Token {
    TokenKind kind;
    std::string text;  // text, name, decoded string, number or operator
    int line;
    int column;
};

// Throws RenderError (located) on an unterminated tag, comment or string, or a
// character that starts no token.
std::vector<Token> tokenize(std::string_view source);

const char* token_kind_name(TokenKind kind);

}  // namespace lantern::jinja
