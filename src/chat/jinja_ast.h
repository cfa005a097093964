// Syntax tree of a Jinja template. The parser (jinja_parser.cpp) builds it; the
// interpreter evaluates expressions (jinja_eval.cpp) and executes statements
// (jinja_exec.cpp). Every node keeps the line and column where it starts, for
// error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace lantern::jinja {

struct Node {
    int line = 0;
    int column = 0;
    virtual ~Node() = default;
};

// ------------------------------------------------------------ expressions ----

struct Expr : Node {
    virtual Value eval(Interpreter& in) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;

// Arguments of a call, filter or test as written: f(a, b, k=v, *rest, **more).
struct ArgList {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
    ExprPtr star;         // *args
    ExprPtr double_star;  // **kwargs
};

struct LiteralExpr : Expr {
    Value value;
    Value eval(Interpreter& in) const override;
};

struct NameExpr : Expr {
    std::string name;
    Value eval(Interpreter& in) const override;
};

struct ListExpr : Expr {  // [a, b] or (a, b)
    std::vector<ExprPtr> items;
    bool tuple = false;
    Value eval(Interpreter& in) const override;
};

struct DictExpr : Expr {  // {k: v}
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
    Value eval(Interpreter& in) const override;
};

struct AttrExpr : Expr {  // obj.name
    ExprPtr object;
    std::string name;
    Value eval(Interpreter& in) const override;
};

struct ItemExpr : Expr {  // obj[index]
    ExprPtr object;
    ExprPtr index;
    Value eval(Interpreter& in) const override;
};

struct SliceExpr : Expr {  // obj[start:stop:step], each part optional
    ExprPtr object;
    ExprPtr start, stop, step;
    Value eval(Interpreter& in) const override;
};

struct CallExpr : Expr {  // callee(args)
    ExprPtr callee;
    ArgList args;
    Value eval(Interpreter& in) const override;
};

struct FilterExpr : Expr {  // value | name(args); value is null inside {% filter %} blocks
    ExprPtr value;
    std::string name;
    ArgList args;
    Value eval(Interpreter& in) const override;
    Value apply(Interpreter& in, const Value& input) const;
};

struct TestExpr : Expr {  // value is [not] name(args)
    ExprPtr value;
    std::string name;
    ArgList args;
    bool negated = false;
    Value eval(Interpreter& in) const override;
};

struct UnaryExpr : Expr {  // -x, +x, not x
    enum class Op { Neg, Pos, Not } op;
    ExprPtr operand;
    Value eval(Interpreter& in) const override;
};

struct BinaryExpr : Expr {  // + - * / // % ** ~ and or
    enum class Op { Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat, And, Or } op;
    ExprPtr left, right;
    Value eval(Interpreter& in) const override;
};

struct CompareExpr : Expr {  // a == b < c ...; `in` and `not in` included
    enum class Op { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };
    ExprPtr first;
    std::vector<std::pair<Op, ExprPtr>> rest;
    Value eval(Interpreter& in) const override;
};

struct CondExpr : Expr {  // then if cond else otherwise; no else = undefined
    ExprPtr then, cond, otherwise;
    Value eval(Interpreter& in) const override;
};

// ------------------------------------------------------------- statements ----

enum class Flow { Normal, Break, Continue };

struct Stmt : Node {
    virtual Flow exec(Interpreter& in, std::string& out) const = 0;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
    std::string text;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct OutputStmt : Stmt {  // {{ expr }}
    ExprPtr expr;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct IfStmt : Stmt {
    std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
    Body otherwise;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct ForStmt : Stmt {
    std::vector<std::string> targets;  // one name, or several to unpack
    bool unpack = false;
    ExprPtr iterable;
    ExprPtr filter;  // for x in xs if filter
    Body body, otherwise;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct SetStmt : Stmt {  // set a = v / set a, b = v / set ns.attr = v
    std::vector<std::string> targets;
    bool unpack = false;
    std::string attribute;  // non-empty: targets[0] is a namespace
    ExprPtr value;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct SetBlockStmt : Stmt {  // set name [| filters] %}body{% endset
    std::string target;
    std::vector<std::unique_ptr<FilterExpr>> filters;
    Body body;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // may be null
};

struct MacroStmt : Stmt {
    std::string name;
    std::vector<MacroParam> params;
    Body body;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct CallBlockStmt : Stmt {  // call(params) macro(args) %}body{% endcall
    std::vector<MacroParam> caller_params;
    std::unique_ptr<CallExpr> call;
    Body body;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct FilterBlockStmt : Stmt {  // filter f | g %}body{% endfilter
    std::vector<std::unique_ptr<FilterExpr>> filters;
    Body body;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct WithStmt : Stmt {  // with a = x, b = y %}body{% endwith
    std::vector<std::pair<std::string, ExprPtr>> assignments;
    Body body;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct ScopedBodyStmt : Stmt {  // generation (HF) and block: the body in its own scope
    Body body;
    Flow exec(Interpreter& in, std::string& out) const override;
};

struct LoopControlStmt : Stmt {  // break / continue
    Flow flow = Flow::Break;
    Flow exec(Interpreter& in, std::string& out) const override;
};

// Parses a token stream (jinja_lexer.h) into the template's body. Throws a
// located RenderError on a syntax error.
struct Token;
Body parse_template(const std::vector<Token>& tokens);

}  // namespace lantern::jinja
