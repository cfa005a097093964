// Execution of Jinja statements: output, if, for (with loop.*, filtering,
// else, break/continue), set (names, tuples, namespace attributes, blocks),
// macros and call blocks, filter/with/generation blocks.
#include <memory>
#include <unordered_set>

#include "chat/jinja_interp.h"

namespace lantern::jinja {

namespace {

// Binds `targets` to `item`, unpacking it when the loop or set names several.
void bind_targets(Interpreter& in, const std::vector<std::string>& targets, bool unpack, const Value& item) {
    if (!unpack) {
        in.assign(targets[0], item);
        return;
    }
    const std::vector<Value> parts = item.iterate();
    if (parts.size() != targets.size()) {
        throw RenderError(parts.size() > targets.size()
                              ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                              : "not enough values to unpack (expected " + std::to_string(targets.size()) +
                                    ", got " + std::to_string(parts.size()) + ")");
    }
    for (size_t i = 0; i < targets.size(); ++i) in.assign(targets[i], parts[i]);
}

// The `loop` variable of one iteration.
Value make_loop(const std::vector<Value>& items, size_t i, const std::shared_ptr<Value>& last_changed) {
    const size_t n = items.size();
    Value loop = Value::dict();
    DictData& d = loop.dict_data();
    d.items.reserve(14);
    d.items.emplace_back(Value("index"), Value(int64_t(i + 1)));
    d.items.emplace_back(Value("index0"), Value(int64_t(i)));
    d.items.emplace_back(Value("revindex"), Value(int64_t(n - i)));
    d.items.emplace_back(Value("revindex0"), Value(int64_t(n - i - 1)));
    d.items.emplace_back(Value("first"), Value(i == 0));
    d.items.emplace_back(Value("last"), Value(i + 1 == n));
    d.items.emplace_back(Value("length"), Value(int64_t(n)));
    d.items.emplace_back(Value("depth"), Value(1));
    d.items.emplace_back(Value("depth0"), Value(0));
    d.items.emplace_back(Value("previtem"),
                         i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    d.items.emplace_back(Value("nextitem"), i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    d.items.emplace_back(Value("cycle"), Value::function("loop.cycle", [i](Interpreter&, CallArgs& args) -> Value {
                             if (args.positional.empty()) throw RenderError("no items for cycling given");
                             return args.positional[i % args.positional.size()];
                         }));
    d.items.emplace_back(Value("changed"),
                         Value::function("loop.changed", [last_changed](Interpreter&, CallArgs& args) -> Value {
                             Value now = Value::list(args.positional);
                             if (!last_changed->is_undefined() && py_equal(*last_changed, now)) return Value(false);
                             *last_changed = std::move(now);
                             return Value(true);
                         }));
    return loop;
}

// Binds macro (or caller) parameters from a call's arguments.
void bind_params(Interpreter& in, const std::string& name, const std::vector<MacroParam>& params, CallArgs& args) {
    std::vector<Value> varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
        if (i < params.size()) in.assign(params[i].name, args.positional[i]);
        else varargs.push_back(args.positional[i]);
    }
    Value kwargs = Value::dict();
    std::vector<bool> bound(params.size(), false);
    for (size_t i = 0; i < params.size() && i < args.positional.size(); ++i) bound[i] = true;
    for (auto& [key, value] : args.keyword) {
        bool matched = false;
        for (size_t i = 0; i < params.size(); ++i) {
            if (params[i].name != key) continue;
            if (bound[i]) throw RenderError("macro '" + name + "' got multiple values for argument '" + key + "'");
            in.assign(key, value);
            bound[i] = matched = true;
        }
        if (!matched) {
            if (key == "caller") in.assign("caller", value);
            else kwargs.dict_data().set(Value(key), value);
        }
    }
    for (size_t i = 0; i < params.size(); ++i) {
        if (bound[i]) continue;
        in.assign(params[i].name, params[i].default_value
                                      ? in.eval(*params[i].default_value)
                                      : Value::undefined("parameter '" + params[i].name + "' was not provided"));
    }
    in.assign("varargs", Value::list(std::move(varargs), /*tuple=*/true));
    in.assign("kwargs", kwargs);
}

// Whether `v` is or holds the namespace `ns` (each list and dict looked at
// once: values may share parts).
bool holds(const Value& v, const DictData* ns, std::unordered_set<const void*>& seen) {
    if (v.is_list()) {
        if (!seen.insert(&v.list_data()).second) return false;
        for (const Value& item : v.list_data().items) {
            if (holds(item, ns, seen)) return true;
        }
    } else if (v.is_dict()) {
        if (&v.dict_data() == ns) return true;
        if (!seen.insert(&v.dict_data()).second) return false;
        for (const auto& [k, item] : v.dict_data().items) {
            if (holds(item, ns, seen)) return true;
        }
    }
    return false;
}

}  // namespace

Flow TextStmt::exec(Interpreter&, std::string& out) const {
    out += text;
    return Flow::Normal;
}

Flow OutputStmt::exec(Interpreter& in, std::string& out) const {
    out += in.eval(*expr).to_str();
    return Flow::Normal;
}

Flow IfStmt::exec(Interpreter& in, std::string& out) const {
    for (const auto& [cond, body] : branches) {
        if (in.eval(*cond).truthy()) return in.exec(body, out);
    }
    return in.exec(otherwise, out);
}

Flow ForStmt::exec(Interpreter& in, std::string& out) const {
    std::vector<Value> items = in.eval(*iterable).iterate();
    if (filter) {
        std::vector<Value> kept;
        for (Value& item : items) {
            Interpreter::Frame frame(in, false);
            bind_targets(in, targets, unpack, item);
            if (in.eval(*filter).truthy()) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    // As jinja2 compiles it, `else` runs unless some iteration reached the end
    // of the body: skipping every item with continue (or breaking out of the
    // first one) counts as not having looped.
    bool completed = false;
    auto last_changed = std::make_shared<Value>();
    for (size_t i = 0; i < items.size(); ++i) {
        const Interpreter::Step step(in);
        Interpreter::Frame frame(in, false);  // each iteration starts from the enclosing scope
        bind_targets(in, targets, unpack, items[i]);
        in.assign("loop", make_loop(items, i, last_changed));
        const Flow flow = in.exec(body, out);
        if (flow == Flow::Break) break;
        if (flow == Flow::Normal) completed = true;
    }
    if (!completed) return in.exec(otherwise, out);
    return Flow::Normal;
}

Flow SetStmt::exec(Interpreter& in, std::string&) const {
    Value v = in.eval(*value);
    if (!attribute.empty()) {
        const Value ns = in.lookup(targets[0]);
        if (!ns.is_namespace()) throw RenderError("cannot assign attribute on non-namespace object");
        // A namespace that held itself would print, compare and free forever
        // (values are shared by reference, not garbage-collected).
        std::unordered_set<const void*> seen;
        if (holds(v, &ns.dict_data(), seen)) throw RenderError("a namespace cannot hold itself");
        ns.dict_data().set(Value(attribute), std::move(v));
    } else {
        bind_targets(in, targets, unpack, v);
    }
    return Flow::Normal;
}

Flow SetBlockStmt::exec(Interpreter& in, std::string&) const {
    std::string captured;
    {
        Interpreter::Frame frame(in, false);
        in.exec(body, captured);
    }
    Value v(std::move(captured));
    for (const auto& f : filters) v = f->apply(in, v);
    in.assign(target, std::move(v));
    return Flow::Normal;
}

Flow MacroStmt::exec(Interpreter& in, std::string&) const {
    const MacroStmt* self = this;  // the syntax tree outlives every render
    in.assign(name, Value::function(name, [self](Interpreter& in, CallArgs& args) -> Value {
                  Interpreter::Frame frame(in, true);
                  bind_params(in, self->name, self->params, args);
                  std::string out;
                  in.exec(self->body, out);
                  return Value(std::move(out));
              }));
    return Flow::Normal;
}

Flow CallBlockStmt::exec(Interpreter& in, std::string& out) const {
    const CallBlockStmt* self = this;
    Value caller = Value::function("caller", [self](Interpreter& in, CallArgs& args) -> Value {
        Interpreter::Frame frame(in, false);
        bind_params(in, "caller", self->caller_params, args);
        std::string body_out;
        in.exec(self->body, body_out);
        return Value(std::move(body_out));
    });
    const Value fn = in.eval(*call->callee);
    CallArgs args = in.eval_args(call->args);
    args.keyword.emplace_back("caller", std::move(caller));
    out += in.call(fn, args).to_str();
    return Flow::Normal;
}

Flow FilterBlockStmt::exec(Interpreter& in, std::string& out) const {
    std::string captured;
    {
        Interpreter::Frame frame(in, false);
        in.exec(body, captured);
    }
    Value v(std::move(captured));
    for (const auto& f : filters) v = f->apply(in, v);
    out += v.to_str();
    return Flow::Normal;
}

Flow WithStmt::exec(Interpreter& in, std::string& out) const {
    std::vector<Value> values;
    for (const auto& a : assignments) values.push_back(in.eval(*a.second));
    Interpreter::Frame frame(in, false);
    for (size_t i = 0; i < assignments.size(); ++i) in.assign(assignments[i].first, values[i]);
    return in.exec(body, out);
}

Flow ScopedBodyStmt::exec(Interpreter& in, std::string& out) const {
    Interpreter::Frame frame(in, false);
    return in.exec(body, out);
}

Flow LoopControlStmt::exec(Interpreter&, std::string&) const { return flow; }

}  // namespace lantern::jinja
