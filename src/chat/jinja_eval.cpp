// The interpreter core (scopes, calls, attribute and item access) and the
// evaluation of expressions, with Python's arithmetic and comparison rules.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja_interp.h"
#include "chat/jinja_text.h"

namespace lantern::jinja {

// ------------------------------------------------------------ scopes ----

Interpreter::Interpreter(const Value& context, RenderOptions options) : options_(std::move(options)) {
    scopes_.resize(2);
    add_globals(scopes_[0].vars);
    if (context.is_dict()) {
        for (const auto& [k, v] : context.dict_data().items) {
            if (k.is_string()) scopes_[1].vars.emplace_back(k.str(), v);
        }
    }
}

Interpreter::Frame::Frame(Interpreter& in, bool isolated) : in_(in) { in.scopes_.push_back({{}, isolated}); }
Interpreter::Frame::~Frame() { in_.scopes_.pop_back(); }

Value Interpreter::lookup(const std::string& name) const {
    for (size_t i = scopes_.size(); i-- > 0;) {
        for (const auto& [k, v] : scopes_[i].vars) {
            if (k == name) return v;
        }
        if (scopes_[i].isolated && i > 2) i = 2;  // skip the caller's frames
    }
    return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign(const std::string& name, Value value) {
    auto& vars = scopes_.back().vars;
    for (auto& [k, v] : vars) {
        if (k == name) {
            v = std::move(value);
            return;
        }
    }
    vars.emplace_back(name, std::move(value));
}

std::string Interpreter::render(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
}

Interpreter::Step::Step(Interpreter& in) : in_(in) {
    if (++in_.steps_ > Limits::kMaxSteps) {
        throw RenderError("the template ran past " + std::to_string(Limits::kMaxSteps) + " steps");
    }
    if (++in_.depth_ > Limits::kMaxDepth) {
        --in_.depth_;
        throw RenderError("the template nests deeper than " + std::to_string(Limits::kMaxDepth) +
                          " evaluations (a macro that calls itself without end?)");
    }
}

Value Interpreter::eval(const Expr& e) {
    try {
        const Step step(*this);
        return e.eval(*this);
    } catch (RenderError& err) {
        if (!err.located()) err.locate(e.line, e.column);
        throw;
    }
}

Flow Interpreter::exec(const Body& body, std::string& out) {
    for (const StmtPtr& s : body) {
        Flow flow;
        try {
            const Step step(*this);
            flow = s->exec(*this, out);
            check_bytes(out.size(), "the template's output");
        } catch (RenderError& err) {
            if (!err.located()) err.locate(s->line, s->column);
            throw;
        }
        if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
}

// ------------------------------------------------------------- calls ----

Value Interpreter::call(const Value& callee, CallArgs& args) {
    if (callee.is_function()) return callee.function_data().call(*this, args);
    if (callee.is_undefined()) throw RenderError(callee.undefined_hint());
    throw RenderError("'" + callee.type_name() + "' object is not callable");
}

CallArgs Interpreter::eval_args(const ArgList& args) {
    CallArgs out;
    for (const ExprPtr& e : args.positional) out.positional.push_back(eval(*e));
    if (args.star) {
        for (Value& v : eval(*args.star).iterate()) out.positional.push_back(std::move(v));
    }
    for (const auto& [name, e] : args.keyword) out.keyword.emplace_back(name, eval(*e));
    if (args.double_star) {
        const Value d = eval(*args.double_star);
        if (!d.is_dict()) throw RenderError("argument after ** must be a mapping, not " + d.type_name());
        for (const auto& [k, v] : d.dict_data().items) out.keyword.emplace_back(k.to_str(), v);
    }
    return out;
}

namespace {

std::string object_name(const Value& v) {
    if (v.is_none()) return "'None'";
    std::string name = "'";
    name += v.type_name();
    name += " object'";
    return name;
}

Value no_attribute(const Value& obj, const std::string& name) {
    return Value::undefined(object_name(obj) + " has no attribute '" + name + "'");
}

// Python index -> position in [0, n), or npos when out of range.
size_t wrap_index(int64_t i, size_t n) {
    if (i < 0) i += int64_t(n);
    return i >= 0 && i < int64_t(n) ? size_t(i) : std::string::npos;
}

}  // namespace

Value Interpreter::get_attr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) throw RenderError(obj.undefined_hint());
    if (obj.is_namespace()) {
        const Value* v = obj.dict_data().find(name);
        return v ? *v : no_attribute(obj, name);
    }
    if (auto method = bind_method(obj, name)) return *method;
    if (obj.is_dict()) {
        const Value* v = obj.dict_data().find(name);
        if (v) return *v;
    }
    return no_attribute(obj, name);
}

Value Interpreter::get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) throw RenderError(obj.undefined_hint());
    if (obj.is_dict()) {
        const Value* v = obj.dict_data().find(key);
        if (v) return *v;
    } else if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        if (obj.is_list()) {
            const auto& items = obj.list_data().items;
            const size_t i = wrap_index(key.as_int(), items.size());
            if (i != std::string::npos) return items[i];
        } else {
            const std::u32string chars = utf8_decode(obj.str());
            const size_t i = wrap_index(key.as_int(), chars.size());
            if (i != std::string::npos) return Value(utf8_encode(std::u32string_view(chars).substr(i, 1)));
        }
        return Value::undefined(obj.type_name() + " object has no element " + key.repr());
    }
    if (key.is_string() && !obj.is_namespace()) {
        if (auto method = bind_method(obj, key.str())) return *method;
    }
    if (!key.is_string()) {
        return Value::undefined((obj.is_none() ? std::string("None") : obj.type_name() + " object") +
                                " has no element " + key.repr());
    }
    return Value::undefined(object_name(obj) + " has no attribute " + key.repr());
}

// ---------------------------------------------------------- arithmetic ----

namespace {

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
    if (a.is_undefined()) throw RenderError(a.undefined_hint());
    if (b.is_undefined()) throw RenderError(b.undefined_hint());
    throw RenderError(std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
                      b.type_name() + "'");
}

Value repeat(const Value& seq, int64_t times) {
    // The product checked before it is formed (it may pass 64 bits).
    const size_t n = seq.is_string() ? seq.str().size() : seq.list_data().items.size();
    const size_t limit = seq.is_string() ? Limits::kMaxBytes : Limits::kMaxItems;
    if (times > 0 && n > 0 && uint64_t(times) > limit / n) {
        if (seq.is_string()) check_bytes(limit + 1, "a repeated string");
        check_items(limit + 1, "a repeated list");
    }
    if (n == 0) times = 0;  // "" * 10**9 is "", without a billion appends
    if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < times; ++i) out += seq.str();
        return Value(std::move(out));
    }
    std::vector<Value> items;
    for (int64_t i = 0; i < times; ++i) {
        for (const Value& v : seq.list_data().items) items.push_back(v);
    }
    return Value::list(std::move(items), seq.is_tuple());
}

// int(x) of a float as Python writes it: every digit, however large.
std::string integer_text(double x) {
    if (!std::isfinite(x)) {
        throw RenderError(std::isnan(x) ? "cannot convert float NaN to integer" : "cannot convert float infinity to integer");
    }
    const double t = std::trunc(x);
    if (fits_int64(t)) return std::to_string(int64_t(t));
    char buf[400];  // a double has at most 309 integer digits
    std::snprintf(buf, sizeof(buf), "%.0f", t);  // exact: t is an integer
    return buf;
}

// printf-style `format % args` for %s %r %d %i %f %%.
Value percent_format(const std::string& fmt, const Value& args) {
    std::vector<Value> values = args.is_tuple() ? args.list_data().items : std::vector<Value>{args};
    // Python treats a non-tuple right operand that supports [] (list, dict, and
    // jinja2's Undefined) as a mapping: leftover arguments are then no error.
    const bool mapping = !args.is_tuple() && (args.is_list() || args.is_dict() || args.is_undefined());
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) throw RenderError("incomplete format");
        const char spec = fmt[i];
        if (spec == '%') {
            out += '%';
            continue;
        }
        if (next >= values.size()) throw RenderError("not enough arguments for format string");
        const Value& v = values[next++];
        if (spec == 's') out += v.to_str();
        else if (spec == 'r') out += v.repr();
        else if ((spec == 'd' || spec == 'i') && v.is_number()) out += v.is_float() ? integer_text(v.as_double()) : std::to_string(v.as_int());
        else if (spec == 'f' && v.is_number()) {
            const double d = v.as_double();
            char buf[400];  // 309 integer digits, the point and six decimals
            std::snprintf(buf, sizeof(buf), "%f", d);
            out += buf;  // glibc writes inf, -inf and nan as Python does
        } else {
            throw RenderError(std::string("unsupported format character '") + spec + "'");
        }
    }
    if (next < values.size() && !mapping) throw RenderError("not all arguments converted during string formatting");
    return Value(std::move(out));
}

}  // namespace

Value py_add(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (!a.is_float() && !b.is_float()) {
            int64_t r = 0;
            if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) integer_overflow();
            return Value(r);
        }
        return Value(a.as_double() + b.as_double());
    }
    if (a.is_string() && b.is_string()) {
        check_bytes(a.str().size() + b.str().size(), "a string");
        return Value(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        check_items(a.list_data().items.size() + b.list_data().items.size(), "a list");
        std::vector<Value> items = a.list_data().items;
        for (const Value& v : b.list_data().items) items.push_back(v);
        return Value::list(std::move(items), a.is_tuple());
    }
    if ((a.is_string() || a.is_list()) && !b.is_undefined() && !a.is_undefined()) {
        throw RenderError("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                          a.type_name());
    }
    unsupported("+", a, b);
}

Value py_arith(BinaryExpr::Op op, const Value& a, const Value& b) {
    using Op = BinaryExpr::Op;
    if (op == Op::Add) return py_add(a, b);
    if (op == Op::Mul) {
        if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
        if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    }
    if (op == Op::Mod && a.is_string()) return percent_format(a.str(), b);
    static const char* const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (!a.is_number() || !b.is_number()) unsupported(names[int(op)], a, b);

    const bool ints = !a.is_float() && !b.is_float();
    if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        int64_t r = 0;
        switch (op) {
            case Op::Sub:
                if (__builtin_sub_overflow(x, y, &r)) integer_overflow();
                return Value(r);
            case Op::Mul:
                if (__builtin_mul_overflow(x, y, &r)) integer_overflow();
                return Value(r);
            case Op::Div:
                if (y == 0) throw RenderError("division by zero");
                return Value(double(x) / double(y));
            case Op::FloorDiv: {
                if (y == 0) throw RenderError("integer division or modulo by zero");
                if (y == -1) {
                    if (__builtin_sub_overflow(int64_t(0), x, &r)) integer_overflow();
                    return Value(r);
                }
                int64_t q = x / y;
                if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
                return Value(q);
            }
            case Op::Mod: {
                if (y == 0) throw RenderError("integer division or modulo by zero");
                if (y == -1) return Value(int64_t(0));
                r = x % y;
                if (r != 0 && ((r < 0) != (y < 0))) r += y;
                return Value(r);
            }
            case Op::Pow: {
                if (y < 0 && x == 0) throw RenderError("0.0 cannot be raised to a negative power");
                if (y < 0) return Value(std::pow(double(x), double(y)));
                // By squaring; |x| > 1 overflows within 63 squarings.
                r = 1;
                int64_t base = x;
                for (int64_t e = y; e > 0; e >>= 1) {
                    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) integer_overflow();
                    if (e > 1 && __builtin_mul_overflow(base, base, &base)) integer_overflow();
                }
                return Value(r);
            }
            default: break;
        }
    }
    const double x = a.as_double(), y = b.as_double();
    switch (op) {
        case Op::Sub: return Value(x - y);
        case Op::Mul: return Value(x * y);
        case Op::Div:
            if (y == 0) throw RenderError("float division by zero");
            return Value(x / y);
        case Op::FloorDiv:
        case Op::Mod: {
            // CPython's float_divmod: the remainder takes the divisor's sign and
            // the quotient is rounded so that div * y + mod == x.
            if (y == 0) throw RenderError(op == Op::Mod ? "float modulo" : "float floor division by zero");
            double mod = std::fmod(x, y);
            double div = (x - mod) / y;
            if (mod != 0) {
                if ((y < 0) != (mod < 0)) {
                    mod += y;
                    div -= 1.0;
                }
            } else {
                mod = std::copysign(0.0, y);
            }
            double floordiv;
            if (div != 0) {
                floordiv = std::floor(div);
                if (div - floordiv > 0.5) floordiv += 1.0;
            } else {
                floordiv = std::copysign(0.0, x / y);
            }
            return Value(op == Op::Mod ? mod : floordiv);
        }
        case Op::Pow:
            if (x == 0 && y < 0) throw RenderError("0.0 cannot be raised to a negative power");
            if (x < 0 && y != std::floor(y)) throw RenderError("a negative number to a fractional power is complex");
            return Value(std::pow(x, y));
        default: break;
    }
    throw RenderError("bad arithmetic operator");
}

// ---------------------------------------------------------- expressions ----

Value LiteralExpr::eval(Interpreter&) const { return value; }

Value NameExpr::eval(Interpreter& in) const { return in.lookup(name); }

Value ListExpr::eval(Interpreter& in) const {
    std::vector<Value> values;
    values.reserve(items.size());
    for (const ExprPtr& e : items) values.push_back(in.eval(*e));
    return Value::list(std::move(values), tuple);
}

Value DictExpr::eval(Interpreter& in) const {
    Value d = Value::dict();
    for (const auto& [k, v] : items) d.dict_data().set(in.eval(*k), in.eval(*v));
    return d;
}

Value AttrExpr::eval(Interpreter& in) const { return in.get_attr(in.eval(*object), name); }

Value ItemExpr::eval(Interpreter& in) const { return in.get_item(in.eval(*object), in.eval(*index)); }

Value SliceExpr::eval(Interpreter& in) const {
    const Value obj = in.eval(*object);
    auto bound = [&](const ExprPtr& e) -> std::optional<int64_t> {
        if (!e) return std::nullopt;
        const Value v = in.eval(*e);
        if (v.is_none()) return std::nullopt;
        if (!v.is_int() && !v.is_bool()) throw RenderError("slice indices must be integers or None");
        return v.as_int();
    };
    const auto start = bound(this->start), stop = bound(this->stop), step_opt = bound(this->step);
    const int64_t step = step_opt.value_or(1);
    if (step == 0) throw RenderError("slice step cannot be zero");
    if (obj.is_undefined()) throw RenderError(obj.undefined_hint());

    std::u32string chars;
    const std::vector<Value>* items = nullptr;
    int64_t n;
    if (obj.is_string()) {
        chars = utf8_decode(obj.str());
        n = int64_t(chars.size());
    } else if (obj.is_list()) {
        items = &obj.list_data().items;
        n = int64_t(items->size());
    } else {
        throw RenderError("'" + obj.type_name() + "' object is not subscriptable");
    }
    // Python's slice.indices().
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t x = *v;
        if (x < 0) x += n;
        if (step > 0) return std::clamp<int64_t>(x, 0, n);
        return std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t b = clamp(start, step > 0 ? 0 : n - 1);
    const int64_t e = clamp(stop, step > 0 ? n : -1);
    std::u32string out_chars;
    std::vector<Value> out_items;
    for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
        if (items) out_items.push_back((*items)[size_t(i)]);
        else out_chars += chars[size_t(i)];
    }
    if (items) return Value::list(std::move(out_items), obj.is_tuple());
    return Value(utf8_encode(out_chars));
}

Value CallExpr::eval(Interpreter& in) const {
    const Value fn = in.eval(*callee);
    CallArgs a = in.eval_args(args);
    return in.call(fn, a);
}

Value FilterExpr::apply(Interpreter& in, const Value& input) const {
    const FilterFn fn = find_filter(name);
    if (!fn) throw RenderError("No filter named '" + name + "'.");
    CallArgs a = in.eval_args(args);
    return fn(in, input, a);
}

Value FilterExpr::eval(Interpreter& in) const { return apply(in, in.eval(*value)); }

Value TestExpr::eval(Interpreter& in) const {
    const TestFn fn = find_test(name);
    if (!fn) throw RenderError("No test named '" + name + "'.");
    const Value v = in.eval(*value);
    CallArgs a = in.eval_args(args);
    return Value(fn(in, v, a) != negated);
}

Value UnaryExpr::eval(Interpreter& in) const {
    const Value v = in.eval(*operand);
    if (op == Op::Not) return Value(!v.truthy());
    if (v.is_undefined()) throw RenderError(v.undefined_hint());
    if (!v.is_number()) {
        throw RenderError(std::string("bad operand type for unary ") + (op == Op::Neg ? "-" : "+") + ": '" +
                          v.type_name() + "'");
    }
    if (op == Op::Pos) return v.is_bool() ? Value(v.as_int()) : v;
    if (v.is_float()) return Value(-v.as_double());
    if (v.as_int() == INT64_MIN) integer_overflow();
    return Value(-v.as_int());
}

Value BinaryExpr::eval(Interpreter& in) const {
    Value l = in.eval(*left);
    switch (op) {
        case Op::And: return l.truthy() ? in.eval(*right) : l;
        case Op::Or: return l.truthy() ? l : in.eval(*right);
        case Op::Concat: {
            std::string text = l.to_str();
            const std::string more = in.eval(*right).to_str();
            check_bytes(text.size() + more.size(), "a string");
            return Value(text + more);
        }
        default: return py_arith(op, l, in.eval(*right));
    }
}

Value CompareExpr::eval(Interpreter& in) const {
    Value l = in.eval(*first);
    for (const auto& [op, e] : rest) {
        Value r = in.eval(*e);
        bool ok = false;
        switch (op) {
            case Op::Eq: ok = py_equal(l, r); break;
            case Op::Ne: ok = !py_equal(l, r); break;
            case Op::Lt: ok = py_less(l, r); break;
            case Op::Le: ok = !py_less(r, l); break;
            case Op::Gt: ok = py_less(r, l); break;
            case Op::Ge: ok = !py_less(l, r); break;
            case Op::In: ok = py_contains(r, l); break;
            case Op::NotIn: ok = !py_contains(r, l); break;
        }
        if (!ok) return Value(false);
        l = std::move(r);
    }
    return Value(true);
}

Value CondExpr::eval(Interpreter& in) const {
    if (in.eval(*cond).truthy()) return in.eval(*then);
    if (otherwise) return in.eval(*otherwise);
    return Value::undefined("the inline if-expression on line " + std::to_string(line) +
                            " evaluated to false and no else section was defined.");
}

}  // namespace lantern::jinja
