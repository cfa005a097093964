// Regex compiler: a pattern (regex.h's dialect) is parsed into a small AST,
// then emitted as a program for the backtracking matcher in regex.cpp.
#include <algorithm>

#include "lantern/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace lantern::tok {

using unicode::Category;

class RegexCompiler {
public:
    RegexCompiler(std::string_view pattern, Regex& re) : re_(re) {
        size_t pos = 0;
        while (pos < pattern.size()) {
            uint32_t cp = 0;
            const size_t len = unicode::decode_utf8(pattern, pos, cp);
            if (cp >= 0xDC00 && cp <= 0xDCFF && len == 1 && static_cast<uint8_t>(pattern[pos]) >= 0x80) {
                fail_at(pos, "invalid UTF-8");
            }
            src_.push_back(cp);
            pos += len;
        }
    }

    void compile() {
        const int root = parse_alt();
        if (pos_ < src_.size()) fail("unbalanced ')'");
        emit(root);
        re_.prog_.push_back({Regex::Op::Match});
    }

private:
    enum class Kind { Empty, Char, Class, Concat, Alt, Repeat, Look, NegLook, Atomic, Assert };
    struct Node {
        Kind kind;
        uint32_t value = 0;    // Char: codepoint; Class: index; Assert: Op
        int min = 0, max = 0;  // Repeat; max < 0 = unbounded
        bool greedy = true;
        std::vector<int> kids;

        explicit Node(Kind k, uint32_t v = 0) : kind(k), value(v) {}
        Node(Kind k, std::vector<int> children) : kind(k), kids(std::move(children)) {}
        static Node repeat(int child, int lo, int hi, bool is_greedy) {
            Node n(Kind::Repeat, std::vector<int>{child});
            n.min = lo, n.max = hi, n.greedy = is_greedy;
            return n;
        }
    };
    using CharClass = Regex::CharClass;
    using Op = Regex::Op;

    [[noreturn]] void fail_at(size_t offset, const std::string& what) const {
        throw Error(ErrorCode::InvalidArgument, "regex '" + re_.pattern_ + "': " + what +
                                                    " at offset " + std::to_string(offset));
    }
    [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

    bool at_end() const { return pos_ >= src_.size(); }
    uint32_t peek(size_t ahead = 0) const {
        return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : 0xFFFFFFFFu;
    }
    uint32_t next() {
        if (at_end()) fail("unexpected end of pattern");
        return src_[pos_++];
    }
    bool consume(uint32_t c) {
        if (peek() != c) return false;
        ++pos_;
        return true;
    }

    int add(Node n) {
        nodes_.push_back(std::move(n));
        return static_cast<int>(nodes_.size() - 1);
    }
    int add_class(CharClass c) {
        std::sort(c.ranges.begin(), c.ranges.end());
        std::vector<std::pair<uint32_t, uint32_t>> merged;
        for (const auto& r : c.ranges) {
            if (!merged.empty() && r.first <= merged.back().second + 1) {
                merged.back().second = std::max(merged.back().second, r.second);
            } else {
                merged.push_back(r);
            }
        }
        c.ranges = std::move(merged);
        re_.classes_.push_back(std::move(c));
        return add(Node(Kind::Class, static_cast<uint32_t>(re_.classes_.size() - 1)));
    }

    // --- parsing ---

    int parse_alt() {
        std::vector<int> alts{parse_concat()};
        while (consume('|')) alts.push_back(parse_concat());
        if (alts.size() == 1) return alts[0];
        return add(Node(Kind::Alt, std::move(alts)));
    }

    int parse_concat() {
        std::vector<int> items;
        while (!at_end() && peek() != '|' && peek() != ')') {
            const int n = parse_repeat();
            if (n >= 0) items.push_back(n);
        }
        if (items.size() == 1) return items[0];
        if (items.empty()) return add(Node(Kind::Empty));
        return add(Node(Kind::Concat, std::move(items)));
    }

    bool parse_number(int& out) {
        if (peek() < '0' || peek() > '9') return false;
        long v = 0;
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + static_cast<long>(next() - '0');
            if (v > 100000) fail("repeat count too large");
        }
        out = static_cast<int>(v);
        return true;
    }

    // {n}, {n,}, {n,m}; leaves pos_ unchanged and returns false when the brace
    // is not a quantifier (then it is a literal, as in Oniguruma).
    bool parse_braces(int& min, int& max) {
        const size_t save = pos_;
        ++pos_;  // '{'
        if (!parse_number(min)) {
            pos_ = save;
            return false;
        }
        max = min;
        if (consume(',')) {
            if (!parse_number(max)) max = -1;
        }
        if (!consume('}')) {
            pos_ = save;
            return false;
        }
        if (max >= 0 && max < min) fail("repeat range {n,m} with m < n");
        return true;
    }

    int parse_repeat() {
        int atom = parse_atom();
        if (atom < 0) return atom;
        for (;;) {
            int min = 0, max = 0;
            const uint32_t c = peek();
            if (c == '?') {
                ++pos_, min = 0, max = 1;
            } else if (c == '*') {
                ++pos_, min = 0, max = -1;
            } else if (c == '+') {
                ++pos_, min = 1, max = -1;
            } else if (c == '{' && parse_braces(min, max)) {
            } else {
                return atom;
            }
            bool greedy = true, possessive = false;
            if (consume('?')) {
                greedy = false;
            } else if (consume('+')) {
                possessive = true;
            }
            if (max < 0 && min_width(atom) == 0) fail("a repeated sub-pattern can match empty");
            atom = add(Node::repeat(atom, min, max, greedy));
            if (possessive) atom = add(Node(Kind::Atomic, std::vector<int>{atom}));
        }
    }

    // Returns -1 for an inline flag group "(?i)" that produces no node.
    int parse_atom() {
        const size_t start = pos_;
        const uint32_t c = next();
        switch (c) {
            case '(': return parse_group(start);
            case '[': return add_class(parse_class_body());
            case '.': {
                CharClass cls;
                cls.negated = true;
                cls.ranges.push_back({'\n', '\n'});
                return add_class(std::move(cls));
            }
            case '^': return add(Node(Kind::Assert, static_cast<uint32_t>(Op::LineBegin)));
            case '$': return add(Node(Kind::Assert, static_cast<uint32_t>(Op::LineEnd)));
            case '*':
            case '+':
            case '?': fail_at(start, "nothing to repeat");
            case '\\': {
                CharClass cls;
                uint32_t cp = 0;
                Op assertion = Op::Match;
                switch (parse_escape(false, cls, cp, assertion)) {
                    case Escape::Class: return add_class(std::move(cls));
                    case Escape::Assert: return add(Node(Kind::Assert, static_cast<uint32_t>(assertion)));
                    case Escape::Char: return literal(cp);
                }
                return -1;
            }
            default: return literal(c);
        }
    }

    int literal(uint32_t cp) {
        if (ci_) {
            CharClass cls;
            add_range_ci(cls, cp, cp);
            if (cls.ranges.size() > 1) return add_class(std::move(cls));
        }
        return add(Node(Kind::Char, cp));
    }

    int parse_group(size_t start) {
        Kind kind = Kind::Concat;  // plain group
        const bool saved_ci = ci_;
        if (consume('?')) {
            const uint32_t c = next();
            if (c == ':') {
            } else if (c == '=') {
                kind = Kind::Look;
            } else if (c == '!') {
                kind = Kind::NegLook;
            } else if (c == '>') {
                kind = Kind::Atomic;
            } else if (c == '<') {
                fail_at(start, "lookbehind and named groups are not supported");
            } else if (c == 'i' || c == '-') {
                bool on = true;
                uint32_t f = c;
                for (;;) {
                    if (f == '-') {
                        on = false;
                    } else if (f == 'i') {
                        ci_ = on;
                    } else {
                        fail_at(start, "unsupported inline flag");
                    }
                    f = next();
                    if (f == ')') return -1;  // (?i): to the end of the enclosing group
                    if (f == ':') break;
                }
            } else {
                fail_at(start, "unsupported group syntax");
            }
        }
        const int inner = parse_alt();
        if (!consume(')')) fail_at(start, "unterminated group");
        ci_ = saved_ci;
        if (kind == Kind::Concat) return inner;
        return add(Node(kind, std::vector<int>{inner}));
    }

    enum class Escape { Char, Class, Assert };

    uint32_t parse_hex(size_t digits_min, size_t digits_max, bool braced) {
        uint32_t v = 0;
        size_t n = 0;
        while (n < digits_max && !at_end()) {
            const uint32_t c = peek();
            uint32_t d;
            if (c >= '0' && c <= '9') {
                d = c - '0';
            } else if (c >= 'a' && c <= 'f') {
                d = c - 'a' + 10;
            } else if (c >= 'A' && c <= 'F') {
                d = c - 'A' + 10;
            } else {
                break;
            }
            v = v * 16 + d;
            ++pos_, ++n;
        }
        if (n < digits_min) fail("bad hex escape");
        if (braced && !consume('}')) fail("unterminated \\x{...}");
        if (v > 0x10FFFF) fail("codepoint out of range");
        return v;
    }

    static uint32_t property_mask(const std::string& name) {
        using namespace unicode;
        struct Entry {
            const char* name;
            uint32_t mask;
        };
        static const Entry kNames[] = {
            {"L", kLetterMask}, {"Letter", kLetterMask},
            {"L&", bit(Category::Lu) | bit(Category::Ll) | bit(Category::Lt)},
            {"LC", bit(Category::Lu) | bit(Category::Ll) | bit(Category::Lt)},
            {"Lu", bit(Category::Lu)}, {"Ll", bit(Category::Ll)}, {"Lt", bit(Category::Lt)},
            {"Lm", bit(Category::Lm)}, {"Lo", bit(Category::Lo)},
            {"M", kMarkMask}, {"Mark", kMarkMask},
            {"Mn", bit(Category::Mn)}, {"Mc", bit(Category::Mc)}, {"Me", bit(Category::Me)},
            {"N", kNumberMask}, {"Number", kNumberMask},
            {"Nd", bit(Category::Nd)}, {"Nl", bit(Category::Nl)}, {"No", bit(Category::No)},
            {"P", kPunctMask}, {"Punctuation", kPunctMask},
            {"Pc", bit(Category::Pc)}, {"Pd", bit(Category::Pd)}, {"Ps", bit(Category::Ps)},
            {"Pe", bit(Category::Pe)}, {"Pi", bit(Category::Pi)}, {"Pf", bit(Category::Pf)},
            {"Po", bit(Category::Po)},
            {"S", kSymbolMask}, {"Symbol", kSymbolMask},
            {"Sm", bit(Category::Sm)}, {"Sc", bit(Category::Sc)}, {"Sk", bit(Category::Sk)},
            {"So", bit(Category::So)},
            {"Z", kSeparatorMask}, {"Separator", kSeparatorMask},
            {"Zs", bit(Category::Zs)}, {"Zl", bit(Category::Zl)}, {"Zp", bit(Category::Zp)},
            {"C", kOtherMask}, {"Other", kOtherMask},
            {"Cc", bit(Category::Cc)}, {"Cf", bit(Category::Cf)}, {"Cs", bit(Category::Cs)},
            {"Co", bit(Category::Co)}, {"Cn", bit(Category::Cn)},
        };
        for (const Entry& e : kNames) {
            if (name == e.name) return e.mask;
        }
        return 0;
    }

    // After the backslash. Fills `cls` (Escape::Class), `cp` (Escape::Char) or
    // `assertion` (Escape::Assert, only outside classes).
    Escape parse_escape(bool in_class, CharClass& cls, uint32_t& cp, Op& assertion) {
        const size_t start = pos_ - 1;
        const uint32_t c = next();
        auto prop_class = [&](uint32_t mask, bool negated) {
            cls = CharClass{};
            cls.any_props = mask;
            cls.negated = negated;
            return Escape::Class;
        };
        using namespace unicode;
        switch (c) {
            case 's': return prop_class(kWhiteSpaceBit, false);
            case 'S': return prop_class(kWhiteSpaceBit, true);
            case 'd': return prop_class(bit(Category::Nd), false);
            case 'D': return prop_class(bit(Category::Nd), true);
            case 'w': return prop_class(kLetterMask | kMarkMask | bit(Category::Nd) | bit(Category::Pc), false);
            case 'W': return prop_class(kLetterMask | kMarkMask | bit(Category::Nd) | bit(Category::Pc), true);
            case 'p':
            case 'P': {
                bool negated = c == 'P';
                std::string name;
                if (consume('{')) {
                    if (consume('^')) negated = !negated;
                    while (!at_end() && peek() != '}') name.push_back(static_cast<char>(next()));
                    if (!consume('}')) fail_at(start, "unterminated \\p{...}");
                } else {
                    name.push_back(static_cast<char>(next()));
                }
                const uint32_t mask = property_mask(name);
                if (mask == 0) fail_at(start, "unsupported property \\p{" + name + "}");
                return prop_class(mask, negated);
            }
            case 'r': cp = '\r'; return Escape::Char;
            case 'n': cp = '\n'; return Escape::Char;
            case 't': cp = '\t'; return Escape::Char;
            case 'f': cp = '\f'; return Escape::Char;
            case 'v': cp = '\v'; return Escape::Char;
            case 'e': cp = 0x1B; return Escape::Char;
            case 'a': cp = 0x07; return Escape::Char;
            case '0': cp = 0; return Escape::Char;
            case 'x':
                cp = consume('{') ? parse_hex(1, 8, true) : parse_hex(1, 2, false);
                return Escape::Char;
            case 'u': cp = parse_hex(4, 4, false); return Escape::Char;
            case 'U': cp = parse_hex(8, 8, false); return Escape::Char;
            case 'A':
            case 'z':
            case 'Z':
                if (in_class) fail_at(start, "anchor inside a class");
                assertion = c == 'A' ? Op::TextBegin : c == 'z' ? Op::TextEnd : Op::TextEndNl;
                return Escape::Assert;
            default: break;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9')) {
            fail_at(start, std::string("unsupported escape \\") + static_cast<char>(c));
        }
        cp = c;  // escaped punctuation or any other character
        return Escape::Char;
    }

    void add_range_ci(CharClass& cls, uint32_t lo, uint32_t hi) {
        cls.ranges.push_back({lo, hi});
        if (!ci_) return;
        auto add_shifted = [&](uint32_t a, uint32_t b, int shift) {
            const uint32_t l = std::max(lo, a), h = std::min(hi, b);
            if (l <= h) cls.ranges.push_back({l + shift, h + shift});
        };
        add_shifted('a', 'z', -32);
        add_shifted('A', 'Z', 32);
        for (uint32_t letter = 'a'; letter <= 'z'; ++letter) {
            const bool covered = (letter >= lo && letter <= hi) ||
                                 (letter - 32 >= lo && letter - 32 <= hi);
            if (!covered) continue;
            for (uint32_t special : {0x017Fu, 0x212Au}) {
                if (static_cast<uint32_t>(unicode::fold_to_ascii(special)) == letter) {
                    cls.ranges.push_back({special, special});
                }
            }
        }
    }

    // Merges an escape's or nested class's set into `into` (a union).
    void merge_into(CharClass& into, const CharClass& part, size_t at) {
        if (part.negated) {
            if (!part.ranges.empty() || !part.lacks_props.empty()) {
                fail_at(at, "negated class with ranges inside a class is not supported");
            }
            into.lacks_props.push_back(part.any_props);
            return;
        }
        into.any_props |= part.any_props;
        into.lacks_props.insert(into.lacks_props.end(), part.lacks_props.begin(), part.lacks_props.end());
        into.ranges.insert(into.ranges.end(), part.ranges.begin(), part.ranges.end());
    }

    // After '['.
    CharClass parse_class_body() {
        const size_t start = pos_ - 1;
        CharClass cls;
        cls.negated = consume('^');
        bool first = true;
        for (;;) {
            if (at_end()) fail_at(start, "unterminated class");
            const size_t item_at = pos_;
            uint32_t c = next();
            if (c == ']' && !first) break;
            first = false;
            if (c == '[') {
                merge_into(cls, parse_class_body(), item_at);
                continue;
            }
            if (c == '\\') {
                CharClass esc;
                Op unused = Op::Match;
                if (parse_escape(true, esc, c, unused) == Escape::Class) {
                    merge_into(cls, esc, item_at);
                    continue;
                }
            }
            uint32_t hi = c;
            if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
                ++pos_;
                hi = next();
                if (hi == '\\') {
                    CharClass esc;
                    Op unused = Op::Match;
                    if (parse_escape(true, esc, hi, unused) == Escape::Class) {
                        fail_at(item_at, "class escape as a range end");
                    }
                } else if (hi == '[') {
                    fail_at(item_at, "'[' as a range end");
                }
                if (hi < c) fail_at(item_at, "reversed range in class");
            }
            add_range_ci(cls, c, hi);
        }
        return cls;
    }

    // --- code generation ---

    int min_width(int n) const {
        const Node& node = nodes_[n];
        switch (node.kind) {
            case Kind::Char:
            case Kind::Class: return 1;
            case Kind::Concat: {
                int w = 0;
                for (int k : node.kids) w += min_width(k);
                return w;
            }
            case Kind::Alt: {
                int w = min_width(node.kids[0]);
                for (int k : node.kids) w = std::min(w, min_width(k));
                return w;
            }
            case Kind::Repeat: return node.min * min_width(node.kids[0]);
            case Kind::Atomic: return min_width(node.kids[0]);
            default: return 0;
        }
    }

    uint32_t here() const { return static_cast<uint32_t>(re_.prog_.size()); }
    uint32_t push(Op op, uint32_t a = 0) {
        re_.prog_.push_back({op, a, 0, 0});
        return here() - 1;
    }

    void emit(int n) {
        // Copy what is needed: nodes_ does not change here, but keep indices.
        const Kind kind = nodes_[n].kind;
        auto& prog = re_.prog_;
        switch (kind) {
            case Kind::Empty: return;
            case Kind::Char: push(Op::Char, nodes_[n].value); return;
            case Kind::Class: push(Op::Class, nodes_[n].value); return;
            case Kind::Assert: push(static_cast<Op>(nodes_[n].value)); return;
            case Kind::Concat:
                for (int k : nodes_[n].kids) emit(k);
                return;
            case Kind::Alt: {
                const std::vector<int> kids = nodes_[n].kids;
                std::vector<uint32_t> jumps;
                for (size_t i = 0; i + 1 < kids.size(); ++i) {
                    const uint32_t split = push(Op::Split);
                    prog[split].x = here();
                    emit(kids[i]);
                    jumps.push_back(push(Op::Jmp));
                    prog[split].y = here();
                }
                emit(kids.back());
                for (uint32_t j : jumps) prog[j].x = here();
                return;
            }
            case Kind::Repeat: {
                const Node node = nodes_[n];
                const int kid = node.kids[0];
                for (int i = 0; i < node.min; ++i) emit(kid);
                if (node.max < 0) {
                    const uint32_t split = push(Op::Split);
                    emit(kid);
                    const uint32_t jmp = push(Op::Jmp);
                    prog[jmp].x = split;
                    const uint32_t body = split + 1, end = here();
                    prog[split].x = node.greedy ? body : end;
                    prog[split].y = node.greedy ? end : body;
                } else {
                    std::vector<uint32_t> splits;
                    for (int i = node.min; i < node.max; ++i) {
                        splits.push_back(push(Op::Split));
                        emit(kid);
                    }
                    const uint32_t end = here();
                    for (uint32_t s : splits) {
                        prog[s].x = node.greedy ? s + 1 : end;
                        prog[s].y = node.greedy ? end : s + 1;
                    }
                }
                return;
            }
            case Kind::Look:
            case Kind::NegLook:
            case Kind::Atomic: {
                const Op op = kind == Kind::Look      ? Op::LookAhead
                              : kind == Kind::NegLook ? Op::NegLookAhead
                                                      : Op::Atomic;
                const uint32_t head = push(op);
                emit(nodes_[n].kids[0]);
                push(Op::SubMatch);
                prog[head].x = here();
                return;
            }
        }
    }

    Regex& re_;
    std::vector<uint32_t> src_;
    size_t pos_ = 0;
    bool ci_ = false;
    std::vector<Node> nodes_;
};

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
    RegexCompiler(pattern, *this).compile();
}

}  // namespace lantern::tok
