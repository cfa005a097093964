// Values of the Jinja interpreter, with the Python semantics that chat
// templates rely on: truthiness, str()/repr(), equality and ordering, `in`.
//
// Lists and dicts are shared by reference, as in Python. Dicts keep insertion
// order (json.dumps and iteration follow it). A namespace() is a dict whose
// attributes may be assigned; a tuple is a list marked immutable.
// Undefined carries a hint naming what was missing, for error messages.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lantern::jinja {

class Value;
class Interpreter;

// A render-time failure. The interpreter attaches the line and column of the
// innermost node being evaluated as the error unwinds.
class RenderError : public std::exception {
public:
    explicit RenderError(std::string reason, bool raised = false) : reason_(std::move(reason)), raised_(raised) {}
    const char* what() const noexcept override { return reason_.c_str(); }
    const std::string& reason() const { return reason_; }
    bool raised() const { return raised_; }  // from raise_exception()
    bool located() const { return line_ > 0; }
    void locate(int line, int column) { line_ = line, column_ = column; }
    int line() const { return line_; }
    int column() const { return column_; }

private:
    std::string reason_;
    bool raised_;
    int line_ = 0, column_ = 0;
};

// Bounds on what a template may build, so that one from an untrusted file
// (a GGUF's tokenizer.chat_template) fails with an error instead of
// exhausting the stack, the memory or the time of the process. jinja2's
// sandbox bounds only range(); these sit well above what chat templates use.
struct Limits {
    static constexpr size_t kMaxBytes = size_t(16) << 20;  // a string, the output
    static constexpr size_t kMaxItems = size_t(1) << 20;   // a list or dict
    static constexpr int kMaxNesting = 200;    // lists and dicts in one another; parsed expressions and blocks
    static constexpr int kMaxDepth = 400;      // nested evaluations (a macro calling itself)
    static constexpr uint64_t kMaxSteps = 1'000'000;  // per render (published templates: under 1,000 for a short chat)
};
// Throw a RenderError naming `what` when past the bounds.
void check_bytes(size_t bytes, const char* what);
void check_items(size_t items, const char* what);
void check_nesting(int nesting);  // of a list or dict (ListData::nesting)
// A float whose integer part is a 64-bit integer (an int64_t cast of it is defined).
inline bool fits_int64(double x) { return x > -9.2e18 && x < 9.2e18; }
// The RenderError of 64-bit integer arithmetic that overflows.
[[noreturn]] void integer_overflow();

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;

    // The argument at `index` or named `name`; nullptr when absent.
    const Value* get(size_t index, std::string_view name) const;
    // Throws unless every keyword is one of `allowed` and at most `max_positional` are given.
    void expect(std::string_view fn, size_t max_positional, std::initializer_list<std::string_view> allowed) const;
};

using NativeFunction = std::function<Value(Interpreter&, CallArgs&)>;

struct Function {
    std::string name;
    NativeFunction call;
};

// `nesting`: 1 + the deepest list or dict within, kept when built through
// Value::list and DictData::set (others append only what does not nest
// deeper), so that no value is nested past Limits::kMaxNesting: values are
// freed, printed and compared recursively.
struct ListData {
    std::vector<Value> items;
    bool tuple = false;
    int nesting = 1;
};

// Items are only appended (templates cannot remove them) and keys never
// change, so string keys are looked up through an index that catches up with
// the appended items on demand: setting n keys one by one is linear, not
// quadratic, for a big dict from a request.
struct DictData {
    std::vector<std::pair<Value, Value>> items;  // insertion order
    bool is_namespace = false;
    int nesting = 1;

    Value* find(std::string_view key);
    const Value* find(std::string_view key) const;
    const Value* find(const Value& key) const;
    void set(Value key, Value value);

private:
    // String key -> position; views into the keys' shared strings. Kept only
    // past kLinear items.
    std::unordered_map<std::string_view, size_t> index_;
    size_t indexed_ = 0;  // items[0, indexed_) are in index_
    static constexpr size_t kLinear = 16;
};

class Value {
public:
    enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Function };

    Value() = default;  // undefined
    Value(bool b) : kind_(Kind::Bool), int_(b) {}
    Value(int v) : kind_(Kind::Int), int_(v) {}
    Value(int64_t v) : kind_(Kind::Int), int_(v) {}
    Value(double v) : kind_(Kind::Float), float_(v) {}
    Value(std::string s) : kind_(Kind::String), str_(std::make_shared<const std::string>(std::move(s))) {}
    Value(std::string_view s) : Value(std::string(s)) {}
    Value(const char* s) : Value(std::string(s)) {}

    static Value undefined(std::string hint);
    static Value none();
    // Throws RenderError past Limits::kMaxNesting or kMaxItems.
    static Value list(std::vector<Value> items = {}, bool tuple = false);
    static Value dict();
    static Value make_namespace();
    static Value function(std::string name, NativeFunction fn);
    // JSON -> Value (objects keep their order; integers that fit stay integers).
    // Throws RenderError past Limits::kMaxNesting.
    static Value from_json(const nlohmann::ordered_json& j);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }  // not bool
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_list() const { return kind_ == Kind::List; }
    bool is_tuple() const { return kind_ == Kind::List && list_->tuple; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_namespace() const { return kind_ == Kind::Dict && dict_->is_namespace; }
    bool is_function() const { return kind_ == Kind::Function; }
    bool is_iterable() const { return is_string() || is_list() || is_dict(); }
    // 0 for a scalar, else ListData/DictData::nesting.
    int nesting() const { return list_ ? list_->nesting : dict_ ? dict_->nesting : 0; }

    // Accessors; calling one on the wrong kind is a programming error (asserted).
    bool as_bool() const;
    int64_t as_int() const;     // int or bool
    double as_double() const;   // int, float or bool
    const std::string& str() const;
    ListData& list_data() const;
    DictData& dict_data() const;
    const Function& function_data() const;
    const std::string& undefined_hint() const;  // what was missing; empty if unknown

    bool truthy() const;
    std::string to_str() const;  // Python str(); undefined renders as ""
    std::string repr() const;    // Python repr()
    // Python's type name, for messages: 'str', 'int', 'list', 'dict', 'NoneType'...
    std::string type_name() const;
    // Elements as iteration sees them: list items, dict keys, string characters.
    // Undefined iterates as empty. Throws RenderError for other kinds.
    std::vector<Value> iterate() const;
    // Identity of lists, dicts and functions (Python `is`); value identity otherwise.
    bool same_object(const Value& other) const;

private:
    Kind kind_ = Kind::Undefined;
    int64_t int_ = 0;
    double float_ = 0.0;
    std::shared_ptr<const std::string> str_;  // string, or the undefined hint
    std::shared_ptr<ListData> list_;
    std::shared_ptr<DictData> dict_;
    std::shared_ptr<Function> fn_;
};

// Python ==, with 1 == 1.0 == True.
bool py_equal(const Value& a, const Value& b);
// Python <; throws RenderError for types that do not order.
bool py_less(const Value& a, const Value& b);
// Python `needle in haystack`.
bool py_contains(const Value& haystack, const Value& needle);
// json.dumps(value, indent=indent, separators=..., sort_keys=...). indent < 0 = none.
std::string to_json(const Value& v, int indent, bool ensure_ascii, bool sort_keys,
                    const std::optional<std::pair<std::string, std::string>>& separators = std::nullopt);

}  // namespace lantern::jinja
