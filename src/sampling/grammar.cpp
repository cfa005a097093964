#include "sampling/grammar.h"

#include <algorithm>
#include <map>

#include "lantern/error.h"

namespace lantern {

bool Grammar::CharSet::contains(uint32_t c) const { return overlaps(c, c); }

bool Grammar::CharSet::overlaps(uint32_t lo, uint32_t hi) const {
    // The first range that does not end before lo.
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) { return r.second < v; });
    return it != ranges.end() && it->first <= hi;
}

namespace {

using Element = Grammar::Element;
using Seq = std::vector<Element>;
using Alts = std::vector<Seq>;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalized(Ranges r, bool negate) {
    std::sort(r.begin(), r.end());
    Ranges out;
    for (const auto& [lo, hi] : r) {
        if (!out.empty() && lo <= out.back().second + 1) {
            out.back().second = std::max(out.back().second, hi);
        } else {
            out.emplace_back(lo, hi);
        }
    }
    if (!negate) return out;
    Ranges inv;
    uint32_t next = 0;
    for (const auto& [lo, hi] : out) {
        if (lo > next) inv.emplace_back(next, lo - 1);
        next = hi + 1;
    }
    if (next <= Grammar::kMaxCodePoint) inv.emplace_back(next, Grammar::kMaxCodePoint);
    return inv;
}

bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

}  // namespace

// Reads the text into rules of alternatives, then flattens them into a Grammar.
class GrammarCompiler {
public:
    explicit GrammarCompiler(std::string_view text) : s_(text) {}

    std::shared_ptr<const Grammar> compile() {
        skip_space(true);
        while (p_ < s_.size()) {
            rule();
            skip_space(true);
        }
        for (size_t r = 0; r < names_.size(); ++r) {
            if (!defined_[r]) fail(first_use_[r], "rule '" + names_[r] + "' is used but not defined");
        }
        const auto root = ids_.find("root");
        if (root == ids_.end()) throw Error(ErrorCode::InvalidArgument, "grammar: no 'root' rule");
        check_left_recursion();
        return flatten(root->second);
    }

private:
    [[noreturn]] void fail(size_t at, const std::string& what) const {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at && i < s_.size(); ++i) {
            if (s_[i] == '\n') {
                ++line, col = 1;
            } else {
                ++col;
            }
        }
        throw Error(ErrorCode::InvalidArgument,
                    "grammar: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
    }

    char peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
    bool at_end() const { return p_ >= s_.size(); }

    // Spaces, tabs and comments; line ends too where a rule goes on.
    void skip_space(bool newlines) {
        while (!at_end()) {
            const char c = s_[p_];
            if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
                ++p_;
            } else if (c == '#') {
                while (!at_end() && s_[p_] != '\n') ++p_;
            } else {
                break;
            }
        }
    }

    std::string name() {
        const size_t start = p_;
        while (!at_end() && word_char(s_[p_])) ++p_;
        return std::string(s_.substr(start, p_ - start));
    }

    uint32_t rule_id(const std::string& n, size_t at) {
        const auto [it, added] = ids_.emplace(n, static_cast<uint32_t>(names_.size()));
        if (added) {
            names_.push_back(n);
            rules_.emplace_back();
            defined_.push_back(false);
            first_use_.push_back(at);
            origin_.push_back(it->second);
        }
        return it->second;
    }

    // Every element stored counts against kMaxElements.
    void count_in(const Alts& alts) {
        for (const Seq& s : alts) elements_ += s.size() + 1;
        if (elements_ > Grammar::kMaxElements) too_large();
    }
    [[noreturn]] void too_large() const {
        throw Error(ErrorCode::InvalidArgument, "grammar: more than " + std::to_string(Grammar::kMaxElements) +
                                                    " elements once its repetitions are written out");
    }

    // A helper rule for a group or a repetition inside rule `owner_`.
    uint32_t helper(Alts alts) {
        count_in(alts);
        const auto id = static_cast<uint32_t>(names_.size());
        names_.push_back(names_[owner_] + "#" + std::to_string(id));
        rules_.push_back(std::move(alts));
        defined_.push_back(true);
        first_use_.push_back(p_);
        origin_.push_back(owner_);
        return id;
    }

    uint32_t set_of(Ranges r, bool negate) {
        sets_.push_back(Grammar::CharSet{normalized(std::move(r), negate)});
        return static_cast<uint32_t>(sets_.size() - 1);
    }
    static Element chars(uint32_t set) { return {Element::Kind::Chars, set}; }
    static Element ref(uint32_t rule) { return {Element::Kind::Ref, rule}; }

    // An escape's hex digits; errors point at the escape (`at`).
    uint32_t hex(size_t at, size_t digits) {
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i) {
            const char c = peek();
            int d = -1;
            if (c >= '0' && c <= '9') d = c - '0';
            if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
            if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
            if (d < 0) fail(at, "expected " + std::to_string(digits) + " hex digits");
            v = v * 16 + static_cast<uint32_t>(d);
            ++p_;
        }
        if (v > Grammar::kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail(at, "not a character");
        return v;
    }

    // One character of a literal or a class: an escape, or UTF-8.
    uint32_t character() {
        const size_t at = p_;
        const auto b = static_cast<unsigned char>(s_[p_++]);
        if (b == '\\') {
            if (at_end()) fail(at, "an escape at the end of the grammar");
            const char e = s_[p_++];
            switch (e) {
                case 'n': return '\n';
                case 'r': return '\r';
                case 't': return '\t';
                case '0': return 0;
                case 'x': return hex(at, 2);
                case 'u': return hex(at, 4);
                case 'U': return hex(at, 8);
                case '\\': case '"': case '[': case ']': case '-': case '\'': case '^': return static_cast<uint32_t>(e);
                default: fail(at, std::string("unknown escape '\\") + e + "'");
            }
        }
        if (b < 0x80) return b;
        int more = 0;
        uint32_t c = 0;
        if (b >= 0xC2 && b <= 0xDF) {
            more = 1, c = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            more = 2, c = b & 0x0F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            more = 3, c = b & 0x07;
        } else {
            fail(at, "invalid UTF-8");
        }
        for (int i = 0; i < more; ++i) {
            const auto n = static_cast<unsigned char>(peek());
            if ((n & 0xC0) != 0x80) fail(at, "invalid UTF-8");
            c = (c << 6) | (n & 0x3F);
            ++p_;
        }
        static constexpr uint32_t kLeast[] = {0, 0x80, 0x800, 0x10000};
        if (c < kLeast[more] || c > Grammar::kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF)) fail(at, "invalid UTF-8");
        return c;
    }

    Seq literal() {
        const size_t at = p_++;
        Seq seq;
        while (peek() != '"') {
            if (at_end() || peek() == '\n') fail(at, "unterminated literal");
            const uint32_t c = character();
            seq.push_back(chars(set_of({{c, c}}, false)));
        }
        ++p_;
        return seq;
    }

    Element char_class() {
        const size_t at = p_++;
        const bool negate = peek() == '^';
        if (negate) ++p_;
        Ranges r;
        while (peek() != ']') {
            if (at_end() || peek() == '\n') fail(at, "unterminated character class");
            const uint32_t lo = character();
            uint32_t hi = lo;
            if (peek() == '-' && p_ + 1 < s_.size() && s_[p_ + 1] != ']') {
                ++p_;
                hi = character();
                if (hi < lo) fail(at, "a range's end comes before its start");
            }
            r.emplace_back(lo, hi);
        }
        ++p_;
        return chars(set_of(std::move(r), negate));
    }

    // The elements of one item in a single element, for repeating it.
    Element one(Seq item) {
        if (item.size() == 1) return item[0];
        return ref(helper({std::move(item)}));
    }

    int count() {
        const size_t at = p_;
        long v = 0;
        if (peek() < '0' || peek() > '9') fail(at, "expected a number");
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + (peek() - '0');
            ++p_;
            if (v > Grammar::kMaxRepeat) fail(at, "a repetition count over " + std::to_string(Grammar::kMaxRepeat));
        }
        return static_cast<int>(v);
    }

    // item{m,n}: m copies, then n - m optional ones nested (x (x (x)?)?)?,
    // or x* for no upper bound (n < 0).
    Seq repeat(const Seq& item, int m, int n) {
        Seq out;
        if (item.empty()) return out;
        if (item.size() * static_cast<size_t>(m) > Grammar::kMaxElements) too_large();
        for (int i = 0; i < m; ++i) out.insert(out.end(), item.begin(), item.end());
        if (n < 0) {
            const Element x = one(item);
            const auto id = static_cast<uint32_t>(names_.size());  // the helper's own id: x id | ""
            helper({{x, ref(id)}, {}});
            out.push_back(ref(id));
            return out;
        }
        if (n > m) {
            const Element x = one(item);
            Seq tail;  // what may follow the innermost copy: nothing
            for (int i = 0; i < n - m; ++i) {
                Seq first = {x};
                first.insert(first.end(), tail.begin(), tail.end());
                tail = {ref(helper({std::move(first), {}}))};
            }
            out.insert(out.end(), tail.begin(), tail.end());
        }
        return out;
    }

    Seq sequence(bool nested) {
        Seq seq;
        for (;;) {
            const size_t at = p_;
            const char c = peek();
            Seq item;
            if (c == '"') {
                item = literal();
            } else if (c == '[') {
                item = {char_class()};
            } else if (c == '.') {
                ++p_;
                item = {chars(set_of({{0, Grammar::kMaxCodePoint}}, false))};
            } else if (word_char(c)) {
                const std::string n = name();
                item = {ref(rule_id(n, at))};
            } else if (c == '(') {
                if (++depth_ > Grammar::kMaxNesting) {
                    fail(p_, "groups nested deeper than " + std::to_string(Grammar::kMaxNesting));
                }
                ++p_;
                skip_space(true);
                Alts alts = alternatives(true);
                if (peek() != ')') fail(p_, "expected ')'");
                ++p_;
                --depth_;
                item = {ref(helper(std::move(alts)))};
            } else {
                break;
            }
            skip_space(nested);
            const char q = peek();
            if (q == '*' || q == '+' || q == '?') {
                ++p_;
                item = repeat(item, q == '+' ? 1 : 0, q == '?' ? 1 : -1);
                skip_space(nested);
            } else if (q == '{') {
                const size_t brace = p_++;
                skip_space(nested);
                const int m = count();
                skip_space(nested);
                int n = m;
                if (peek() == ',') {
                    ++p_;
                    skip_space(nested);
                    n = peek() == '}' ? -1 : count();
                    skip_space(nested);
                }
                if (peek() != '}') fail(p_, "expected '}'");
                ++p_;
                if (n >= 0 && n < m) fail(brace, "a repetition's most is below its least");
                item = repeat(item, m, n);
                skip_space(nested);
            }
            seq.insert(seq.end(), item.begin(), item.end());
            if (seq.size() > Grammar::kMaxElements) too_large();
        }
        return seq;
    }

    Alts alternatives(bool nested) {
        Alts alts;
        alts.push_back(sequence(nested));
        while (peek() == '|') {
            ++p_;
            skip_space(true);
            alts.push_back(sequence(nested));
        }
        return alts;
    }

    void rule() {
        const size_t at = p_;
        const std::string n = name();
        if (n.empty()) fail(at, "expected a rule name");
        skip_space(false);
        if (s_.substr(p_, 3) != "::=") fail(p_, "expected '::='");
        p_ += 3;
        skip_space(true);
        const uint32_t id = rule_id(n, at);
        if (defined_[id]) fail(at, "rule '" + n + "' is defined twice");
        defined_[id] = true;
        owner_ = id;
        Alts alts = alternatives(false);
        count_in(alts);
        rules_[id] = std::move(alts);
        if (!at_end() && peek() != '\n' && peek() != '\r') fail(p_, std::string("unexpected '") + peek() + "'");
    }

    // A rule that can reach itself before reading a character would make a
    // parse stack expand for ever.
    void check_left_recursion() const {
        const size_t n = rules_.size();
        std::vector<bool> nullable(n, false);
        for (bool changed = true; changed;) {
            changed = false;
            for (size_t r = 0; r < n; ++r) {
                if (nullable[r]) continue;
                for (const Seq& alt : rules_[r]) {
                    const bool empty = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
                        return e.kind == Element::Kind::Ref && nullable[e.index];
                    });
                    if (empty) {
                        nullable[r] = changed = true;
                        break;
                    }
                }
            }
        }
        // first[r]: the rules r may expand into before reading anything.
        std::vector<std::vector<uint32_t>> first(n);
        for (size_t r = 0; r < n; ++r) {
            for (const Seq& alt : rules_[r]) {
                for (const Element& e : alt) {
                    if (e.kind != Element::Kind::Ref) break;
                    first[r].push_back(e.index);
                    if (!nullable[e.index]) break;
                }
            }
        }
        std::vector<uint8_t> mark(n, 0);  // 1: on the path, 2: done
        std::vector<std::pair<uint32_t, size_t>> path;
        for (uint32_t start = 0; start < n; ++start) {
            if (mark[start]) continue;
            path.emplace_back(start, 0);
            mark[start] = 1;
            while (!path.empty()) {
                auto& [r, i] = path.back();
                if (i == first[r].size()) {
                    mark[r] = 2;
                    path.pop_back();
                    continue;
                }
                const uint32_t q = first[r][i++];
                if (mark[q] == 1) {
                    throw Error(ErrorCode::InvalidArgument,
                                "grammar: rule '" + names_[origin_[q]] +
                                    "' can reach itself before reading a character (left recursion, or a repetition "
                                    "of something that can be empty)");
                }
                if (mark[q] == 0) {
                    mark[q] = 1;
                    path.emplace_back(q, 0);
                }
            }
        }
    }

    std::shared_ptr<const Grammar> flatten(uint32_t root) {
        std::shared_ptr<Grammar> g(new Grammar());
        g->sets_ = std::move(sets_);
        g->root_ = root;
        g->rules_.resize(rules_.size());
        for (size_t r = 0; r < rules_.size(); ++r) {
            for (const Seq& alt : rules_[r]) {
                g->rules_[r].push_back(static_cast<uint32_t>(g->elems_.size()));
                g->elems_.insert(g->elems_.end(), alt.begin(), alt.end());
                g->elems_.push_back(Element{});
            }
        }
        return g;
    }

    std::string_view s_;
    size_t p_ = 0;
    std::map<std::string, uint32_t, std::less<>> ids_;
    std::vector<std::string> names_;
    std::vector<Alts> rules_;
    std::vector<bool> defined_;
    std::vector<size_t> first_use_;
    std::vector<uint32_t> origin_;  // the named rule a helper was written in
    std::vector<Grammar::CharSet> sets_;
    uint32_t owner_ = 0;
    int depth_ = 0;         // groups open
    size_t elements_ = 0;   // stored in rules so far
};

std::shared_ptr<const Grammar> Grammar::parse(std::string_view text) { return GrammarCompiler(text).compile(); }

}  // namespace lantern
