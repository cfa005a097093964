// The Jinja interpreter: scopes, calls and the operations shared by the
// expression (jinja_eval.cpp) and statement (jinja_exec.cpp) evaluators, with
// the builtin filters, tests, methods and globals (jinja_builtins.h).
//
// Scoping follows jinja2: `set` at the top level or inside if/with blocks
// writes the current frame; every for-loop iteration, macro call and
// call/filter/generation block runs in a fresh frame that is dropped after it,
// so assignments there do not leak out (use a namespace() for that). A macro
// sees its arguments and the template's top-level names, not its caller's locals.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace lantern::jinja {

struct RenderOptions {
    // The clock behind strftime_now(); nullopt = the local time at render.
    std::optional<std::tm> now;
};

class Interpreter {
public:
    // `context` holds the template's variables (messages, bos_token, ...).
    Interpreter(const Value& context, RenderOptions options);

    std::string render(const Body& body);

    // Evaluates `e`, attaching e's position to an error that has none yet.
    Value eval(const Expr& e);
    // Executes statements, appending their output; stops early on break/continue.
    // Both throw RenderError past the Limits (jinja_value.h): steps, depth,
    // and the output's length.
    Flow exec(const Body& body, std::string& out);

    // ---------------------------------------------------------- scopes ----
    Value lookup(const std::string& name) const;
    void assign(const std::string& name, Value value);
    // Pushes a frame for the lifetime of the guard. An isolated frame (macro
    // calls) sees only itself and the top-level frames below it.
    class Frame {
    public:
        Frame(Interpreter& in, bool isolated);
        ~Frame();
        Frame(const Frame&) = delete;
        Frame& operator=(const Frame&) = delete;

    private:
        Interpreter& in_;
    };

    // ----------------------------------------------------------- calls ----
    Value call(const Value& callee, CallArgs& args);
    CallArgs eval_args(const ArgList& args);

    // jinja2's getattr (obj.name) and getitem (obj[key]): attributes first for
    // `.`, items first for `[]`; missing ones are undefined, not errors.
    Value get_attr(const Value& obj, const std::string& name);
    Value get_item(const Value& obj, const Value& key);

    const RenderOptions& options() const { return options_; }

    // Counts an evaluation, statement or loop iteration against
    // Limits::kMaxSteps and enters one level of Limits::kMaxDepth for the
    // guard's lifetime.
    class Step {
    public:
        explicit Step(Interpreter& in);
        ~Step() { --in_.depth_; }
        Step(const Step&) = delete;
        Step& operator=(const Step&) = delete;

    private:
        Interpreter& in_;
    };

private:
    struct Scope {
        std::vector<std::pair<std::string, Value>> vars;
        bool isolated = false;
    };
    std::vector<Scope> scopes_;  // [0]: globals, [1]: context and top-level sets
    RenderOptions options_;
    int depth_ = 0;
    uint64_t steps_ = 0;
};

// Builtin names the interpreter dispatches to (jinja_builtins.cpp & co.).
using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);
// The method `name` of a str, list or dict bound to `self`; nullopt if there is
// none. Methods that would mutate (append, pop, ...) come back as an undefined
// value whose use fails, as in jinja2's immutable sandbox.
std::optional<Value> bind_method(const Value& self, const std::string& name);
// range, dict, namespace, raise_exception, strftime_now, joiner, cycler.
void add_globals(std::vector<std::pair<std::string, Value>>& scope);

// Binary operators with Python semantics (shared by the evaluator and filters).
Value py_add(const Value& a, const Value& b);
Value py_arith(BinaryExpr::Op op, const Value& a, const Value& b);

}  // namespace lantern::jinja
