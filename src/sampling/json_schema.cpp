#include "sampling/json_schema.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lantern/error.h"
#include "sampling/json_chars.h"

namespace lantern {
namespace {

using json = nlohmann::json;

using json_chars::is_digit;
using json_chars::is_hex;
using json_chars::is_space;

// The kind of value a first byte starts (JsonSchema::Node::branches' index), -1: none.
int kind_of_byte(unsigned char c) {
    switch (c) {
        case '{': return 0;
        case '[': return 1;
        case '"': return 2;
        case 't':
        case 'f': return 4;
        case 'n': return 5;
        default: return c == '-' || is_digit(c) ? 3 : -1;
    }
}

constexpr uint8_t kKindTypes[6] = {JsonSchema::kObject, JsonSchema::kArray, JsonSchema::kString,
                                   JsonSchema::kNumber | JsonSchema::kInteger, JsonSchema::kBool, JsonSchema::kNull};

// The formats held as patterns: strings every one of which the format
// takes, a subset of them (an email's local part is dot-separated runs of
// letters, digits and _%+-, its domain has a top-level label of letters; a
// URI is a scheme, a colon and URI characters or %XX escapes; a hostname's
// labels are at most 20 characters; an IPv6 address is written in full,
// eight groups; a duration has days, hours, minutes and seconds, each of a
// few digits). An email's local part of at most 64 characters is not held.
struct FormatPattern {
    const char* name;
    const char* pattern;
    uint32_t max_length;  // the format's own limit (UINT32_MAX: none)
};
constexpr FormatPattern kFormatPatterns[] = {
    {"email",
     R"(^[A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)"
     R"((\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}$)",
     254},
    {"hostname", R"(^[A-Za-z0-9]([A-Za-z0-9-]{0,18}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,18}[A-Za-z0-9])?)*$)", 253},
    {"ipv4", R"(^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$)", UINT32_MAX},
    {"ipv6", R"(^([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}$)", UINT32_MAX},
    {"uri", R"(^[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})+$)", UINT32_MAX},
    // Every part, each of few digits: P1DT2H30M0S (a small model given
    // open-ended digits may write them for ever).
    {"duration", R"(^P\d{1,4}DT\d{1,2}H\d{1,2}M\d{1,2}(\.\d{1,3})?S$)", UINT32_MAX},
};

// Null: the format is not one of them.
const FormatPattern* format_as_pattern(const std::string& format) {
    for (const FormatPattern& f : kFormatPatterns) {
        if (format == f.name) return &f;
    }
    return nullptr;
}

uint64_t pow10_u64(int e) {
    uint64_t v = 1;
    while (e-- > 0) v *= 10;
    return v;
}

// A number as JSON writes it ("0.01", "2.5", "1e-05", "30") as p / 10^d
// with 0 < p <= 10^9 and d <= 9; false if it is not one.
bool decimal_of(const std::string& text, uint32_t& p, uint8_t& d) {
    uint64_t digits = 0;
    int scale = 0, significant = 0;
    size_t i = 0;
    bool point = false;
    for (; i < text.size() && (is_digit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
        if (text[i] == '.') {
            point = true;
            continue;
        }
        if (digits == 0 && text[i] == '0') {
            if (point) ++scale;
            continue;
        }
        if (++significant > 18) return false;
        digits = digits * 10 + static_cast<uint64_t>(text[i] - '0');
        if (point) ++scale;
    }
    if (i < text.size()) {
        if (text[i] != 'e' && text[i] != 'E') return false;
        const int e = std::atoi(text.c_str() + i + 1);
        if (e < -30 || e > 30) return false;
        scale -= e;
    }
    while (digits != 0 && digits % 10 == 0 && scale > 0) digits /= 10, --scale;
    while (scale < 0 && digits != 0 && digits <= 100000000) digits *= 10, ++scale;
    if (digits == 0 || digits > 1000000000 || scale < 0 || scale > 9) return false;
    p = static_cast<uint32_t>(digits);
    d = static_cast<uint8_t>(scale);
    return true;
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
    throw Error(ErrorCode::InvalidArgument, "JSON schema " + (path.empty() ? std::string("root") : path) + ": " + why);
}

}  // namespace

class SchemaCompiler {
public:
    static constexpr int kMaxNodes = 16384;  // SchemaState's frames hold node numbers in 16 bits

    SchemaCompiler(JsonSchema& out, const json& root) : s_(out), root_(root) {}

    int compile(const json& j, const std::string& path, int depth) {
        if (depth > SchemaState::kMaxDepth) refuse(path, "nested too deeply");
        if (j.is_boolean()) {
            if (!j.get<bool>()) refuse(path, "false allows nothing");
            return 0;
        }
        if (!j.is_object()) refuse(path, "a schema must be an object");
        if (j.contains("$ref")) return reference(j, path, depth);
        if (j.contains("allOf")) return all_of(j, path, depth);
        const int index = static_cast<int>(s_.nodes_.size());
        if (index >= kMaxNodes) refuse(path, "more than " + std::to_string(kMaxNodes) + " subschemas");
        s_.nodes_.emplace_back();  // reserved: a $ref may point here while it is compiled
        finished_.push_back(false);
        JsonSchema::Node n;
        bool typed = false;
        std::vector<std::string> required;
        const json* any_of = nullptr;
        const FormatPattern* format_pattern = nullptr;
        int extra = -2;           // additionalProperties' node (-1: false; -2: not given)
        bool items_none = false;  // items: false
        for (const auto& [key, v] : j.items()) {
            const std::string at = path + "." + key;
            if (is_annotation(key) || key == "$defs" || key == "definitions") {
                continue;
            } else if (key == "minLength" || key == "maxLength" || key == "minItems" || key == "maxItems" ||
                       key == "minProperties" || key == "maxProperties") {
                if (!v.is_number_unsigned()) refuse(at, "must be a count");
                const uint32_t x = static_cast<uint32_t>(std::min<uint64_t>(v.get<uint64_t>(), UINT32_MAX - 1));
                (key == "minLength"       ? n.min_length
                 : key == "maxLength"     ? n.max_length
                 : key == "minItems"      ? n.min_items
                 : key == "maxItems"      ? n.max_items
                 : key == "minProperties" ? n.min_props
                                          : n.max_props) = x;
            } else if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" || key == "exclusiveMaximum") {
                if (!v.is_number()) refuse(at, "must be a number");
                const double x = v.get<double>();
                const bool open = key.rfind("exclusive", 0) == 0;
                n.bounded = true;
                if (key == "minimum" || key == "exclusiveMinimum") {
                    if (x > n.min || (x == n.min && open)) n.min = x, n.min_open = open;
                } else if (x < n.max || (x == n.max && open)) {
                    n.max = x, n.max_open = open;
                }
            } else if (key == "multipleOf") {
                if (!v.is_number() || !decimal_of(v.dump(), n.multiple, n.multiple_scale)) {
                    refuse(at, "only decimals of at most 9 significant digits and 9 after the point are supported");
                }
            } else if (key == "format") {
                using F = JsonSchema::Node::Format;
                const std::string f = v.is_string() ? v.get<std::string>() : std::string();
                n.format = f == "date" ? F::Date : f == "time" ? F::Time : f == "date-time" ? F::DateTime : f == "uuid" ? F::Uuid : F::None;
                format_pattern = format_as_pattern(f);
                if (n.format == F::None && format_pattern == nullptr) {
                    refuse(at, "'" + (v.is_string() ? f : v.dump()) + "' is not supported (date, time, date-time, uuid, email, hostname, ipv4, ipv6, uri, duration are)");
                }
                if (format_pattern != nullptr) n.max_length = std::min(n.max_length, format_pattern->max_length);
            } else if (key == "pattern") {
                if (!v.is_string()) refuse(at, "must be a string");
                n.pattern = add_pattern(v.get<std::string>(), at);
            } else if (key == "type") {
                n.types = 0;
                typed = true;
                for (const json& t : v.is_array() ? v : json::array({v})) {
                    if (!t.is_string()) refuse(at, "types are strings");
                    n.types |= type_bit(t.get<std::string>(), at);
                }
            } else if (key == "properties") {
                if (!v.is_object()) refuse(at, "must be an object");
                if (v.size() > 64) refuse(at, "at most 64 properties");
                n.free = false;
                for (const auto& [name, sub] : v.items()) {
                    n.keys.push_back(json(name).dump());
                    n.key_nodes.push_back(compile(sub, at + "." + name, depth + 1));
                }
            } else if (key == "required") {
                if (!v.is_array()) refuse(at, "must be a list of property names");
                for (const json& r : v) {
                    if (!r.is_string()) refuse(at, "must be a list of property names");
                    required.push_back(r.get<std::string>());
                }
            } else if (key == "additionalProperties") {
                extra = v.is_boolean() ? (v.get<bool>() ? 0 : -1) : compile(v, at, depth + 1);
            } else if (key == "items") {
                if (v.is_boolean() && !v.get<bool>()) {
                    items_none = true;
                } else {
                    n.items = compile(v, at, depth + 1);
                }
            } else if (key == "prefixItems") {
                if (!v.is_array()) refuse(at, "must be a list of schemas");
                for (size_t i = 0; i < v.size(); ++i) n.prefix.push_back(compile(v[i], at + "[" + std::to_string(i) + "]", depth + 1));
            } else if (key == "uniqueItems" && v.is_boolean() && !v.get<bool>()) {
                continue;  // the default
            } else if (key == "enum" || key == "const") {
                const json values = key == "const" ? json::array({v}) : v;
                if (!values.is_array() || values.empty()) refuse(at, "must be a non-empty list");
                if (values.size() > 64) refuse(at, "at most 64 values");
                for (const json& x : values) {
                    if (x.is_object() || x.is_array()) refuse(at, "only strings, numbers, booleans and null");
                    n.values.push_back(x.dump());
                }
            } else if (key == "anyOf") {
                if (!v.is_array() || v.empty()) refuse(at, "must be a non-empty list of schemas");
                any_of = &v;
            } else {
                refuse(at, "'" + key + "' is not supported (it would not be enforced)");
            }
        }
        if (!required.empty() && n.free) refuse(path + ".required", "needs properties");
        for (const std::string& r : required) {
            const std::string quoted = json(r).dump();
            size_t i = 0;
            while (i < n.keys.size() && n.keys[i] != quoted) ++i;
            if (i == n.keys.size()) refuse(path + ".required", "'" + r + "' is not among the properties");
            n.required |= uint64_t{1} << i;
        }
        n.extra = extra != -2 ? extra : n.free ? 0 : -1;
        const bool object_words = !n.free || extra != -2 || n.min_props > 0 || n.max_props != UINT32_MAX;
        const bool array_words = n.items != 0 || items_none || !n.prefix.empty();
        if (items_none) n.max_items = std::min(n.max_items, static_cast<uint32_t>(n.prefix.size()));
        if (!typed) {
            if (object_words) n.types = JsonSchema::kObject;
            else if (array_words) n.types = JsonSchema::kArray;
        }
        if (n.min_props > n.max_props) refuse(path, "minProperties above maxProperties");
        if (n.extra < 0 && n.min_props > n.keys.size()) refuse(path + ".minProperties", "more than the properties there are");
        if (static_cast<uint32_t>(std::popcount(n.required)) > n.max_props) refuse(path + ".maxProperties", "fewer than the required properties");
        if (any_of != nullptr) {
            if (typed || object_words || array_words || !n.values.empty()) {
                refuse(path, "anyOf beside other keywords is not supported");
            }
            n.any_of = true;
            n.types = 0;
            for (size_t b = 0; b < any_of->size(); ++b) {
                const int child = compile((*any_of)[b], path + ".anyOf[" + std::to_string(b) + "]", depth + 1);
                if (in_progress(child)) refuse(path + ".anyOf", "a branch that refers back to itself is not supported");
                const JsonSchema::Node& c = s_.nodes_[static_cast<size_t>(child)];
                for (int k = 0; k < 6; ++k) {
                    std::vector<int>& to = n.branches[k];
                    const std::vector<int> leaves = c.any_of ? c.branches[k] : starts_kind(child, k) ? std::vector<int>{child}
                                                                                                     : std::vector<int>{};
                    for (int leaf : leaves) {
                        if (std::find(to.begin(), to.end(), leaf) == to.end()) to.push_back(leaf);
                    }
                    if (to.size() > static_cast<size_t>(SchemaState::kMaxPaths)) {
                        refuse(path + ".anyOf", "more than " + std::to_string(SchemaState::kMaxPaths) + " branches of one type");
                    }
                    if (!to.empty()) n.types |= kKindTypes[k];
                }
            }
        }
        if (n.min_length > n.max_length || n.min_items > n.max_items) refuse(path, "a minimum above its maximum");
        if (format_pattern != nullptr) {
            if (n.pattern >= 0) refuse(path, "pattern beside format is not supported");
            n.pattern = add_pattern(format_pattern->pattern, path);
        }
        if (n.pattern >= 0 && (!n.values.empty() || n.format != JsonSchema::Node::Format::None || n.any_of)) {
            refuse(path, "pattern beside enum, const, format or anyOf is not supported");
        }
        if (n.pattern >= 0) {
            const int most = s_.patterns_[static_cast<size_t>(n.pattern)].max_left(JsonPattern::kStart);
            if (most != JsonPattern::kUnbounded && static_cast<uint32_t>(most) < n.min_length) {
                refuse(path, "no text of the pattern is minLength characters long");
            }
        }
        if (n.multiple > 0 && (!n.values.empty() || n.any_of)) refuse(path, "multipleOf beside enum, const or anyOf is not supported");
        if (n.multiple > 0 && n.multiple_scale > 0 && (n.types & JsonSchema::kNumber) == 0) {
            // Integers: a multiple of p / 10^d is one of p / gcd(p, 10^d).
            const uint64_t p = n.multiple;
            n.multiple = static_cast<uint32_t>(p / std::gcd(p, pow10_u64(n.multiple_scale)));
            n.multiple_scale = 0;
        }
        if (n.multiple > 0 && n.bounded) {
            // The first multiple in the range (as doubles: within rounding).
            const double m = static_cast<double>(n.multiple) / static_cast<double>(pow10_u64(n.multiple_scale));
            double first = std::ceil(n.min / m) * m;
            if (first == n.min && n.min_open) first += m;
            if (first > n.max || (first == n.max && n.max_open)) refuse(path, "no multiple of multipleOf within minimum and maximum");
        }
        if (n.bounded) {
            if (!n.values.empty() || n.any_of) refuse(path, "minimum/maximum beside enum, const or anyOf is not supported");
            if (n.min > n.max || (n.min == n.max && (n.min_open || n.max_open))) refuse(path, "a minimum above its maximum");
            const bool integers = (n.types & JsonSchema::kNumber) == 0;
            if (integers && (n.min_open ? std::floor(n.min) + 1 : std::ceil(n.min)) > (n.max_open ? std::ceil(n.max) - 1 : std::floor(n.max))) {
                refuse(path, "no integer within minimum and maximum");
            }
        }
        s_.nodes_[static_cast<size_t>(index)] = std::move(n);
        finished_[static_cast<size_t>(index)] = true;
        return index;
    }

private:
    // The pattern compiled into the schema (JsonSchema::pattern's index).
    int add_pattern(std::string_view source, const std::string& at) {
        try {
            s_.patterns_.push_back(JsonPattern::compile(source));
        } catch (const Error& e) {
            refuse(at, e.what());
        }
        return static_cast<int>(s_.patterns_.size()) - 1;
    }

    static bool is_annotation(const std::string& key) {
        return key == "title" || key == "description" || key == "default" || key == "examples" || key == "$schema" ||
               key == "$id" || key == "strict" || key == "$comment" || key == "deprecated" || key == "readOnly" ||
               key == "writeOnly";
    }

    bool in_progress(int i) const { return !finished_[static_cast<size_t>(i)]; }

    // {"allOf": [schema]}, annotations beside it: that schema. (Several
    // schemas would have to be merged into one node, keyword by keyword.)
    int all_of(const json& j, const std::string& path, int depth) {
        for (const auto& [key, v] : j.items()) {
            if (key != "allOf" && key != "$defs" && key != "definitions" && !is_annotation(key)) {
                refuse(path + "." + key, "beside allOf is not supported");
            }
        }
        const json& all = j["allOf"];
        if (!all.is_array() || all.empty()) refuse(path + ".allOf", "must be a non-empty list of schemas");
        if (all.size() > 1) refuse(path + ".allOf", "of several schemas is not supported (only of one)");
        return compile(all[0], path + ".allOf[0]", depth + 1);
    }

    // {"$ref": "#/$defs/NAME"} (or #/definitions/NAME), annotations beside
    // it: the definition's node, compiled once.
    int reference(const json& j, const std::string& path, int depth) {
        for (const auto& [key, v] : j.items()) {
            if (key != "$ref" && key != "$defs" && key != "definitions" && !is_annotation(key)) {
                refuse(path + "." + key, "beside $ref is not supported");
            }
        }
        const json& ref = j["$ref"];
        if (!ref.is_string()) refuse(path + ".$ref", "must be a string");
        const std::string r = ref.get<std::string>();
        for (const char* container : {"$defs", "definitions"}) {
            const std::string prefix = std::string("#/") + container + "/";
            if (r.rfind(prefix, 0) != 0) continue;
            if (auto it = refs_.find(r); it != refs_.end()) return it->second;
            const std::string name = r.substr(prefix.size());
            if (!root_.contains(container) || !root_[container].is_object() || !root_[container].contains(name)) {
                refuse(path + ".$ref", "'" + r + "' is not defined");
            }
            // Registered before it is compiled, so that it may refer to itself.
            refs_[r] = static_cast<int>(s_.nodes_.size());
            const int got = compile(root_[container][name], r.substr(1), depth + 1);
            refs_[r] = got;  // the same, unless the definition is itself a $ref or `true`
            return got;
        }
        refuse(path + ".$ref", "only '#/$defs/NAME' and '#/definitions/NAME' are supported");
    }

    static uint8_t type_bit(const std::string& t, const std::string& at) {
        if (t == "object") return JsonSchema::kObject;
        if (t == "array") return JsonSchema::kArray;
        if (t == "string") return JsonSchema::kString;
        if (t == "number") return JsonSchema::kNumber | JsonSchema::kInteger;
        if (t == "integer") return JsonSchema::kInteger;
        if (t == "boolean") return JsonSchema::kBool;
        if (t == "null") return JsonSchema::kNull;
        refuse(at, "unknown type '" + t + "'");
    }

    // Node i can start with a byte of kind k.
    bool starts_kind(int i, int k) const {
        const JsonSchema::Node& n = s_.nodes_[static_cast<size_t>(i)];
        if (n.any_of) return !n.branches[k].empty();
        if (!n.values.empty()) {
            for (const std::string& v : n.values) {
                if (kind_of_byte(static_cast<unsigned char>(v[0])) == k) return true;
            }
            return false;
        }
        return (n.types & kKindTypes[k]) != 0;
    }

    JsonSchema& s_;
    const json& root_;
    std::map<std::string, int> refs_;  // "$ref" text -> node
    std::vector<bool> finished_{true};  // per node: compiled to the end (node 0, any value, always)
};

std::shared_ptr<const JsonSchema> JsonSchema::parse(std::string_view text) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) refuse("", "not valid JSON");
    auto s = std::make_shared<JsonSchema>();
    s->nodes_.emplace_back();  // 0: any value
    SchemaCompiler c(*s, j);
    s->root_ = c.compile(j, "", 0);
    return s;
}

SchemaState::SchemaState(std::shared_ptr<const JsonSchema> schema) : schema_(std::move(schema)) {
    if (!schema_) throw Error(ErrorCode::InvalidArgument, "SchemaState: no schema");
    paths_.push_back(Path{schema_.get(), {}});
}

namespace {

// Adds p to the readings unless an identical one is there or there are
// kMaxPaths already.
template <class Path>
void keep_path(std::vector<Path>& paths, Path&& p, size_t most) {
    if (paths.size() >= most) return;
    for (const Path& q : paths) {
        if (q.same_as(p)) return;
    }
    paths.push_back(std::move(p));
}

}  // namespace

// Every path takes the byte or is dropped; the forks join the survivors.
// Steps in place, so a failure leaves the state changed (the callers work
// on a copy); one path and no fork (the common case) allocates nothing.
bool SchemaState::feed_byte(unsigned char c) {
    constexpr size_t kMost = kMaxPaths;
    std::vector<Path> forks, next;
    for (Path& p : paths_) {
        forks.clear();
        const bool ok = p.step(c, forks);
        if (paths_.size() == 1 && forks.empty()) return ok;
        if (ok) keep_path(next, std::move(p), kMost);
        for (Path& f : forks) keep_path(next, std::move(f), kMost);
    }
    if (next.empty()) return false;
    paths_ = std::move(next);
    return true;
}

bool SchemaState::feed(unsigned char c) {
    SchemaState next = *this;
    if (!next.feed_byte(c)) return false;
    *this = std::move(next);
    return true;
}

bool SchemaState::feed(const std::string& text) {
    SchemaState next = *this;
    for (char c : text) {
        if (!next.feed_byte(static_cast<unsigned char>(c))) return false;
    }
    *this = std::move(next);
    return true;
}

bool SchemaState::complete() const {
    return std::any_of(paths_.begin(), paths_.end(), [](const Path& p) { return p.complete(); });
}

bool SchemaState::Path::same_as(const Path& o) const {
    return depth == o.depth && done == o.done && spaces == o.spaces && std::equal(frames, frames + depth, o.frames);
}

bool SchemaState::Path::complete() const {
    if (depth == 0) return done;
    if (depth > 1) return false;
    // A top-level number, or a number or literal of an enum, ends where the
    // text does.
    const Frame& f = frames[0];
    if (f.kind == Kind::Number) {
        return (f.phase == 1 || f.phase == 2 || f.phase == 4 || f.phase >= 7) && number_may_end(f);
    }
    if (f.kind != Kind::Match) return false;
    const std::vector<std::string>& texts = match_texts(f);
    for (size_t i = 0; i < texts.size(); ++i) {
        if ((f.set >> i & 1) != 0 && texts[i].size() == f.pos) return true;
    }
    return false;
}

bool SchemaState::Path::push(const Frame& f) {
    if (depth >= kMaxDepth) return false;
    frames[depth++] = f;
    return true;
}

// The value on top ended: its parent goes on after it.
bool SchemaState::Path::end_value() {
    --depth;
    if (depth == 0) {
        done = true;
        return true;
    }
    Frame& parent = frames[depth - 1];
    parent.phase = parent.kind == Kind::Object ? 4 : 2;
    return true;
}

const std::vector<std::string>& SchemaState::Path::match_texts(const Frame& f) const {
    const JsonSchema::Node& n = schema->node(f.node);
    return f.is_key ? n.keys : n.values;
}

// A value of `node` starts with c: in each branch of an anyOf that may
// start so (the first here, the others in forks).
bool SchemaState::Path::start_value(int node, unsigned char c, std::vector<Path>& forks) {
    const int kind = kind_of_byte(c);
    if (kind < 0) return false;
    const JsonSchema::Node& n = schema->node(node);
    if (!n.any_of) return start_leaf(node, kind, c);
    const std::vector<int>& leaves = n.branches[kind];
    if (leaves.empty()) return false;
    for (size_t i = 1; i < leaves.size(); ++i) {
        Path other = *this;
        if (other.start_leaf(leaves[i], kind, c)) forks.push_back(other);
    }
    return start_leaf(leaves[0], kind, c);
}

bool SchemaState::Path::start_leaf(int node, int kind, unsigned char c) {
    const JsonSchema::Node* n = &schema->node(node);
    if ((n->types & kKindTypes[kind]) == 0 && n->values.empty()) return false;
    Frame f{};
    f.node = static_cast<int16_t>(node);
    if (!n->values.empty()) {
        f.kind = Kind::Match;
        f.set = n->values.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << n->values.size()) - 1;
        std::vector<Path> none;  // a value's first byte never ends it
        return push(f) && match_byte(frames[depth - 1], c, none);
    }
    switch (kind) {
        case 0: f.kind = Kind::Object, f.key = -1; break;
        case 1: f.kind = Kind::Array; break;
        case 2:
            f.kind = Kind::String;
            if (n->pattern >= 0) f.set = JsonPattern::kStart;
            break;
        case 3:
            f.kind = Kind::Number;
            f.integer = (n->types & JsonSchema::kNumber) == 0 || (n->multiple > 0 && n->multiple_scale == 0);
            f.phase = c == '-' ? 0 : c == '0' ? 1 : 2;
            f.negative = c == '-';
            f.set = is_digit(c) ? static_cast<uint64_t>(c - '0') : 0;
            f.key = 0;
            break;
        default:
            f.kind = Kind::Literal;
            f.literal = c == 't' ? "true" : c == 'f' ? "false" : "null";
            f.pos = 1;
            break;
    }
    if (!push(f)) return false;
    return kind != 3 || number_checks(frames[depth - 1]);
}

namespace {

double pow10(int e) {
    static constexpr double kExact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    return e <= 22 ? kExact[e] : std::pow(10.0, e);
}

// A number's digit into its frame: up to 19 significant digits are held
// (set, count of them after the point); integer digits past them scale it
// (key), fraction digits past them are dropped (worth under 10^-count).
template <class Frame>
void add_digit(Frame& f, unsigned char c, bool fraction) {
    if (f.set < 1000000000000000000ull) {
        f.set = f.set * 10 + static_cast<uint64_t>(c - '0');
        if (fraction) ++f.count;
    } else if (!fraction) {
        ++f.key;
    }
}

// The number's magnitude so far (the digits read, as written).
template <class Frame>
double magnitude(const Frame& f) {
    double v = static_cast<double>(f.set);
    if (f.key > 0) v *= pow10(f.key);
    return f.count > 0 ? v / pow10(static_cast<int>(f.count)) : v;
}

}  // namespace

// Whether a bounded number that starts with the bytes read can still end in
// its range: some completion's magnitude, within the byte cap, lies in an
// interval that meets the range once the sign is applied.
bool SchemaState::Path::number_may_go_on(const Frame& f) const {
    const JsonSchema::Node& n = schema->node(f.node);
    // Magnitudes [a, b] (b excluded if b_open), signed, against the range.
    auto meets = [&](double a, double b, bool b_open) {
        double lo = a, hi = b;
        bool lo_open = false, hi_open = b_open;
        if (f.negative) lo = -b, hi = -a, lo_open = b_open, hi_open = false;
        const bool above_min = hi > n.min || (hi == n.min && !hi_open && !n.min_open);
        const bool below_max = lo < n.max || (lo == n.max && !lo_open && !n.max_open);
        return above_min && below_max;
    };
    const double m = magnitude(f);
    const int left = kMaxNumber - static_cast<int>(f.pos);  // bytes that may still come
    switch (f.phase) {
        case 0: return meets(0.0, HUGE_VAL, false);
        case 1: return f.integer ? meets(0.0, 0.0, false) : meets(0.0, 1.0, true);
        case 2:
            if (meets(m, m, false) || (!f.integer && left >= 2 && meets(m, m + 1.0, true))) return true;
            for (int k = 1; k <= left; ++k) {
                if (meets(m * pow10(k), (m + 1.0) * pow10(k), true)) return true;
            }
            return false;
        default:  // after the point: the digits to come add less than 10^-count
            return meets(m, m + 1.0 / pow10(static_cast<int>(f.count)), true);
    }
}

namespace {

using Format = JsonSchema::Node::Format;

// A format's shape: one template character per byte (9 a digit, X a hex
// digit, M/N a month's tens/units, A/B a day's, H/I an hour's, 5 a digit
// 0-5; others stand for themselves). Times go on past it (format_byte).
std::string_view format_shape(Format f) {
    switch (f) {
        case Format::Date: return "9999-MN-AB";
        case Format::Time: return "HI:59:59";
        case Format::DateTime: return "9999-MN-ABTHI:59:59";
        default: return "XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX";
    }
}

bool shape_takes(char t, unsigned char c, unsigned char prev) {
    switch (t) {
        case '9': return is_digit(c);
        case 'X': return is_hex(c);
        case 'M': return c == '0' || c == '1';
        case 'N': return prev == '0' ? c >= '1' && c <= '9' : c >= '0' && c <= '2';
        case 'A': return c >= '0' && c <= '3';
        case 'B': return prev == '0' ? c >= '1' && c <= '9' : prev == '3' ? c == '0' || c == '1' : is_digit(c);
        case 'H': return c >= '0' && c <= '2';
        case 'I': return prev == '2' ? c >= '0' && c <= '3' : is_digit(c);
        case '5': return c >= '0' && c <= '5';
        default: return c == static_cast<unsigned char>(t);
    }
}

}  // namespace

// A byte of a string of a format (0: its closing quote). f.pos walks the
// shape (L bytes); a time then takes, at L, '.' (fraction digits at L + 2,
// at most 9), 'Z' or an offset's sign, whose "HI:59" is L + 3 .. L + 7, and
// at L + 8 only the quote. f.set: the previous byte; f.count: a date's
// year and month, then a time's fraction digits.
bool SchemaState::Path::format_byte(Frame& f, Format format, unsigned char c) const {
    const std::string_view shape = format_shape(format);
    const size_t L = shape.size(), at = f.pos;
    const bool timed = format == Format::Time || format == Format::DateTime;
    const size_t end = timed ? L + 8 : L;
    if (c == 0) return at == end;
    const auto prev = static_cast<unsigned char>(f.set);
    auto take = [&](size_t next) {
        f.pos = static_cast<uint16_t>(next);
        f.set = c;
        return true;
    };
    if (at < L) {
        if (!shape_takes(shape[at], c, prev)) return false;
        // A date's year and month (count: yyyymm, digit by digit) bound its
        // day; a date-time's count then starts over for the fraction.
        const bool dated = format == Format::Date || format == Format::DateTime;
        if (dated && at < 7 && is_digit(c)) f.count = f.count * 10 + static_cast<uint32_t>(c - '0');
        if (dated && (shape[at] == 'A' || shape[at] == 'B')) {
            const uint32_t year = f.count / 100, month = f.count % 100;
            const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
            const uint32_t days = month == 2 ? (leap ? 29 : 28) : month == 4 || month == 6 || month == 9 || month == 11 ? 30 : 31;
            const uint32_t day = shape[at] == 'A' ? static_cast<uint32_t>(c - '0') * 10 : static_cast<uint32_t>(prev - '0') * 10 + (c - '0');
            if (day > days) return false;
        }
        if (shape[at] == 'T') f.count = 0;
        return take(at + 1);
    }
    if (!timed || at == end) return false;
    if (at >= L + 3) return shape_takes("HI:59"[at - L - 3], c, prev) && take(at + 1);
    if (at == L + 1) return is_digit(c) && (++f.count, take(L + 2));
    if (at == L && c == '.') return take(L + 1);
    if (at == L + 2 && is_digit(c)) return ++f.count <= 9 && take(L + 2);
    if (c == 'Z') return take(end);
    return (c == '+' || c == '-') && take(L + 3);
}

// The next character of a patterned string (a byte that starts a UTF-8
// sequence: any non-ASCII character, which the pattern does not tell apart).
bool SchemaState::Path::pattern_char(Frame& f, uint32_t c) const {
    const JsonSchema::Node& n = schema->node(f.node);
    const JsonPattern& p = schema->pattern(n.pattern);
    f.set = p.step(f.set, c);
    // No text that a maxLength would cut before a match, nor one whose
    // matches all end short of minLength (f.count: the characters so far,
    // this one included).
    if (f.set == 0) return false;
    if (n.max_length != UINT32_MAX && f.count + static_cast<uint32_t>(p.min_left(f.set)) > n.max_length) return false;
    const int most = n.min_length > 0 ? p.max_left(f.set) : JsonPattern::kUnbounded;
    return most == JsonPattern::kUnbounded || f.count + static_cast<uint32_t>(most) >= n.min_length;
}

// A number of a bounded or multipleOf node, as far as it is written: it
// can still end in its range and on a multiple. A multiple's digits are
// all held (set: the digits' value, at most 18 digits, count of them after
// the point), in units of 10^-d (multipleOf = m / 10^d: the number is a
// multiple iff its value in those units is a multiple of m), and the
// digits still to come can reach a multiple within the range.
bool SchemaState::Path::number_checks(const Frame& f) const {
    const JsonSchema::Node& n = schema->node(f.node);
    if (n.bounded && !number_may_go_on(f)) return false;
    if (n.multiple == 0) return true;
    const int d = n.multiple_scale, frac = static_cast<int>(f.count);
    if (f.key > 0 || frac > d) return false;
    int digits = 0;
    for (uint64_t v = f.set; v > 0; v /= 10) ++digits;
    if (digits + d - frac > 18) return false;
    // After the point the digits to come fill the units below the last
    // one written; before it, k more integer digits and then d after the
    // point (fewer: a part of those).
    const int lo = f.phase >= 3 ? d - frac : d, hi = f.phase >= 3 || f.phase == 1 ? lo : 18 - digits;
    // For each k, the values the digits can still reach, [set 10^k, (set +
    // 1) 10^k), signed and cut to the range (in units of 10^-d; the range's
    // ends as such integers, an open range as far as 18 digits go): a
    // multiple must lie in one of them.
    const double unit = static_cast<double>(pow10_u64(d)), cap = 1.8e18;
    const double lo_r = std::clamp(n.min * unit, -cap, cap), hi_r = std::clamp(n.max * unit, -cap, cap);
    const auto lo_i = static_cast<int64_t>(n.min_open ? std::floor(lo_r) + 1 : std::ceil(lo_r));
    const auto hi_i = static_cast<int64_t>(n.max_open ? std::ceil(hi_r) - 1 : std::floor(hi_r));
    const auto m = static_cast<int64_t>(n.multiple);
    for (int k = lo; k <= hi; ++k) {
        const auto a = static_cast<int64_t>(f.set * pow10_u64(k)), b = static_cast<int64_t>((f.set + 1) * pow10_u64(k) - 1);
        const int64_t from = std::max(f.negative ? -b : a, lo_i), to = std::min(f.negative ? -a : b, hi_i);
        if (from > to) continue;
        const int64_t first = from >= 0 ? (from + m - 1) / m * m : -(-from / m * m);
        if (first <= to) return true;
    }
    return false;
}

// The number may end here: in its range, on a multiple.
bool SchemaState::Path::number_may_end(const Frame& f) const {
    const JsonSchema::Node& n = schema->node(f.node);
    if (n.bounded && !number_in_range(f)) return false;
    return n.multiple == 0 || f.set * pow10_u64(n.multiple_scale - static_cast<int>(f.count)) % n.multiple == 0;
}

bool SchemaState::Path::number_in_range(const Frame& f) const {
    const JsonSchema::Node& n = schema->node(f.node);
    const double v = f.negative ? -magnitude(f) : magnitude(f);
    return (v > n.min || (v == n.min && !n.min_open)) && (v < n.max || (v == n.max && !n.max_open));
}

// A byte of an enum value or a listed key: the candidates that still match.
// A complete string ends at its closing quote; a complete number or literal
// ends at the first byte no candidate takes, which then counts as what
// comes after the value.
bool SchemaState::Path::match_byte(Frame& f, unsigned char c, std::vector<Path>& forks) {
    const std::vector<std::string>& texts = match_texts(f);
    uint64_t keep = 0;
    bool complete = false;
    for (size_t i = 0; i < texts.size(); ++i) {
        if ((f.set >> i & 1) == 0) continue;
        const std::string& t = texts[i];
        if (t.size() > f.pos && static_cast<unsigned char>(t[f.pos]) == c) {
            keep |= uint64_t{1} << i;
        } else if (t.size() == f.pos) {
            complete = true;
        }
    }
    if (keep == 0) {
        if (f.is_key && f.phase == 1) return key_not_listed(f, c, forks);
        if (!complete || f.is_key) return false;
        end_value();
        return step(c, forks);
    }
    f.set = keep;
    ++f.pos;
    for (size_t i = 0; i < texts.size(); ++i) {
        if ((keep >> i & 1) == 0 || texts[i].size() != f.pos || texts[i].back() != '"') continue;
        if (!f.is_key) return end_value();
        Frame& obj = frames[depth - 2];
        if ((obj.set >> i & 1) != 0) return false;  // written already (a key not listed may go on)
        --depth;  // the key ends: its object reads the colon next
        obj.set |= uint64_t{1} << i;
        obj.key = static_cast<int16_t>(i);
        obj.phase = 2;
        return true;
    }
    return true;
}

bool SchemaState::Path::step(unsigned char c, std::vector<Path>& forks) {
    Frame* top = depth > 0 ? &frames[depth - 1] : nullptr;
    if (top != nullptr) {
        switch (top->kind) {
            case Kind::String:
                if (top->phase == 0) {
                    const JsonSchema::Node& n = schema->node(top->node);
                    if (n.format != JsonSchema::Node::Format::None && !top->is_key) {
                        if (c == '"') return format_byte(*top, n.format, 0) && end_value();
                        return format_byte(*top, n.format, c);
                    }
                    const bool patterned = n.pattern >= 0 && !top->is_key;
                    // After a high surrogate's \u escape its low one (set's
                    // bit 32: unpatterned strings only, which take \u).
                    if (!patterned && (top->set >> 32 & 1) != 0 && c != '\\') return false;
                    // UTF-8 sequences whole (pos: the continuation bytes
                    // still due); a character counts at its first byte.
                    const bool continuation = top->pos > 0;
                    unsigned due = top->pos;
                    if (!json_chars::utf8_byte(c, due)) return false;
                    top->pos = static_cast<uint16_t>(due);
                    if (continuation) return true;
                    if (c == '"') {
                        if (patterned && !schema->pattern(n.pattern).accepts(top->set)) return false;
                        if (!top->is_key) return top->count >= n.min_length && end_value();
                        --depth;  // a key not listed: its value is additionalProperties'
                        frames[depth - 1].key = -1;
                        frames[depth - 1].phase = 2;
                        return true;
                    }
                    if (c == '\\') top->phase = 1;
                    // Characters: an escape, or a byte that starts a UTF-8 sequence.
                    if (!top->is_key && ++top->count > n.max_length) return false;
                    if (c < 0x20) return false;
                    // A pattern's next character: this byte, or the escaped one.
                    if (!patterned) return true;
                    if (c != '\\') return pattern_char(*top, c);
                    // A backslash: only if a character it can escape goes on.
                    for (const char* e = json_chars::kEscaped; *e != '\0'; ++e) {
                        Frame probe = *top;
                        if (pattern_char(probe, static_cast<unsigned char>(*e))) return true;
                    }
                    return false;
                }
                if (top->phase == 1) {
                    const JsonSchema::Node& n = schema->node(top->node);
                    const bool low_due = (n.pattern < 0 || top->is_key) && (top->set >> 32 & 1) != 0;
                    if (c == 'u') {
                        top->phase = 2, top->pos = 0;
                        top->set &= uint64_t{1} << 32;  // the escape's digits from 0; low_due kept
                        return n.pattern < 0 || top->is_key;
                    }
                    if (low_due) return false;
                    top->phase = 0;
                    const int e = json_chars::unescape(c);
                    if (e < 0) return false;
                    return n.pattern < 0 || top->is_key || pattern_char(*top, static_cast<uint32_t>(e));
                }
                {
                    // \uXXXX: its digits in set's low bits, a UTF-16 unit
                    // that fits there (json_chars::unicode_digit).
                    auto code = static_cast<uint32_t>(top->set & 0xFFFF);
                    bool low_due = (top->set >> 32 & 1) != 0;
                    if (!json_chars::unicode_digit(c, top->pos, code, low_due)) return false;
                    top->set = code | (low_due ? uint64_t{1} << 32 : 0);
                }
                if (++top->pos == 4) top->phase = 0, top->pos = 0;
                return true;
            case Kind::Number: {
                // 0 after '-', 1 a leading 0, 2 integer digits, 3 after '.',
                // 4 fraction digits, 5 after 'e', 6 after its sign, 7 one
                // exponent digit, 8 two (no more: the number stays a finite
                // double; 31E813 is JSON that most parsers overflow on). At most kMaxNumber bytes: a model may otherwise
                // write digits until it runs out of tokens.
                // A bounded number (node.bounded) keeps its digits and is
                // checked after each byte, and has no exponent.
                uint8_t& ph = top->phase;
                if (!json_chars::number_room(c, ++top->pos, kMaxNumber)) return false;
                // pos: the bytes after the first, so the digits are pos + 1 (or pos after '-').
                if (top->integer && is_digit(c) && (ph == 0 || ph == 2) &&
                    static_cast<int>(top->pos) + (top->negative ? 0 : 1) > kMaxIntegerDigits) {
                    return false;
                }
                const JsonSchema::Node& node = schema->node(top->node);
                const bool bounded = node.bounded, checked = bounded || node.multiple > 0;
                switch (ph) {
                    case 0:
                        if (!is_digit(c)) return false;
                        ph = c == '0' ? 1 : 2;
                        add_digit(*top, c, false);
                        return !checked || number_checks(*top);
                    case 3:
                        if (!is_digit(c)) return false;
                        ph = 4;
                        add_digit(*top, c, true);
                        return !checked || number_checks(*top);
                    case 5:
                        if (c == '+' || c == '-') {
                            ph = 6;
                            return true;
                        }
                        [[fallthrough]];
                    case 6:
                        if (!is_digit(c)) return false;
                        ph = 7;
                        return true;
                    default:
                        if (is_digit(c) && ph != 1) {
                            if (ph == 8) return false;
                            if (ph == 7) {
                                ph = 8;
                                return true;
                            }
                            if (ph == 2 || ph == 4) add_digit(*top, c, ph == 4);
                            return !checked || number_checks(*top);
                        }
                        if (!top->integer && c == '.' && (ph == 1 || ph == 2)) {
                            ph = 3;  // a fraction must still be able to land in the range
                            return !checked || number_checks(*top);
                        }
                        if (!top->integer && !checked && (c == 'e' || c == 'E') && ph < 7) {
                            ph = 5;
                            return true;
                        }
                        if (checked && !number_may_end(*top)) return false;
                        end_value();
                        return step(c, forks);
                }
            }
            case Kind::Literal:
                if (c != static_cast<unsigned char>(top->literal[top->pos])) return false;
                if (top->literal[++top->pos] == '\0') return end_value();
                return true;
            case Kind::Match: return match_byte(*top, c, forks);
            default: break;
        }
    }
    // Between tokens.
    if (is_space(c)) {
        // Nothing after the value: the output ends there (JsonState allows
        // trailing spaces; here a model that pads would only spend tokens).
        if (spaces >= kMaxSpaces || (top == nullptr && done)) return false;
        ++spaces;
        return true;
    }
    spaces = 0;
    if (top == nullptr) return !done && start_value(schema->root(), c, forks);
    return between(top, c, forks);
}

bool SchemaState::Path::between(Frame* top, unsigned char c, std::vector<Path>& forks) {
    const JsonSchema::Node& n = schema->node(top->node);
    const uint64_t all = n.keys.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << n.keys.size()) - 1;
    if (top->kind == Kind::Array) {
        if (c == ']' && top->phase != 1) return top->count >= n.min_items && end_value();
        if (top->phase == 2) {
            if (c != ',' || top->count >= n.max_items) return false;
            top->phase = 1;
            return true;
        }
        if (top->count >= n.max_items) return false;
        const uint32_t i = top->count++;
        return start_value(i < n.prefix.size() ? n.prefix[i] : n.items, c, forks);
    }
    // An object.
    switch (top->phase) {
        case 0:
        case 1:
            if (c == '}' && top->phase == 0) return (n.required & ~top->set) == 0 && top->count >= n.min_props && end_value();
            return c == '"' && start_key(top, c, forks);
        case 2:
            if (c != ':') return false;
            top->phase = 3;
            return true;
        case 3: return start_value(top->key >= 0 ? n.key_nodes[static_cast<size_t>(top->key)] : n.extra, c, forks);
        default:
            if (c == ',') {
                // Another key can come: one not yet written, or one not listed.
                if (top->count >= n.max_props || (n.extra < 0 && (all & ~top->set) == 0)) return false;
                top->phase = 1;
                return true;
            }
            return c == '}' && (n.required & ~top->set) == 0 && top->count >= n.min_props && end_value();
    }
}

// An object's next key starts (c: its opening quote). With keys listed, a
// Match of those not yet written; where other keys may appear (extra), of
// every listed key (a written one must not be written again), the key
// turning into a free string at the first byte none of them takes
// (key_not_listed). When the keys still required fill what maxProperties
// leaves, only they may come.
bool SchemaState::Path::start_key(Frame* top, unsigned char c, std::vector<Path>& forks) {
    const JsonSchema::Node& n = schema->node(top->node);
    if (top->count >= n.max_props) return false;
    ++top->count;
    const uint64_t all = n.keys.size() == 64 ? ~uint64_t{0} : (uint64_t{1} << n.keys.size()) - 1;
    const uint64_t missing = n.required & ~top->set;
    const bool only_required = static_cast<uint32_t>(std::popcount(missing)) > n.max_props - top->count;
    Frame k{};
    k.is_key = true;
    k.node = top->node;
    if (n.keys.empty()) {
        if (n.extra < 0) return false;
        k.kind = Kind::String;
        return push(k);
    }
    k.kind = Kind::Match;
    const bool open = n.extra >= 0 && !only_required;
    k.phase = open ? 1 : 0;
    k.set = only_required ? missing : open ? all : all & ~top->set;
    return push(k) && match_byte(frames[depth - 1], c, forks);
}

// A key's Match with no listed key left that takes c: the key is not
// listed. Its bytes so far (a prefix every candidate shared) are read again
// as a free string's, then c.
bool SchemaState::Path::key_not_listed(const Frame& f, unsigned char c, std::vector<Path>& forks) {
    const std::vector<std::string>& texts = match_texts(f);
    size_t i = 0;
    while ((f.set >> i & 1) == 0) ++i;
    const std::string prefix = texts[i].substr(0, f.pos);
    Frame k{};
    k.kind = Kind::String;
    k.is_key = true;
    k.node = f.node;
    --depth;
    push(k);
    for (size_t b = 1; b < prefix.size(); ++b) {
        if (!step(static_cast<unsigned char>(prefix[b]), forks)) return false;
    }
    return step(c, forks);
}

}  // namespace lantern
