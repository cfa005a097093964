// Methods of str, list and dict values that templates call (message.content.strip(),
// tool.items(), ...), and the global functions: range, dict, namespace, joiner,
// and Hugging Face's raise_exception and strftime_now.
//
// Like HF's ImmutableSandboxedEnvironment, methods that would modify a list or
// dict (append, pop, update, ...) are refused.
#include <algorithm>
#include <ctime>
#include <string_view>

#include "chat/jinja_interp.h"
#include "chat/jinja_text.h"

namespace lantern::jinja {

namespace {

using Method = Value (*)(const Value& self, CallArgs& args);

std::optional<std::string> opt_str(const CallArgs& args, size_t index, std::string_view name) {
    const Value* v = args.get(index, name);
    if (!v || v->is_none()) return std::nullopt;
    if (!v->is_string()) throw RenderError(std::string(name) + " must be str or None, not " + v->type_name());
    return v->str();
}

int64_t opt_int(const CallArgs& args, size_t index, std::string_view name, int64_t fallback) {
    const Value* v = args.get(index, name);
    if (!v || v->is_none()) return fallback;
    if (!v->is_int() && !v->is_bool()) throw RenderError(std::string(name) + " must be an integer");
    return v->as_int();
}

const Value& required(const CallArgs& args, size_t index, std::string_view name) {
    const Value* v = args.get(index, name);
    if (!v) throw RenderError("missing required argument '" + std::string(name) + "'");
    return *v;
}

std::string required_str(const CallArgs& args, size_t index, std::string_view name) {
    const Value& v = required(args, index, name);
    if (!v.is_string()) throw RenderError(std::string(name) + " must be str, not " + v.type_name());
    return v.str();
}

Value strings(std::vector<std::string> parts) {
    std::vector<Value> items;
    items.reserve(parts.size());
    for (std::string& p : parts) items.emplace_back(std::move(p));
    return Value::list(std::move(items));
}

// Code-point index of byte offset `pos` in s (npos -> -1).
int64_t cp_index(std::string_view s, size_t pos) {
    return pos == std::string_view::npos ? -1 : int64_t(utf8_length(s.substr(0, pos)));
}

// ---------------------------------------------------------------- str ----

Value s_strip(const Value& s, CallArgs& a) { return Value(py_strip(s.str(), opt_str(a, 0, "chars"), true, true)); }
Value s_lstrip(const Value& s, CallArgs& a) { return Value(py_strip(s.str(), opt_str(a, 0, "chars"), true, false)); }
Value s_rstrip(const Value& s, CallArgs& a) { return Value(py_strip(s.str(), opt_str(a, 0, "chars"), false, true)); }

Value split_impl(const Value& s, CallArgs& a, bool from_right) {
    const auto sep = opt_str(a, 0, "sep");
    if (sep && sep->empty()) throw RenderError("empty separator");
    return strings(py_split(s.str(), sep, opt_int(a, 1, "maxsplit", -1), from_right));
}
Value s_split(const Value& s, CallArgs& a) { return split_impl(s, a, false); }
Value s_rsplit(const Value& s, CallArgs& a) { return split_impl(s, a, true); }
Value s_splitlines(const Value& s, CallArgs&) { return strings(py_splitlines(s.str())); }

Value affix_impl(const Value& s, CallArgs& a, bool prefix) {
    const Value& what = required(a, 0, prefix ? "prefix" : "suffix");
    const std::u32string u = utf8_decode(s.str());
    int64_t b = opt_int(a, 1, "start", 0), e = opt_int(a, 2, "end", int64_t(u.size()));
    const int64_t n = int64_t(u.size());
    if (b < 0) b = std::max<int64_t>(0, b + n);
    if (e < 0) e = std::max<int64_t>(0, e + n);
    e = std::min(e, n);
    const std::string window = b > e ? std::string() : utf8_encode(std::u32string_view(u).substr(size_t(b), size_t(e - b)));
    auto test = [&](const Value& v) {
        if (!v.is_string()) throw RenderError(std::string(prefix ? "startswith" : "endswith") +
                                              " first arg must be str or a tuple of str, not " + v.type_name());
        const std::string& x = v.str();
        if (x.size() > window.size()) return false;
        return prefix ? window.compare(0, x.size(), x) == 0 : window.compare(window.size() - x.size(), x.size(), x) == 0;
    };
    if (what.is_list()) {
        for (const Value& v : what.list_data().items) {
            if (test(v)) return Value(true);
        }
        return Value(false);
    }
    return Value(test(what));
}
Value s_startswith(const Value& s, CallArgs& a) { return affix_impl(s, a, true); }
Value s_endswith(const Value& s, CallArgs& a) { return affix_impl(s, a, false); }

Value s_upper(const Value& s, CallArgs&) { return Value(py_upper(s.str())); }
Value s_lower(const Value& s, CallArgs&) { return Value(py_lower(s.str())); }
Value s_title(const Value& s, CallArgs&) { return Value(py_str_title(s.str())); }
Value s_capitalize(const Value& s, CallArgs&) { return Value(py_capitalize(s.str())); }

Value s_replace(const Value& s, CallArgs& a) {
    return Value(py_replace(s.str(), required_str(a, 0, "old"), required_str(a, 1, "new"), opt_int(a, 2, "count", -1)));
}

Value find_impl(const Value& s, CallArgs& a, bool from_right, bool raise) {
    const std::string sub = required_str(a, 0, "sub");
    const std::string& str = s.str();
    const size_t pos = from_right ? str.rfind(sub) : str.find(sub);
    if (pos == std::string::npos && raise) throw RenderError("substring not found");
    return Value(cp_index(str, pos));
}
Value s_find(const Value& s, CallArgs& a) { return find_impl(s, a, false, false); }
Value s_rfind(const Value& s, CallArgs& a) { return find_impl(s, a, true, false); }
Value s_index(const Value& s, CallArgs& a) { return find_impl(s, a, false, true); }
Value s_rindex(const Value& s, CallArgs& a) { return find_impl(s, a, true, true); }

Value s_count(const Value& s, CallArgs& a) {
    const std::string sub = required_str(a, 0, "sub");
    const std::string& str = s.str();
    if (sub.empty()) return Value(int64_t(utf8_length(str)) + 1);
    int64_t n = 0;
    for (size_t pos = str.find(sub); pos != std::string::npos; pos = str.find(sub, pos + sub.size())) ++n;
    return Value(n);
}

Value s_join(const Value& s, CallArgs& a) {
    std::string out;
    bool first = true;
    for (const Value& v : required(a, 0, "iterable").iterate()) {
        if (!v.is_string()) throw RenderError("sequence item: expected str instance, " + v.type_name() + " found");
        if (!first) out += s.str();
        first = false;
        out += v.str();
        check_bytes(out.size(), "a joined string");
    }
    return Value(std::move(out));
}

template <bool (*Pred)(char32_t)>
Value all_chars(const Value& s, CallArgs&) {
    const std::u32string u = utf8_decode(s.str());
    return Value(!u.empty() && std::all_of(u.begin(), u.end(), Pred));
}
bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_alnum(char32_t c) { return is_digit(c) || py_isalpha(c); }
bool is_alpha(char32_t c) { return py_isalpha(c); }
bool is_space(char32_t c) { return py_isspace(c); }

Value s_isupper(const Value& s, CallArgs&) { return Value(py_str_isupper(s.str())); }
Value s_islower(const Value& s, CallArgs&) { return Value(py_str_islower(s.str())); }

Value pad_impl(const Value& s, CallArgs& a, int align) {  // -1 left, 0 center, 1 right
    const int64_t width = opt_int(a, 0, "width", 0);
    const auto fill_s = opt_str(a, 1, "fillchar");
    const std::string fill = fill_s ? *fill_s : " ";
    const int64_t len = int64_t(utf8_length(s.str()));
    if (width <= len) return s;
    const int64_t total = width - len;
    if (fill.empty() || utf8_length(fill) != 1) throw RenderError("The fill character must be exactly one character long");
    check_bytes(size_t(std::min<int64_t>(total, int64_t(Limits::kMaxBytes))) * fill.size() + s.str().size(),
                "a padded string");
    const int64_t left = align < 0 ? 0 : align > 0 ? total : total / 2 + (total & width & 1);
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += fill;
    out += s.str();
    for (int64_t i = left; i < total; ++i) out += fill;
    return Value(std::move(out));
}
Value s_ljust(const Value& s, CallArgs& a) { return pad_impl(s, a, -1); }
Value s_rjust(const Value& s, CallArgs& a) { return pad_impl(s, a, 1); }
Value s_center(const Value& s, CallArgs& a) { return pad_impl(s, a, 0); }

Value s_format(const Value& s, CallArgs& a) {
    const std::string& f = s.str();
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < f.size(); ++i) {
        const char c = f[i];
        if (c == '}') {
            if (i + 1 < f.size() && f[i + 1] == '}') ++i;
            else throw RenderError("Single '}' encountered in format string");
            out += '}';
            continue;
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < f.size() && f[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const size_t close = f.find('}', i);
        if (close == std::string::npos) throw RenderError("Single '{' encountered in format string");
        std::string field = f.substr(i + 1, close - i - 1);
        i = close;
        char conversion = 's';
        if (const size_t bang = field.find('!'); bang != std::string::npos) {
            conversion = bang + 1 < field.size() ? field[bang + 1] : 's';
            field.resize(bang);
        }
        if (field.find(':') != std::string::npos) throw RenderError("str.format: format specs are not supported");
        const Value* v = nullptr;
        if (field.empty()) {
            v = a.get(auto_index++, "");
        } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
            v = field.size() < 10 ? a.get(size_t(std::stoul(field)), "") : nullptr;
        } else {
            v = a.get(SIZE_MAX, field);
        }
        if (!v) throw RenderError("str.format: no argument for field '" + field + "'");
        out += conversion == 'r' ? v->repr() : v->to_str();
        check_bytes(out.size(), "a formatted string");
    }
    return Value(std::move(out));
}

// --------------------------------------------------------- list, dict ----

Value l_index(const Value& self, CallArgs& a) {
    const Value& x = required(a, 0, "value");
    const auto& items = self.list_data().items;
    for (size_t i = 0; i < items.size(); ++i) {
        if (py_equal(items[i], x)) return Value(int64_t(i));
    }
    throw RenderError(x.repr() + " is not in list");
}

Value l_count(const Value& self, CallArgs& a) {
    const Value& x = required(a, 0, "value");
    int64_t n = 0;
    for (const Value& v : self.list_data().items) n += py_equal(v, x);
    return Value(n);
}

Value d_items(const Value& self, CallArgs&) {
    std::vector<Value> pairs;
    for (const auto& [k, v] : self.dict_data().items) pairs.push_back(Value::list({k, v}, true));
    return Value::list(std::move(pairs));
}

Value d_keys(const Value& self, CallArgs&) { return Value::list(self.iterate()); }

Value d_values(const Value& self, CallArgs&) {
    std::vector<Value> values;
    for (const auto& kv : self.dict_data().items) values.push_back(kv.second);
    return Value::list(std::move(values));
}

Value d_get(const Value& self, CallArgs& a) {
    const Value* v = self.dict_data().find(required(a, 0, "key"));
    if (v) return *v;
    const Value* fallback = a.get(1, "default");
    return fallback ? *fallback : Value::none();
}

struct MethodEntry {
    Value::Kind kind;
    std::string_view name;
    Method fn;
};

constexpr MethodEntry kMethods[] = {
    {Value::Kind::String, "strip", s_strip},       {Value::Kind::String, "lstrip", s_lstrip},
    {Value::Kind::String, "rstrip", s_rstrip},     {Value::Kind::String, "split", s_split},
    {Value::Kind::String, "rsplit", s_rsplit},     {Value::Kind::String, "splitlines", s_splitlines},
    {Value::Kind::String, "startswith", s_startswith}, {Value::Kind::String, "endswith", s_endswith},
    {Value::Kind::String, "upper", s_upper},       {Value::Kind::String, "lower", s_lower},
    {Value::Kind::String, "title", s_title},       {Value::Kind::String, "capitalize", s_capitalize},
    {Value::Kind::String, "replace", s_replace},   {Value::Kind::String, "find", s_find},
    {Value::Kind::String, "rfind", s_rfind},       {Value::Kind::String, "index", s_index},
    {Value::Kind::String, "rindex", s_rindex},     {Value::Kind::String, "count", s_count},
    {Value::Kind::String, "join", s_join},         {Value::Kind::String, "format", s_format},
    {Value::Kind::String, "isdigit", all_chars<is_digit>}, {Value::Kind::String, "isalpha", all_chars<is_alpha>},
    {Value::Kind::String, "isalnum", all_chars<is_alnum>}, {Value::Kind::String, "isspace", all_chars<is_space>},
    {Value::Kind::String, "isupper", s_isupper},   {Value::Kind::String, "islower", s_islower},
    {Value::Kind::String, "ljust", s_ljust},       {Value::Kind::String, "rjust", s_rjust},
    {Value::Kind::String, "center", s_center},
    {Value::Kind::List, "index", l_index},         {Value::Kind::List, "count", l_count},
    {Value::Kind::Dict, "items", d_items},         {Value::Kind::Dict, "keys", d_keys},
    {Value::Kind::Dict, "values", d_values},       {Value::Kind::Dict, "get", d_get},
};

// Methods the immutable sandbox refuses.
constexpr std::string_view kUnsafeList[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
constexpr std::string_view kUnsafeDict[] = {"pop", "popitem", "update", "setdefault", "clear"};

// ------------------------------------------------------------ globals ----

Value g_range(Interpreter&, CallArgs& a) {
    std::vector<int64_t> bounds;
    for (const Value& v : a.positional) {
        if (!v.is_int() && !v.is_bool()) throw RenderError("'" + v.type_name() + "' object cannot be interpreted as an integer");
        bounds.push_back(v.as_int());
    }
    if (bounds.empty() || bounds.size() > 3) throw RenderError("range expected 1 to 3 arguments");
    const int64_t start = bounds.size() == 1 ? 0 : bounds[0];
    const int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
    const int64_t step = bounds.size() == 3 ? bounds[2] : 1;
    if (step == 0) throw RenderError("range() arg 3 must not be zero");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= 100000) {
            throw RenderError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        }
        out.emplace_back(i);
    }
    return Value::list(std::move(out));
}

Value fill_dict(Value d, CallArgs& a) {
    if (!a.positional.empty()) {
        if (!a.positional[0].is_dict()) throw RenderError("expected a mapping as the positional argument");
        for (const auto& [k, v] : a.positional[0].dict_data().items) d.dict_data().set(k, v);
    }
    for (auto& [k, v] : a.keyword) d.dict_data().set(Value(k), v);
    return d;
}

Value g_dict(Interpreter&, CallArgs& a) { return fill_dict(Value::dict(), a); }
Value g_namespace(Interpreter&, CallArgs& a) { return fill_dict(Value::make_namespace(), a); }

Value g_raise_exception(Interpreter&, CallArgs& a) {
    throw RenderError(a.positional.empty() ? std::string() : a.positional[0].to_str(), /*raised=*/true);
}

Value g_strftime_now(Interpreter& in, CallArgs& a) {
    if (a.positional.empty() || !a.positional[0].is_string()) throw RenderError("strftime_now() takes a format string");
    std::tm tm{};
    if (in.options().now) {
        tm = *in.options().now;
    } else {
        const std::time_t t = std::time(nullptr);
        localtime_r(&t, &tm);
    }
    char buf[512];
    const size_t n = std::strftime(buf, sizeof(buf), a.positional[0].str().c_str(), &tm);
    return Value(std::string(buf, n));
}

Value g_joiner(Interpreter&, CallArgs& a) {
    const std::string sep = a.positional.empty() ? ", " : a.positional[0].to_str();
    auto used = std::make_shared<bool>(false);
    return Value::function("joiner", [sep, used](Interpreter&, CallArgs&) -> Value {
        if (!*used) {
            *used = true;
            return Value("");
        }
        return Value(sep);
    });
}

}  // namespace

std::optional<Value> bind_method(const Value& self, const std::string& name) {
    for (const MethodEntry& m : kMethods) {
        if (m.kind == self.kind() && m.name == name && !self.is_namespace()) {
            const Method fn = m.fn;
            return Value::function(name, [self, fn](Interpreter&, CallArgs& args) { return fn(self, args); });
        }
    }
    const bool unsafe = (self.is_list() && std::find(std::begin(kUnsafeList), std::end(kUnsafeList), name) != std::end(kUnsafeList)) ||
                        (self.is_dict() && !self.is_namespace() &&
                         std::find(std::begin(kUnsafeDict), std::end(kUnsafeDict), name) != std::end(kUnsafeDict));
    if (unsafe) return Value::undefined("access to attribute '" + name + "' of '" + self.type_name() + "' object is unsafe.");
    return std::nullopt;
}

void add_globals(std::vector<std::pair<std::string, Value>>& scope) {
    scope.emplace_back("range", Value::function("range", g_range));
    scope.emplace_back("dict", Value::function("dict", g_dict));
    scope.emplace_back("namespace", Value::function("namespace", g_namespace));
    scope.emplace_back("joiner", Value::function("joiner", g_joiner));
    scope.emplace_back("raise_exception", Value::function("raise_exception", g_raise_exception));
    scope.emplace_back("strftime_now", Value::function("strftime_now", g_strftime_now));
}

}  // namespace lantern::jinja
