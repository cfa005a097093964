// Builtin filters and tests, with jinja2's semantics; `tojson` is Hugging
// Face's override: json.dumps(value, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "chat/jinja_interp.h"
#include "chat/jinja_text.h"

namespace lantern::jinja {

namespace {

// ---------------------------------------------------------- arguments ----

Value arg_or(const CallArgs& args, size_t index, std::string_view name, const Value& fallback) {
    const Value* v = args.get(index, name);
    return v ? *v : fallback;
}

int64_t int_arg(const CallArgs& args, size_t index, std::string_view name, int64_t fallback) {
    const Value* v = args.get(index, name);
    if (!v || v->is_none()) return fallback;
    if (!v->is_int() && !v->is_bool()) throw RenderError("'" + std::string(name) + "' must be an integer");
    return v->as_int();
}

bool bool_arg(const CallArgs& args, size_t index, std::string_view name, bool fallback) {
    const Value* v = args.get(index, name);
    return v ? v->truthy() : fallback;
}

std::optional<std::string> str_arg(const CallArgs& args, size_t index, std::string_view name) {
    const Value* v = args.get(index, name);
    if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
    return v->to_str();
}

size_t py_len(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::String: return utf8_length(v.str());
        case Value::Kind::List: return v.list_data().items.size();
        case Value::Kind::Dict: return v.dict_data().items.size();
        case Value::Kind::Undefined: return 0;
        default: throw RenderError("object of type '" + v.type_name() + "' has no len()");
    }
}

// A dotted attribute path ("a.b" or "0") applied the way jinja's
// make_attrgetter does: item access, integers as indices.
Value attribute_of(Interpreter& in, Value v, const std::string& path) {
    size_t start = 0;
    while (start <= path.size()) {
        const size_t dot = path.find('.', start);
        const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool numeric = !part.empty() && part.size() <= 18 && std::all_of(part.begin(), part.end(), ::isdigit);
        v = in.get_item(v, numeric ? Value(int64_t(std::stoll(part))) : Value(part));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return v;
}

// Sort key: lower-cased strings unless case-sensitive.
Value fold_case(const Value& v, bool case_sensitive) {
    return !case_sensitive && v.is_string() ? Value(py_lower(v.str())) : v;
}

std::string html_escape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&#34;"; break;
            case '\'': out += "&#39;"; break;
            default: out += c;
        }
    }
    return out;
}

// Python int(str, base) and float(str), with surrounding whitespace and underscores.
std::optional<int64_t> parse_int(std::string s, int base) {
    s = py_strip(s, std::nullopt, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, base);
    if (*end != '\0' || errno != 0) return std::nullopt;
    return int64_t(v);
}

std::optional<double> parse_float(std::string s) {
    s = py_strip(s, std::nullopt, true, true);
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (*end != '\0') return std::nullopt;
    return v;
}

// ------------------------------------------------------------ filters ----

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_number()) {
        if (v.as_int() == INT64_MIN) integer_overflow();
        return Value(int64_t(std::llabs(v.as_int())));
    }
    throw RenderError("bad operand type for abs(): '" + v.type_name() + "'");
}

// Python getattr() only: a dict's keys are not attributes (its methods are).
Value f_attr(Interpreter& in, const Value& v, CallArgs& args) {
    const std::string name = arg_or(args, 0, "name", Value("")).to_str();
    if (v.is_dict() && !v.is_namespace()) {
        if (auto method = bind_method(v, name)) return *method;
        return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    return in.get_attr(v, name);
}

Value f_batch(Interpreter&, const Value& v, CallArgs& args) {
    const int64_t n = int_arg(args, 0, "linecount", 1);
    if (n <= 0) throw RenderError("batch size must be positive");
    check_items(size_t(n), "a batch");
    const Value* fill = args.get(1, "fill_with");
    std::vector<Value> out, cur;
    for (Value& item : v.iterate()) {
        cur.push_back(std::move(item));
        if (int64_t(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
    }
    if (!cur.empty()) {
        if (fill && !fill->is_none()) while (int64_t(cur.size()) < n) cur.push_back(*fill);
        out.push_back(Value::list(std::move(cur)));
    }
    return Value::list(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs&) { return Value(py_capitalize(v.to_str())); }

Value f_center(Interpreter&, const Value& v, CallArgs& args) {
    const std::string s = v.to_str();
    const int64_t width = int_arg(args, 0, "width", 80);
    const int64_t len = int64_t(utf8_length(s));
    if (width <= len) return Value(s);
    check_bytes(size_t(width), "a centered string");
    const int64_t total = width - len;
    const int64_t left = total / 2 + (total & width & 1);  // CPython's centering rule
    return Value(std::string(size_t(left), ' ') + s + std::string(size_t(total - left), ' '));
}

Value f_length(Interpreter&, const Value& v, CallArgs&) { return Value(int64_t(py_len(v))); }

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
    const Value& fallback = arg_or(args, 0, "default_value", Value(""));
    if (v.is_undefined() || (bool_arg(args, 1, "boolean", false) && !v.truthy())) return fallback;
    return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
    if (!v.is_dict()) throw RenderError("dictsort filter expects a dict, got " + v.type_name());
    const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
    const std::string by = arg_or(args, 1, "by", Value("key")).to_str();
    const bool reverse = bool_arg(args, 2, "reverse", false);
    if (by != "key" && by != "value") throw RenderError("You can only sort by either 'key' or 'value'");
    std::vector<Value> pairs;
    for (const auto& [k, e] : v.dict_data().items) pairs.push_back(Value::list({k, e}, true));
    const size_t pos = by == "key" ? 0 : 1;
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
        const Value ka = fold_case(a.list_data().items[pos], case_sensitive);
        const Value kb = fold_case(b.list_data().items[pos], case_sensitive);
        return reverse ? py_less(kb, ka) : py_less(ka, kb);
    });
    return Value::list(std::move(pairs));
}

Value f_escape(Interpreter&, const Value& v, CallArgs&) { return Value(html_escape(v.to_str())); }

Value f_first(Interpreter&, const Value& v, CallArgs&) {
    std::vector<Value> items = v.iterate();
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs&) {
    std::vector<Value> items = v.iterate();
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
    if (v.is_undefined()) throw RenderError(v.undefined_hint());
    const Value& fallback = arg_or(args, 0, "default", Value(0.0));
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
        if (auto f = parse_float(v.str())) return Value(*f);
    }
    return fallback;
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
    if (v.is_undefined()) throw RenderError(v.undefined_hint());
    const Value& fallback = arg_or(args, 0, "default", Value(0));
    const int64_t base = int_arg(args, 1, "base", 10);
    // A float past the 64-bit integers (or not finite) is an error in
    // integer_of, as Python's int() of inf is; NaN gives the default.
    auto integer_of = [&](double x) {
        if (std::isnan(x)) return fallback;
        if (!fits_int64(x)) throw RenderError("int: " + Value(x).repr() + " is past the 64-bit integers");
        return Value(int64_t(std::trunc(x)));
    };
    if (v.is_float()) return integer_of(v.as_double());
    if (v.is_number()) return Value(v.as_int());
    if (v.is_string()) {
        if (base < 2 || base > 36) throw RenderError("int() base must be >= 2 and <= 36");
        if (auto i = parse_int(v.str(), int(base))) return Value(*i);
        if (auto f = parse_float(v.str())) return integer_of(*f);
    }
    return fallback;
}

Value f_format(Interpreter&, const Value& v, CallArgs& args) {
    return py_arith(BinaryExpr::Op::Mod, Value(v.to_str()), Value::list(args.positional, true));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& args) {
    if (!v.is_string()) throw RenderError("'" + v.type_name() + "' object has no attribute 'splitlines'");
    const Value& width = arg_or(args, 0, "width", Value(4));
    const int64_t spaces = width.is_number() ? std::max<int64_t>(0, width.as_int()) : 4;
    check_bytes(size_t(spaces), "an indent");
    const std::string pad = width.is_string() ? width.str() : std::string(size_t(spaces), ' ');
    const bool first = bool_arg(args, 1, "first", false);
    const bool blank = bool_arg(args, 2, "blank", false);
    std::vector<std::string> lines = py_splitlines(v.to_str() + "\n");
    std::string out;
    if (blank) {
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i) out.append("\n").append(pad);
            out += lines[i];
            check_bytes(out.size(), "an indented string");
        }
    } else {
        out = lines.empty() ? "" : lines[0];
        for (size_t i = 1; i < lines.size(); ++i) {
            out += '\n';
            if (!lines[i].empty()) out.append(pad).append(lines[i]);
            check_bytes(out.size(), "an indented string");
        }
    }
    return Value(first ? pad + out : out);
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
    if (v.is_undefined()) return Value::list();
    if (!v.is_dict()) throw RenderError("Can only get item pairs from a mapping.");
    std::vector<Value> pairs;
    for (const auto& [k, e] : v.dict_data().items) pairs.push_back(Value::list({k, e}, true));
    return Value::list(std::move(pairs));
}

Value f_join(Interpreter& in, const Value& v, CallArgs& args) {
    const std::string sep = arg_or(args, 0, "d", Value("")).to_str();
    const auto attribute = str_arg(args, 1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : v.iterate()) {
        if (!first) out += sep;
        first = false;
        out += (attribute ? attribute_of(in, item, *attribute) : item).to_str();
        check_bytes(out.size(), "a joined string");
    }
    return Value(std::move(out));
}

Value f_list(Interpreter&, const Value& v, CallArgs&) { return Value::list(v.iterate()); }

Value f_lower(Interpreter&, const Value& v, CallArgs&) { return Value(py_lower(v.to_str())); }
Value f_upper(Interpreter&, const Value& v, CallArgs&) { return Value(py_upper(v.to_str())); }

Value f_map(Interpreter& in, const Value& v, CallArgs& args) {
    std::vector<Value> out;
    if (!v.truthy()) return Value::list();  // jinja2 maps nothing over a falsy value
    if (const auto attribute = str_arg(args, SIZE_MAX, "attribute")) {  // keyword only
        const Value* fallback = args.get(SIZE_MAX, "default");
        for (const Value& item : v.iterate()) {
            Value a = attribute_of(in, item, *attribute);
            out.push_back(a.is_undefined() && fallback ? *fallback : a);
        }
        return Value::list(std::move(out));
    }
    if (args.positional.empty()) throw RenderError("map requires a filter name or attribute=");
    const std::string name = args.positional[0].to_str();
    const FilterFn fn = find_filter(name);
    if (!fn) throw RenderError("No filter named '" + name + "'.");
    CallArgs rest{{args.positional.begin() + 1, args.positional.end()}, args.keyword};
    for (const Value& item : v.iterate()) {
        CallArgs a = rest;
        out.push_back(fn(in, item, a));
    }
    return Value::list(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& args, bool want_max) {
    const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
    const auto attribute = str_arg(args, 1, "attribute");
    std::vector<Value> items = v.iterate();
    if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
    size_t best = 0;
    auto key = [&](const Value& x) { return fold_case(attribute ? attribute_of(in, x, *attribute) : x, case_sensitive); };
    for (size_t i = 1; i < items.size(); ++i) {
        const bool better = want_max ? py_less(key(items[best]), key(items[i])) : py_less(key(items[i]), key(items[best]));
        if (better) best = i;
    }
    return items[best];
}

Value f_max(Interpreter& in, const Value& v, CallArgs& args) { return min_max(in, v, args, true); }
Value f_min(Interpreter& in, const Value& v, CallArgs& args) { return min_max(in, v, args, false); }

// select / reject / selectattr / rejectattr.
Value select_items(Interpreter& in, const Value& v, CallArgs& args, bool keep_matching, bool by_attribute) {
    if (!v.truthy()) return Value::list();  // as jinja2: a falsy value selects nothing
    size_t next = 0;
    std::optional<std::string> attribute;
    if (by_attribute) {
        if (args.positional.empty()) throw RenderError("missing attribute name");
        attribute = args.positional[next++].to_str();
    }
    TestFn test = nullptr;
    if (next < args.positional.size()) {
        const std::string name = args.positional[next++].to_str();
        test = find_test(name);
        if (!test) throw RenderError("No test named '" + name + "'.");
    }
    CallArgs test_args{{args.positional.begin() + std::ptrdiff_t(next), args.positional.end()}, args.keyword};
    std::vector<Value> out;
    for (const Value& item : v.iterate()) {
        const Value subject = attribute ? attribute_of(in, item, *attribute) : item;
        CallArgs a = test_args;
        const bool match = test ? test(in, subject, a) : subject.truthy();
        if (match == keep_matching) out.push_back(item);
    }
    return Value::list(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) { return select_items(in, v, a, true, false); }
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) { return select_items(in, v, a, false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_items(in, v, a, true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) { return select_items(in, v, a, false, true); }

Value f_replace(Interpreter&, const Value& v, CallArgs& args) {
    const Value* from = args.get(0, "old");
    const Value* to = args.get(1, "new");
    if (!from || !to) throw RenderError("replace() needs the old and new strings");
    return Value(py_replace(v.to_str(), from->to_str(), to->to_str(), int_arg(args, 2, "count", -1)));
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
    if (v.is_string()) {
        std::u32string u = utf8_decode(v.str());
        std::reverse(u.begin(), u.end());
        return Value(utf8_encode(u));
    }
    std::vector<Value> items = v.iterate();
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
    if (!v.is_number()) throw RenderError("round filter expects a number, got " + v.type_name());
    // Past 400 digits either way a double rounds to itself or to zero.
    const int64_t precision = std::clamp<int64_t>(int_arg(args, 0, "precision", 0), -400, 400);
    const std::string method = arg_or(args, 1, "method", Value("common")).to_str();
    const double x = v.as_double();
    if (method == "ceil" || method == "floor") {
        const double scale = std::pow(10.0, double(precision));
        return Value((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
    }
    if (method != "common") throw RenderError("method must be common, ceil or floor");
    if (!v.is_float()) return Value(v.as_int());  // Python's round() keeps an int an int
    if (precision < 0) {
        const double scale = std::pow(10.0, double(-precision));
        return Value(std::nearbyint(x / scale) * scale);
    }
    // Python's round(): correctly rounded, ties to even -- what printf does on glibc.
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", int(std::min<int64_t>(precision, 300)), x);
    return Value(std::strtod(buf, nullptr));
}

Value f_safe(Interpreter&, const Value& v, CallArgs&) { return v; }

Value f_sort(Interpreter& in, const Value& v, CallArgs& args) {
    const bool reverse = bool_arg(args, 0, "reverse", false);
    const bool case_sensitive = bool_arg(args, 1, "case_sensitive", false);
    const auto attribute = str_arg(args, 2, "attribute");
    std::vector<Value> items = v.iterate();
    auto key = [&](const Value& x) { return fold_case(attribute ? attribute_of(in, x, *attribute) : x, case_sensitive); };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return reverse ? py_less(key(b), key(a)) : py_less(key(a), key(b));
    });
    return Value::list(std::move(items));
}

Value f_string(Interpreter&, const Value& v, CallArgs&) { return Value(v.to_str()); }

Value f_sum(Interpreter& in, const Value& v, CallArgs& args) {
    const auto attribute = str_arg(args, 0, "attribute");
    Value total = arg_or(args, 1, "start", Value(0));
    for (const Value& item : v.iterate()) total = py_add(total, attribute ? attribute_of(in, item, *attribute) : item);
    return total;
}

// jinja's title: the text is cut before each run of separators (- whitespace
// ( { [ <) and every piece becomes piece[0].upper() + piece[1:].lower().
Value f_title(Interpreter&, const Value& v, CallArgs&) {
    const std::u32string u = utf8_decode(v.to_str());
    auto is_sep = [](char32_t c) { return py_isspace(c) || c == U'-' || c == U'(' || c == U'{' || c == U'[' || c == U'<'; };
    std::string out;
    size_t i = 0;
    while (i < u.size()) {
        size_t j = i;
        const bool sep = is_sep(u[i]);
        while (j < u.size() && is_sep(u[j]) == sep) ++j;
        out += py_upper(utf8_encode(std::u32string_view(u).substr(i, 1)));
        out += py_lower(utf8_encode(std::u32string_view(u).substr(i + 1, j - i - 1)));
        i = j;
    }
    return Value(std::move(out));
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& args) {
    args.expect("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
    const bool ensure_ascii = bool_arg(args, 0, "ensure_ascii", false);
    const Value* indent = args.get(1, "indent");
    int width = -1;
    if (indent && !indent->is_none()) {
        if (!indent->is_int()) throw RenderError("tojson: indent must be an integer");
        width = int(std::clamp<int64_t>(indent->as_int(), 0, int64_t(Limits::kMaxBytes)));
    }
    std::optional<std::pair<std::string, std::string>> separators;
    if (const Value* sep = args.get(2, "separators"); sep && !sep->is_none()) {
        const std::vector<Value> parts = sep->iterate();
        if (parts.size() != 2) throw RenderError("tojson: separators must be a pair of strings");
        separators.emplace(parts[0].to_str(), parts[1].to_str());
    }
    return Value(to_json(v, width, ensure_ascii, bool_arg(args, 3, "sort_keys", false), separators));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& args) {
    return Value(py_strip(v.to_str(), str_arg(args, 0, "chars"), true, true));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& args) {
    if (!v.is_string()) {  // jinja2 asks len(): short sequences come back as they are
        if (int64_t(py_len(v)) <= int_arg(args, 0, "length", 255) + int_arg(args, 3, "leeway", 5)) return v;
        throw RenderError("'" + v.type_name() + "' object has no attribute 'rsplit'");
    }
    const std::u32string s = utf8_decode(v.to_str());
    const int64_t length = int_arg(args, 0, "length", 255);
    const bool killwords = bool_arg(args, 1, "killwords", false);
    const std::u32string end = utf8_decode(arg_or(args, 2, "end", Value("...")).to_str());
    const int64_t leeway = int_arg(args, 3, "leeway", 5);
    if (length < int64_t(end.size())) throw RenderError("expected length >= " + std::to_string(end.size()));
    if (int64_t(s.size()) <= length + leeway) return v.is_string() ? v : Value(v.to_str());
    std::u32string head = s.substr(0, size_t(length) - end.size());
    if (!killwords) {
        const size_t space = head.rfind(U' ');
        if (space != std::u32string::npos) head.resize(space);
    }
    return Value(utf8_encode(head + end));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& args) {
    const bool case_sensitive = bool_arg(args, 0, "case_sensitive", false);
    const auto attribute = str_arg(args, 1, "attribute");
    std::vector<Value> out, seen;
    for (const Value& item : v.iterate()) {
        const Value key = fold_case(attribute ? attribute_of(in, item, *attribute) : item, case_sensitive);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) {
            seen.push_back(key);
            out.push_back(item);
        }
    }
    return Value::list(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : utf8_decode(v.to_str())) {
        const bool w = c == U'_' || (c >= U'0' && c <= U'9') || py_isalpha(c);
        if (w && !in_word) ++words;
        in_word = w;
    }
    return Value(words);
}

struct FilterEntry {
    std::string_view name;
    FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},
    {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_length},
    {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},
    {"e", f_escape},          {"escape", f_escape},     {"first", f_first},
    {"float", f_float},       {"forceescape", f_escape}, {"format", f_format},
    {"indent", f_indent},     {"int", f_int},           {"items", f_items},
    {"join", f_join},         {"last", f_last},         {"length", f_length},
    {"list", f_list},         {"lower", f_lower},       {"map", f_map},
    {"max", f_max},           {"min", f_min},           {"reject", f_reject},
    {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
    {"round", f_round},       {"safe", f_safe},         {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort},     {"string", f_string},
    {"sum", f_sum},           {"title", f_title},       {"tojson", f_tojson},
    {"trim", f_trim},         {"truncate", f_truncate}, {"unique", f_unique},
    {"upper", f_upper},       {"wordcount", f_wordcount},
};

// -------------------------------------------------------------- tests ----

const Value& test_arg(const CallArgs& args) {
    if (args.positional.empty()) throw RenderError("test expects an argument");
    return args.positional[0];
}

bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_function(); }
bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict() && !v.is_namespace(); }
// jinja2 asks iter(): undefined iterates (as empty), so it counts.
bool t_iterable(Interpreter&, const Value& v, CallArgs&) { return v.is_iterable() || v.is_undefined(); }
bool t_sequence(Interpreter&, const Value& v, CallArgs&) { return v.is_iterable() || v.is_undefined(); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }

// jinja2 spells these with Python's %: value % 2 == 1, value % n == 0.
Value py_mod(const Value& a, const Value& b) { return py_arith(BinaryExpr::Op::Mod, a, b); }
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return py_equal(py_mod(v, Value(2)), Value(1)); }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return py_equal(py_mod(v, Value(2)), Value(0)); }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& args) {
    return py_equal(py_mod(v, test_arg(args)), Value(0));
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return py_equal(v, test_arg(a)); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !py_equal(v, test_arg(a)); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return py_less(v, test_arg(a)); }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return !py_less(test_arg(a), v); }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return py_less(test_arg(a), v); }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return !py_less(v, test_arg(a)); }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return py_contains(test_arg(a), v); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) { return v.same_object(test_arg(a)); }

// str(value).islower() / .isupper(): some cased character, none of the other case.
bool t_lower(Interpreter&, const Value& v, CallArgs&) { return py_str_islower(v.to_str()); }
bool t_upper(Interpreter&, const Value& v, CallArgs&) { return py_str_isupper(v.to_str()); }
bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }

struct TestEntry {
    std::string_view name;
    TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"!=", t_ne},         {"<", t_lt},              {"<=", t_le},           {"==", t_eq},
    {">", t_gt},          {">=", t_ge},             {"boolean", t_boolean}, {"callable", t_callable},
    {"defined", t_defined}, {"divisibleby", t_divisibleby}, {"eq", t_eq},   {"equalto", t_eq},
    {"escaped", t_escaped}, {"even", t_even},       {"false", t_false},     {"filter", t_filter},
    {"float", t_float},   {"ge", t_ge},             {"greaterthan", t_gt},  {"gt", t_gt},
    {"in", t_in},         {"integer", t_integer},   {"iterable", t_iterable}, {"le", t_le},
    {"lessthan", t_lt},   {"lower", t_lower},       {"lt", t_lt},           {"mapping", t_mapping},
    {"ne", t_ne},         {"none", t_none},         {"number", t_number},   {"odd", t_odd},
    {"sameas", t_sameas}, {"sequence", t_sequence}, {"string", t_string},   {"test", t_test},
    {"true", t_true},     {"undefined", t_undefined}, {"upper", t_upper},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
    for (const FilterEntry& e : kFilters) {
        if (e.name == name) return e.fn;
    }
    return nullptr;
}

TestFn find_test(std::string_view name) {
    for (const TestEntry& e : kTests) {
        if (e.name == name) return e.fn;
    }
    return nullptr;
}

}  // namespace lantern::jinja
