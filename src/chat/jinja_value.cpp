#include "chat/jinja_value.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "chat/jinja_text.h"

namespace lantern::jinja {

// ----------------------------------------------------------- CallArgs ----

const Value* CallArgs::get(size_t index, std::string_view name) const {
    if (index < positional.size()) return &positional[index];
    for (const auto& [key, value] : keyword) {
        if (key == name) return &value;
    }
    return nullptr;
}

void CallArgs::expect(std::string_view fn, size_t max_positional,
                      std::initializer_list<std::string_view> allowed) const {
    if (positional.size() > max_positional) {
        throw RenderError(std::string(fn) + "() takes at most " + std::to_string(max_positional) +
                          " positional arguments (" + std::to_string(positional.size()) + " given)");
    }
    for (const auto& kw : keyword) {
        if (std::find(allowed.begin(), allowed.end(), kw.first) == allowed.end()) {
            throw RenderError(std::string(fn) + "() got an unexpected keyword argument '" + kw.first + "'");
        }
    }
}

// ----------------------------------------------------------- DictData ----

Value* DictData::find(std::string_view key) {
    if (items.size() <= kLinear) {
        for (auto& [k, v] : items) {
            if (k.is_string() && k.str() == key) return &v;
        }
        return nullptr;
    }
    for (; indexed_ < items.size(); ++indexed_) {
        const Value& k = items[indexed_].first;
        if (k.is_string()) index_.emplace(std::string_view(k.str()), indexed_);  // the first of equal keys
    }
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items[it->second].second;
}

const Value* DictData::find(std::string_view key) const { return const_cast<DictData*>(this)->find(key); }

const Value* DictData::find(const Value& key) const {
    if (key.is_string()) return find(std::string_view(key.str()));
    for (const auto& [k, v] : items) {
        if (py_equal(k, key)) return &v;
    }
    return nullptr;
}

void DictData::set(Value key, Value value) {
    const int deeper = 1 + std::max(key.nesting(), value.nesting());
    check_nesting(deeper);
    nesting = std::max(nesting, deeper);
    Value* existing = nullptr;
    if (key.is_string()) {
        existing = find(std::string_view(key.str()));
    } else {
        for (auto& [k, v] : items) {
            if (py_equal(k, key)) {
                existing = &v;
                break;
            }
        }
    }
    if (existing != nullptr) {
        *existing = std::move(value);
        return;
    }
    check_items(items.size() + 1, "a dict");
    items.emplace_back(std::move(key), std::move(value));
}

void check_bytes(size_t bytes, const char* what) {
    if (bytes > Limits::kMaxBytes) {
        throw RenderError(std::string(what) + " longer than " + std::to_string(Limits::kMaxBytes >> 20) + " MiB");
    }
}

void integer_overflow() { throw RenderError("integer overflow (the template's integers are 64-bit)"); }

void check_nesting(int nesting) {
    if (nesting > Limits::kMaxNesting) {
        throw RenderError("values nested deeper than " + std::to_string(Limits::kMaxNesting) + " lists and dicts");
    }
}

void check_items(size_t items, const char* what) {
    if (items > Limits::kMaxItems) {
        throw RenderError(std::string(what) + " of more than " + std::to_string(Limits::kMaxItems) + " items");
    }
}

// -------------------------------------------------------------- Value ----

Value Value::undefined(std::string hint) {
    Value v;
    v.str_ = std::make_shared<const std::string>(std::move(hint));
    return v;
}

Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}

Value Value::list(std::vector<Value> items, bool tuple) {
    check_items(items.size(), "a list");
    int nesting = 1;
    for (const Value& item : items) nesting = std::max(nesting, 1 + item.nesting());
    check_nesting(nesting);
    Value v;
    v.kind_ = Kind::List;
    v.list_ = std::make_shared<ListData>(ListData{std::move(items), tuple, nesting});
    return v;
}

Value Value::dict() {
    Value v;
    v.kind_ = Kind::Dict;
    v.dict_ = std::make_shared<DictData>();
    return v;
}

Value Value::make_namespace() {
    Value v = dict();
    v.dict_->is_namespace = true;
    return v;
}

Value Value::function(std::string name, NativeFunction fn) {
    Value v;
    v.kind_ = Kind::Function;
    v.fn_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
}

namespace {

Value json_value(const nlohmann::ordered_json& j, int depth);

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return json_value(j, 0); }

namespace {

Value json_value(const nlohmann::ordered_json& j, int depth) {
    if (depth >= Limits::kMaxNesting) {
        throw RenderError("JSON nested deeper than " + std::to_string(Limits::kMaxNesting) + " levels");
    }
    using Value = lantern::jinja::Value;
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null: return Value::none();
        case nlohmann::ordered_json::value_t::boolean: return Value(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer: return Value(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = j.get<uint64_t>();
            return u <= uint64_t(INT64_MAX) ? Value(int64_t(u)) : Value(double(u));
        }
        case nlohmann::ordered_json::value_t::number_float: return Value(j.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            std::vector<Value> items;
            items.reserve(j.size());
            for (const auto& e : j) items.push_back(json_value(e, depth + 1));
            return Value::list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            Value d = Value::dict();
            DictData& data = d.dict_data();
            check_items(j.size(), "a dict");
            for (const auto& [k, e] : j.items()) {
                data.items.emplace_back(Value(k), json_value(e, depth + 1));
                data.nesting = std::max(data.nesting, 1 + data.items.back().second.nesting());
            }
            return d;
        }
        default: return Value::none();  // binary / discarded: not produced by the JSON parser
    }
}

}  // namespace

bool Value::as_bool() const {
    assert(kind_ == Kind::Bool);
    return int_ != 0;
}

int64_t Value::as_int() const {
    assert(kind_ == Kind::Int || kind_ == Kind::Bool);
    return int_;
}

double Value::as_double() const {
    assert(is_number());
    return kind_ == Kind::Float ? float_ : double(int_);
}

const std::string& Value::undefined_hint() const {
    static const std::string unknown = "undefined value";
    return kind_ == Kind::Undefined && str_ ? *str_ : unknown;
}

const std::string& Value::str() const {
    assert(kind_ == Kind::String);
    return *str_;
}

ListData& Value::list_data() const {
    assert(kind_ == Kind::List);
    return *list_;
}

DictData& Value::dict_data() const {
    assert(kind_ == Kind::Dict);
    return *dict_;
}

const Function& Value::function_data() const {
    assert(kind_ == Kind::Function);
    return *fn_;
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::Undefined:
        case Kind::None: return false;
        case Kind::Bool:
        case Kind::Int: return int_ != 0;
        case Kind::Float: return float_ != 0.0;
        case Kind::String: return !str_->empty();
        case Kind::List: return !list_->items.empty();
        case Kind::Dict: return dict_->is_namespace || !dict_->items.empty();
        case Kind::Function: return true;
    }
    return false;
}

std::string Value::type_name() const {
    switch (kind_) {
        case Kind::Undefined: return "Undefined";
        case Kind::None: return "NoneType";
        case Kind::Bool: return "bool";
        case Kind::Int: return "int";
        case Kind::Float: return "float";
        case Kind::String: return "str";
        case Kind::List: return list_->tuple ? "tuple" : "list";
        case Kind::Dict: return dict_->is_namespace ? "Namespace" : "dict";
        case Kind::Function: return "function";
    }
    return "object";
}

std::string Value::to_str() const {
    switch (kind_) {
        case Kind::Undefined: return "";
        case Kind::String: return *str_;
        default: return repr();
    }
}

std::string Value::repr() const {
    switch (kind_) {
        case Kind::Undefined: return "Undefined";
        case Kind::None: return "None";
        case Kind::Bool: return int_ ? "True" : "False";
        case Kind::Int: return std::to_string(int_);
        case Kind::Float: return py_repr_float(float_);
        case Kind::String: return py_repr_string(*str_);
        case Kind::List: {
            std::string out = list_->tuple ? "(" : "[";
            for (size_t i = 0; i < list_->items.size(); ++i) {
                if (i) out += ", ";
                out += list_->items[i].repr();
                check_bytes(out.size(), "a list's text");
            }
            if (list_->tuple && list_->items.size() == 1) out += ",";
            return out + (list_->tuple ? ")" : "]");
        }
        case Kind::Dict: {
            std::string out = "{";
            for (size_t i = 0; i < dict_->items.size(); ++i) {
                if (i) out += ", ";
                out += dict_->items[i].first.repr() + ": " + dict_->items[i].second.repr();
                check_bytes(out.size(), "a dict's text");
            }
            out += "}";
            return dict_->is_namespace ? "<Namespace " + out + ">" : out;
        }
        case Kind::Function: return "<function " + fn_->name + ">";
    }
    return "";
}

std::vector<Value> Value::iterate() const {
    switch (kind_) {
        case Kind::Undefined: return {};
        case Kind::List: return list_->items;
        case Kind::Dict: {
            if (dict_->is_namespace) break;
            std::vector<Value> keys;
            keys.reserve(dict_->items.size());
            for (const auto& kv : dict_->items) keys.push_back(kv.first);
            return keys;
        }
        case Kind::String: {
            std::vector<Value> chars;
            std::string one;
            const std::u32string text = utf8_decode(*str_);
            check_items(text.size(), "a string iterated");
            chars.reserve(text.size());
            for (char32_t c : text) {
                one.clear();
                utf8_append(one, c);
                chars.emplace_back(one);
            }
            return chars;
        }
        default: break;
    }
    throw RenderError("'" + type_name() + "' object is not iterable");
}

bool Value::same_object(const Value& other) const {
    if (kind_ != other.kind_) return false;
    switch (kind_) {
        case Kind::List: return list_ == other.list_;
        case Kind::Dict: return dict_ == other.dict_;
        case Kind::Function: return fn_ == other.fn_;
        default: return py_equal(*this, other);
    }
}

// ----------------------------------------------------- comparisons ----

bool py_equal(const Value& a, const Value& b) {
    // Identity first, as CPython's containers compare their items: a list
    // built as [x, x] from [x, x] ... is not walked once per path.
    if ((a.is_list() || a.is_dict()) && a.same_object(b)) return true;
    if (a.is_number() && b.is_number()) {
        if (!a.is_float() && !b.is_float()) return a.as_int() == b.as_int();
        return a.as_double() == b.as_double();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None: return true;
        case Value::Kind::String: return a.str() == b.str();
        case Value::Kind::List: {
            const auto& x = a.list_data();
            const auto& y = b.list_data();
            if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
            for (size_t i = 0; i < x.items.size(); ++i) {
                if (!py_equal(x.items[i], y.items[i])) return false;
            }
            return true;
        }
        case Value::Kind::Dict: {
            const auto& x = a.dict_data();
            const auto& y = b.dict_data();
            if (x.is_namespace || y.is_namespace) return a.same_object(b);
            if (x.items.size() != y.items.size()) return false;
            for (const auto& [k, v] : x.items) {
                const Value* other = y.find(k);
                if (!other || !py_equal(v, *other)) return false;
            }
            return true;
        }
        case Value::Kind::Function: return a.same_object(b);
        default: return false;
    }
}

bool py_less(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (!a.is_float() && !b.is_float()) return a.as_int() < b.as_int();
        return a.as_double() < b.as_double();
    }
    if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 keeps code point order
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        const auto& x = a.list_data().items;
        const auto& y = b.list_data().items;
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (!py_equal(x[i], y[i])) return py_less(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    if (a.is_undefined() || b.is_undefined()) {
        throw RenderError(a.is_undefined() ? a.undefined_hint() : b.undefined_hint());
    }
    throw RenderError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool py_contains(const Value& haystack, const Value& needle) {
    switch (haystack.kind()) {
        case Value::Kind::String:
            if (!needle.is_string()) {
                throw RenderError("'in <string>' requires string as left operand, not " + needle.type_name());
            }
            return haystack.str().find(needle.str()) != std::string::npos;
        case Value::Kind::List:
            for (const Value& item : haystack.list_data().items) {
                if (py_equal(item, needle)) return true;
            }
            return false;
        case Value::Kind::Dict:
            if (haystack.is_namespace()) break;
            if ((needle.is_list() && !needle.is_tuple()) || needle.is_dict()) {
                throw RenderError("unhashable type: '" + needle.type_name() + "'");
            }
            return haystack.dict_data().find(needle) != nullptr;
        case Value::Kind::Undefined: return false;
        default: break;
    }
    throw RenderError("argument of type '" + haystack.type_name() + "' is not iterable");
}

// -------------------------------------------------------------- JSON ----

namespace {

struct JsonWriter {
    int indent;
    bool ensure_ascii;
    bool sort_keys;
    std::string item_sep, key_sep;
    std::string out;

    void newline(int level) {
        check_bytes(out.size() + 1 + size_t(indent) * size_t(level), "tojson's text");
        out += '\n';
        out.append(size_t(indent) * size_t(level), ' ');
    }

    std::string key_text(const Value& k) {
        switch (k.kind()) {
            case Value::Kind::String: return k.str();
            case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
            case Value::Kind::None: return "null";
            case Value::Kind::Int: return std::to_string(k.as_int());
            case Value::Kind::Float: return py_repr_float(k.as_double());
            default: throw RenderError("keys must be str, int, float, bool or None, not " + k.type_name());
        }
    }

    void write(const Value& v, int level) {
        switch (v.kind()) {
            case Value::Kind::None: out += "null"; return;
            case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
            case Value::Kind::Int: out += std::to_string(v.as_int()); return;
            case Value::Kind::Float: {
                const double d = v.as_double();
                if (std::isnan(d)) out += "NaN";
                else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
                else out += py_repr_float(d);
                return;
            }
            case Value::Kind::String: out += json_quote(v.str(), ensure_ascii); return;
            case Value::Kind::List: {
                const auto& items = v.list_data().items;
                if (items.empty()) {
                    out += "[]";
                    return;
                }
                out += '[';
                for (size_t i = 0; i < items.size(); ++i) {
                    if (i) out += item_sep;
                    if (indent >= 0) newline(level + 1);
                    write(items[i], level + 1);
                    check_bytes(out.size(), "tojson's text");
                }
                if (indent >= 0) newline(level);
                out += ']';
                return;
            }
            case Value::Kind::Dict: {
                if (v.is_namespace()) break;
                std::vector<std::pair<std::string, const Value*>> entries;
                for (const auto& [k, e] : v.dict_data().items) entries.emplace_back(key_text(k), &e);
                if (sort_keys) {
                    std::stable_sort(entries.begin(), entries.end(),
                                     [](const auto& a, const auto& b) { return a.first < b.first; });
                }
                if (entries.empty()) {
                    out += "{}";
                    return;
                }
                out += '{';
                for (size_t i = 0; i < entries.size(); ++i) {
                    if (i) out += item_sep;
                    if (indent >= 0) newline(level + 1);
                    out += json_quote(entries[i].first, ensure_ascii);
                    out += key_sep;
                    write(*entries[i].second, level + 1);
                    check_bytes(out.size(), "tojson's text");
                }
                if (indent >= 0) newline(level);
                out += '}';
                return;
            }
            default: break;
        }
        throw RenderError("Object of type " + v.type_name() + " is not JSON serializable");
    }
};

}  // namespace

std::string to_json(const Value& v, int indent, bool ensure_ascii, bool sort_keys,
                    const std::optional<std::pair<std::string, std::string>>& separators) {
    JsonWriter w{indent, ensure_ascii, sort_keys, indent >= 0 ? "," : ", ", ": ", {}};
    if (separators) {
        w.item_sep = separators->first;
        w.key_sep = separators->second;
    }
    w.write(v, 0);
    return std::move(w.out);
}

}  // namespace lantern::jinja
