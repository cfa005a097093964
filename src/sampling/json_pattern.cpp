#include "sampling/json_pattern.h"

#include <algorithm>
#include <bitset>
#include <string>

#include "lantern/error.h"

namespace lantern {
namespace {

// Calls f(q) for each state q of the set.
template <class F>
void each_state(uint64_t set, F f) {
    for (; set != 0; set &= set - 1) f(static_cast<size_t>(__builtin_ctzll(set)));
}

// The characters one position of the pattern takes.
struct CharSet {
    std::bitset<128> ascii;
    bool other = false;  // non-ASCII characters

    void add(unsigned char c) { ascii.set(c); }
    void add(const CharSet& o) {
        ascii |= o.ascii;
        other = other || o.other;
    }
    CharSet complement() const {
        CharSet r;
        r.ascii = ~ascii;
        r.other = !other;
        return r;
    }
};

// The pattern as a tree: a position's characters, or a sequence, a choice
// or a repetition (max < 0: unbounded) of subtrees.
struct Node {
    enum class Kind { Chars, Seq, Alt, Repeat } kind = Kind::Seq;
    CharSet chars;
    std::vector<Node> kids;
    int min = 0, max = 0;
};

constexpr int kMaxRepeat = 1000;
constexpr int kMaxGroups = 32;  // nesting

class Parser {
public:
    explicit Parser(std::string_view s) : s_(s) {}

    // The pattern between its anchors; whether it had them.
    Node parse(bool& anchored_start, bool& anchored_end) {
        size_t end = s_.size();
        anchored_start = !s_.empty() && s_[0] == '^';
        size_t slashes = 0;  // backslashes before a final '$': an even count leaves it an anchor
        while (end >= 2 + slashes && s_[end - 2 - slashes] == '\\') ++slashes;
        anchored_end = end > (anchored_start ? 1u : 0u) && s_[end - 1] == '$' && slashes % 2 == 0;
        if (anchored_end) --end;
        i_ = anchored_start ? 1 : 0;
        s_ = s_.substr(0, end);
        Node n = alt(0);
        if (i_ < s_.size()) fail("')' without its '('");
        return n;
    }

private:
    [[noreturn]] void fail(const std::string& why) const {
        throw Error(ErrorCode::InvalidArgument, "pattern: " + why + " (at character " + std::to_string(i_ + 1) + ")");
    }
    bool more() const { return i_ < s_.size(); }
    char peek() const { return s_[i_]; }

    Node alt(int depth) {
        Node first = seq(depth);
        if (!more() || peek() != '|') return first;
        Node n;
        n.kind = Node::Kind::Alt;
        n.kids.push_back(std::move(first));
        while (more() && peek() == '|') {
            ++i_;
            n.kids.push_back(seq(depth));
        }
        return n;
    }

    Node seq(int depth) {
        Node n;
        while (more() && peek() != '|' && peek() != ')') {
            Node a = atom(depth);
            int min = 0, max = 0;
            if (quantifier(min, max)) {
                Node r;
                r.kind = Node::Kind::Repeat;
                r.min = min, r.max = max;
                r.kids.push_back(std::move(a));
                a = std::move(r);
            }
            n.kids.push_back(std::move(a));
        }
        return n;
    }

    // *, +, ?, {n}, {n,}, {n,m}, each maybe lazy; false (nothing read) if none.
    bool quantifier(int& min, int& max) {
        if (!more()) return false;
        const char c = peek();
        if (c == '*' || c == '+' || c == '?') {
            min = c == '+' ? 1 : 0;
            max = c == '?' ? 1 : -1;
            ++i_;
        } else if (c != '{' || !braces(min, max)) {
            return false;
        }
        if (more() && peek() == '?') ++i_;
        if (more() && (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && braces_ahead()))) {
            fail("a quantifier after a quantifier");
        }
        return true;
    }

    // {n}, {n,} or {n,m} at i_ (consumed); false, nothing consumed, if the
    // brace does not start one (it is then a literal '{').
    bool braces(int& min, int& max) {
        size_t j = i_ + 1;
        auto number = [&](int& v) {
            const size_t from = j;
            long x = 0;
            while (j < s_.size() && s_[j] >= '0' && s_[j] <= '9') x = std::min<long>(x * 10 + (s_[j++] - '0'), 1L << 30);
            v = static_cast<int>(x);
            return j > from;
        };
        if (!number(min)) return false;
        max = min;
        if (j < s_.size() && s_[j] == ',') {
            ++j;
            if (!number(max)) max = -1;
        }
        if (j >= s_.size() || s_[j] != '}') return false;
        i_ = j + 1;
        if (min > kMaxRepeat || max > kMaxRepeat) fail("a repetition count over " + std::to_string(kMaxRepeat));
        if (max >= 0 && max < min) fail("a repetition's maximum below its minimum");
        return true;
    }
    bool braces_ahead() {
        const size_t at = i_;
        int a = 0, b = 0;
        const bool yes = braces(a, b);
        i_ = at;
        return yes;
    }

    Node chars(const CharSet& set) {
        Node n;
        n.kind = Node::Kind::Chars;
        n.chars = set;
        return n;
    }

    Node atom(int depth) {
        const auto c = static_cast<unsigned char>(peek());
        switch (c) {
            case '(': {
                if (depth >= kMaxGroups) fail("groups nested too deeply");
                ++i_;
                if (more() && peek() == '?') {
                    ++i_;
                    const char k = more() ? peek() : '\0';
                    const char k2 = i_ + 1 < s_.size() ? s_[i_ + 1] : '\0';
                    if (k == ':') {
                        ++i_;
                    } else if (k == '<' && k2 != '=' && k2 != '!') {  // a named group
                        const size_t close = s_.find('>', i_);
                        if (close == std::string_view::npos) fail("a group name without its '>'");
                        i_ = close + 1;
                    } else if (k == '=' || k == '!' || k == '<') {
                        fail("lookahead and lookbehind are not supported");
                    } else {
                        fail("this kind of group is not supported");
                    }
                }
                Node n = alt(depth + 1);
                if (!more() || peek() != ')') fail("a '(' without its ')'");
                ++i_;
                return n;
            }
            case '[': return chars(klass());
            case '.': {
                ++i_;
                CharSet any;
                any.ascii.set();
                any.ascii.reset('\n');
                any.ascii.reset('\r');
                any.other = true;
                return chars(any);
            }
            case '\\': {
                ++i_;
                return chars(escape(false));
            }
            case '^':
            case '$': fail("anchors are supported at the pattern's start and end only");
            case '*':
            case '+':
            case '?': fail("a quantifier with nothing to repeat");
            default: break;
        }
        if (c == '{' && braces_ahead()) fail("a quantifier with nothing to repeat");
        if (c >= 0x80) fail("non-ASCII characters in a pattern are not supported");
        ++i_;
        CharSet one;
        one.add(c);
        return chars(one);
    }

    // After a backslash: the characters it stands for.
    CharSet escape(bool in_class) {
        if (!more()) fail("a pattern ending in a backslash");
        const auto c = static_cast<unsigned char>(s_[i_++]);
        CharSet set;
        auto range = [&](char a, char b) {
            for (int x = a; x <= b; ++x) set.add(static_cast<unsigned char>(x));
        };
        switch (c) {
            case 'd':
            case 'D': range('0', '9'); return c == 'd' ? set : set.complement();
            case 'w':
            case 'W':
                range('a', 'z'), range('A', 'Z'), range('0', '9'), set.add('_');
                return c == 'w' ? set : set.complement();
            case 's':
            case 'S':
                for (unsigned char x : {' ', '\t', '\n', '\v', '\f', '\r'}) set.add(x);
                return c == 's' ? set : set.complement();
            case 'n': set.add('\n'); return set;
            case 'r': set.add('\r'); return set;
            case 't': set.add('\t'); return set;
            case 'f': set.add('\f'); return set;
            case 'v': set.add('\v'); return set;
            case '0':
                if (more() && peek() >= '0' && peek() <= '9') fail("octal escapes are not supported");
                set.add(0);
                return set;
            case 'x':
            case 'u': {
                const int digits = c == 'x' ? 2 : 4;
                uint32_t v = 0;
                for (int k = 0; k < digits; ++k) {
                    const char h = more() ? peek() : '\0';
                    const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                    if (d < 0) fail(std::string("\\") + static_cast<char>(c) + " needs " + std::to_string(digits) + " hex digits");
                    v = v * 16 + static_cast<uint32_t>(d);
                    ++i_;
                }
                if (v >= 0x80) fail("non-ASCII characters in a pattern are not supported");
                set.add(static_cast<unsigned char>(v));
                return set;
            }
            case 'b':
                if (in_class) {
                    set.add('\b');
                    return set;
                }
                fail("word boundaries (\\b) are not supported");
            default: break;
        }
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) {
            fail(std::string("the escape \\") + static_cast<char>(c) + " is not supported");
        }
        set.add(c);  // escaped punctuation stands for itself
        return set;
    }

    // [...] or [^...], i_ at its '['.
    CharSet klass() {
        ++i_;
        const bool negate = more() && peek() == '^';
        if (negate) ++i_;
        CharSet set;
        // One member: a character (single: true, ch) or a class escape.
        auto member = [&](bool& single, unsigned char& ch) {
            const auto c = static_cast<unsigned char>(s_[i_++]);
            if (c >= 0x80) fail("non-ASCII characters in a pattern are not supported");
            CharSet e;
            if (c == '\\') {
                e = escape(true);
            } else {
                e.add(c);
            }
            single = e.ascii.count() == 1 && !e.other;  // class escapes take several
            for (unsigned x = 0; single && x < 128; ++x) {
                if (e.ascii.test(x)) ch = static_cast<unsigned char>(x);
            }
            return e;
        };
        while (true) {
            if (!more()) fail("a '[' without its ']'");
            if (peek() == ']') break;
            bool single = false;
            unsigned char lo = 0;
            CharSet m = member(single, lo);
            if (single && i_ + 1 < s_.size() && peek() == '-' && s_[i_ + 1] != ']') {
                ++i_;
                bool single2 = false;
                unsigned char hi = 0;
                member(single2, hi);
                if (!single2) fail("a range must end in a character");
                if (hi < lo) fail("a range out of order");
                for (int x = lo; x <= hi; ++x) set.add(static_cast<unsigned char>(x));
            } else {
                set.add(m);
            }
        }
        ++i_;
        return negate ? set.complement() : set;
    }

    std::string_view s_;
    size_t i_ = 0;
};

}  // namespace

// Writes a tree out as positions: each character class occurrence (after
// repetitions are expanded) one position, with the positions that may
// follow it.
class PatternBuilder {
public:
    struct Frag {
        bool nullable = true;
        uint64_t first = 0, last = 0;
    };

    JsonPattern out;
    std::vector<CharSet> sets{CharSet{}};  // per position; 0: the start

    PatternBuilder() { out.follow_.assign(JsonPattern::kMaxPositions + 1, 0); }

    Frag build(const Node& n) {
        // Repetitions of what has no characters ("(|){1000}" nested) write
        // out no positions but may take long to write out.
        if (++steps_ > kMaxSteps) throw Error(ErrorCode::InvalidArgument, "pattern: too many repetitions of empty groups");
        switch (n.kind) {
            case Node::Kind::Chars: {
                if (sets.size() > static_cast<size_t>(JsonPattern::kMaxPositions)) {
                    throw Error(ErrorCode::InvalidArgument,
                                "pattern: over " + std::to_string(JsonPattern::kMaxPositions) +
                                    " characters once its repetitions are written out");
                }
                const uint64_t bit = uint64_t{1} << sets.size();
                sets.push_back(n.chars);
                return {false, bit, bit};
            }
            case Node::Kind::Seq: {
                Frag f;
                for (const Node& k : n.kids) f = then(f, build(k));
                return f;
            }
            case Node::Kind::Alt: {
                Frag f{false, 0, 0};
                for (const Node& k : n.kids) {
                    const Frag g = build(k);
                    f.nullable = f.nullable || g.nullable;
                    f.first |= g.first;
                    f.last |= g.last;
                }
                return f;
            }
            case Node::Kind::Repeat: {
                const Node& k = n.kids[0];
                Frag f;
                for (int r = 0; r < n.min; ++r) {
                    Frag g = build(k);
                    if (n.max < 0 && r == n.min - 1) loop(g);  // x{n,}: the last copy repeats
                    f = then(f, g);
                }
                if (n.max < 0 && n.min == 0) {
                    Frag g = build(k);
                    loop(g);
                    g.nullable = true;
                    f = then(f, g);
                }
                for (int r = n.min; r < n.max; ++r) {  // x{n,m}: m - n optional copies
                    Frag g = build(k);
                    g.nullable = true;
                    f = then(f, g);
                }
                return f;
            }
        }
        return {};
    }

    Frag then(const Frag& a, const Frag& b) {
        link(a.last, b.first);
        return {a.nullable && b.nullable, a.first | (a.nullable ? b.first : 0), b.last | (b.nullable ? a.last : 0)};
    }
    void loop(const Frag& f) { link(f.last, f.first); }
    void link(uint64_t from, uint64_t to) {
        each_state(from, [&](size_t q) { out.follow_[q] |= to; });
    }
    static constexpr long kMaxSteps = 100000;
    long steps_ = 0;

    Node any_text() {
        Node any;
        any.kind = Node::Kind::Chars;
        any.chars.ascii.set();
        any.chars.other = true;
        Node r;
        r.kind = Node::Kind::Repeat;
        r.max = -1;
        r.kids.push_back(std::move(any));
        return r;
    }
};

JsonPattern JsonPattern::compile(std::string_view source) {
    bool anchored_start = false, anchored_end = false;
    const Node tree = Parser(source).parse(anchored_start, anchored_end);
    PatternBuilder b;
    PatternBuilder::Frag f;
    if (!anchored_start) f = b.then(f, b.build(b.any_text()));
    f = b.then(f, b.build(tree));
    if (!anchored_end) f = b.then(f, b.build(b.any_text()));
    JsonPattern& p = b.out;
    p.follow_[0] = f.first;
    p.accept_ = f.last | (f.nullable ? kStart : 0);
    for (size_t q = 1; q < b.sets.size(); ++q) {
        const uint64_t bit = uint64_t{1} << q;
        for (size_t c = 0; c < 128; ++c) {
            if (b.sets[q].ascii.test(c)) p.by_ascii_[c] |= bit;
        }
        if (b.sets[q].other) p.by_other_ |= bit;
    }
    p.measure();
    return std::move(b.out);
}

// The fewest and the most characters from each state to a match, relaxed
// over the follow sets until nothing changes. A state from which a loop
// can be taken on the way to a match has no most (kUnbounded); those are
// found first, from the follow sets' transitive closure, so that the
// relaxation of the others ends.
void JsonPattern::measure() {
    constexpr size_t N = kMaxPositions + 1;
    std::array<uint64_t, N> reach{};  // the states each reaches in one character or more
    std::copy(follow_.begin(), follow_.end(), reach.begin());
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t q = 0; q < N; ++q) {
            uint64_t r = reach[q];
            each_state(reach[q], [&](size_t t) { r |= reach[t]; });
            grew = grew || r != reach[q];
            reach[q] = r;
        }
    }
    std::array<int, N> fewest{}, most{};
    for (size_t q = 0; q < N; ++q) {
        const bool accepting = (accept_ >> q & 1) != 0;
        fewest[q] = accepting ? 0 : 255;
        most[q] = accepting ? 0 : -1;  // -1: no match from here
        each_state(reach[q] | uint64_t{1} << q, [&](size_t t) {
            if ((reach[t] >> t & 1) != 0 && ((reach[t] | uint64_t{1} << t) & accept_) != 0) most[q] = kUnbounded;
        });
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t q = 0; q < N; ++q) {
            each_state(follow_[q], [&](size_t t) {
                if (fewest[t] + 1 < fewest[q]) fewest[q] = fewest[t] + 1, changed = true;
                if (most[t] >= 0 && most[q] != kUnbounded && most[t] + 1 > most[q]) {
                    most[q] = std::min(most[t] + 1, kUnbounded), changed = true;
                }
            });
        }
    }
    for (size_t q = 0; q < N; ++q) {
        left_[q] = static_cast<uint8_t>(std::min(fewest[q], 255));
        most_left_[q] = static_cast<uint8_t>(std::max(most[q], 0));
    }
}

int JsonPattern::max_left(uint64_t states) const {
    int best = 0;
    each_state(states, [&](size_t q) { best = std::max<int>(best, most_left_[q]); });
    return best;
}

int JsonPattern::min_left(uint64_t states) const {
    int best = 255;
    each_state(states, [&](size_t q) { best = std::min<int>(best, left_[q]); });
    return best;
}

uint64_t JsonPattern::step(uint64_t states, uint32_t c) const {
    uint64_t next = 0;
    each_state(states, [&](size_t q) { next |= follow_[q]; });
    return next & (c < 128 ? by_ascii_[c] : by_other_);
}

}  // namespace lantern
