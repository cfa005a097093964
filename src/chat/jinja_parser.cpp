// Recursive-descent parser for Jinja, following jinja2's grammar and operator
// precedence (lowest first): conditional `a if c else b`, or, and, not,
// comparisons (== != < <= > >= in, not in), + -, ~, * / // %, **, unary - +,
// then postfix . [] () and filters | / tests `is`.
#include <initializer_list>

#include "chat/jinja_ast.h"
#include "chat/jinja_interp.h"
#include "chat/jinja_lexer.h"

namespace lantern::jinja {

namespace {

class Parser {
public:
    explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

    Body parse() {
        Body body = parse_body({});
        if (cur().kind != TokenKind::Eof) fail(cur(), "unexpected " + describe(cur()));
        return body;
    }

private:
    // ---------------------------------------------------------- tokens ----
    const Token& cur() const { return toks_[pos_]; }
    const Token& peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
    const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }

    bool is_op(std::string_view op, size_t ahead = 0) const {
        const Token& t = peek(ahead);
        return t.kind == TokenKind::Op && t.text == op;
    }
    bool is_name(std::string_view name, size_t ahead = 0) const {
        const Token& t = peek(ahead);
        return t.kind == TokenKind::Name && t.text == name;
    }
    bool skip_op(std::string_view op) {
        if (!is_op(op)) return false;
        ++pos_;
        return true;
    }
    bool skip_name(std::string_view name) {
        if (!is_name(name)) return false;
        ++pos_;
        return true;
    }

    static std::string describe(const Token& t) {
        switch (t.kind) {
            case TokenKind::Name:
            case TokenKind::Op: return "'" + t.text + "'";
            case TokenKind::String: return "string";
            case TokenKind::Int:
            case TokenKind::Float: return "number '" + t.text + "'";
            default: return "'" + std::string(token_kind_name(t.kind)) + "'";
        }
    }

    [[noreturn]] static void fail(const Token& at, const std::string& reason) {
        RenderError err(reason);
        err.locate(at.line, at.column);
        throw err;
    }

    void expect_op(std::string_view op) {
        if (!skip_op(op)) fail(cur(), "expected '" + std::string(op) + "', got " + describe(cur()));
    }
    void expect_block_end() {
        if (cur().kind != TokenKind::BlockEnd) fail(cur(), "expected end of statement block, got " + describe(cur()));
        ++pos_;
    }
    std::string expect_name() {
        if (cur().kind != TokenKind::Name) fail(cur(), "expected a name, got " + describe(cur()));
        return next().text;
    }

    // The syntax tree's depth, bounded (Limits::kMaxNesting) because it is
    // parsed, evaluated and freed recursively: each nested expression or
    // statement and each link of a chain (a.b.c, x | f | g, a + b + c) is
    // one level. A function that adds levels restores the count on return.
    class Restore {
    public:
        explicit Restore(Parser& p) : p_(p), saved_(p.nesting_) {}
        ~Restore() { p_.nesting_ = saved_; }
        Restore(const Restore&) = delete;
        Restore& operator=(const Restore&) = delete;

    private:
        Parser& p_;
        int saved_;
    };
    void deeper(const Token& at) {
        if (++nesting_ > Limits::kMaxNesting) {
            fail(at, "the template nests deeper than " + std::to_string(Limits::kMaxNesting) + " levels");
        }
    }

    template <class N>
    std::unique_ptr<N> make(const Token& at) {
        auto n = std::make_unique<N>();
        n->line = at.line;
        n->column = at.column;
        return n;
    }

    // ------------------------------------------------------ statements ----

    // Statements up to a `{% name %}` tag whose name is in `end_tags` (left
    // unconsumed, positioned at the name) or the end of the template.
    Body parse_body(std::initializer_list<std::string_view> end_tags) {
        Body body;
        while (true) {
            const Token& t = cur();
            if (t.kind == TokenKind::Eof) {
                if (end_tags.size() != 0) {
                    std::string want;
                    for (auto tag : end_tags) want += (want.empty() ? "'" : " or '") + std::string(tag) + "'";
                    fail(t, "Unexpected end of template. Jinja was looking for the following tags: " + want + ".");
                }
                return body;
            }
            if (t.kind == TokenKind::Text) {
                auto s = make<TextStmt>(t);
                s->text = next().text;
                body.push_back(std::move(s));
            } else if (t.kind == TokenKind::VarBegin) {
                next();
                auto s = make<OutputStmt>(t);
                s->expr = parse_tuple(true, false);
                if (cur().kind != TokenKind::VarEnd) fail(cur(), "unexpected " + describe(cur()));
                next();
                body.push_back(std::move(s));
            } else if (t.kind == TokenKind::BlockBegin) {
                const Token& name = peek();
                if (name.kind != TokenKind::Name) fail(name, "tag name expected");
                for (auto tag : end_tags) {
                    if (name.text == tag) {
                        next();  // {%
                        return body;
                    }
                }
                next();
                body.push_back(parse_statement());
            } else {
                fail(t, "unexpected " + describe(t));
            }
        }
    }

    StmtPtr parse_statement() {
        const Token& t = cur();
        const Restore restore(*this);
        deeper(t);
        const std::string& tag = t.text;
        if (tag == "if") return parse_if();
        if (tag == "for") return parse_for();
        if (tag == "set") return parse_set();
        if (tag == "macro") return parse_macro();
        if (tag == "call") return parse_call_block();
        if (tag == "filter") return parse_filter_block();
        if (tag == "with") return parse_with();
        if (tag == "generation" || tag == "block") return parse_scoped(tag == "block");
        if (tag == "break" || tag == "continue") {
            if (loop_depth_ == 0) fail(t, "'" + tag + "' outside of a loop");
            auto s = make<LoopControlStmt>(t);
            s->flow = tag == "break" ? Flow::Break : Flow::Continue;
            next();
            expect_block_end();
            return s;
        }
        fail(t, "Encountered unknown tag '" + tag + "'.");
    }

    // After parse_body stopped at `end`: consume it and the block end.
    void close_tag(std::string_view end) {
        if (!skip_name(end)) fail(cur(), "expected '" + std::string(end) + "'");
        expect_block_end();
    }

    StmtPtr parse_if() {
        auto s = make<IfStmt>(cur());
        next();  // if
        while (true) {
            ExprPtr cond = parse_tuple(false, false);
            expect_block_end();
            Body body = parse_body({"elif", "else", "endif"});
            s->branches.emplace_back(std::move(cond), std::move(body));
            if (skip_name("elif")) continue;
            if (skip_name("else")) {
                expect_block_end();
                s->otherwise = parse_body({"endif"});
            }
            close_tag("endif");
            return s;
        }
    }

    // Assignment targets: `name` or `a, b` (parenthesised or not).
    void parse_targets(std::vector<std::string>& names, bool& unpack) {
        const bool paren = skip_op("(");
        names.push_back(expect_name());
        while (skip_op(",")) {
            unpack = true;
            if (paren && is_op(")")) break;
            if (!paren && cur().kind != TokenKind::Name) break;
            names.push_back(expect_name());
        }
        if (paren) {
            unpack = true;
            expect_op(")");
        }
    }

    StmtPtr parse_for() {
        auto s = make<ForStmt>(cur());
        next();  // for
        parse_targets(s->targets, s->unpack);
        if (!skip_name("in")) fail(cur(), "expected 'in', got " + describe(cur()));
        s->iterable = parse_tuple(false, false, /*stop_at_if*/ true);
        if (skip_name("if")) s->filter = parse_expression(true);
        if (is_name("recursive")) fail(cur(), "recursive for loops are not supported");
        expect_block_end();
        ++loop_depth_;
        s->body = parse_body({"endfor", "else"});
        --loop_depth_;
        if (skip_name("else")) {
            expect_block_end();
            s->otherwise = parse_body({"endfor"});
        }
        close_tag("endfor");
        return s;
    }

    StmtPtr parse_set() {
        const Token& at = cur();
        next();  // set
        if (cur().kind == TokenKind::Name && is_op(".", 1)) {  // set ns.attr = value
            auto s = make<SetStmt>(at);
            s->targets.push_back(next().text);
            next();  // .
            s->attribute = expect_name();
            expect_op("=");
            s->value = parse_tuple(true, false);
            expect_block_end();
            return s;
        }
        std::vector<std::string> names;
        bool unpack = false;
        parse_targets(names, unpack);
        if (skip_op("=")) {
            auto s = make<SetStmt>(at);
            s->targets = std::move(names);
            s->unpack = unpack;
            s->value = parse_tuple(true, false);
            expect_block_end();
            return s;
        }
        if (unpack) fail(cur(), "a block assignment takes one name");
        auto s = make<SetBlockStmt>(at);
        s->target = names[0];
        while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
        expect_block_end();
        s->body = parse_body({"endset"});
        close_tag("endset");
        return s;
    }

    std::vector<MacroParam> parse_params() {
        std::vector<MacroParam> params;
        expect_op("(");
        while (!is_op(")")) {
            if (!params.empty()) expect_op(",");
            if (is_op(")")) break;
            MacroParam p;
            p.name = expect_name();
            if (skip_op("=")) p.default_value = parse_expression(true);
            params.push_back(std::move(p));
        }
        expect_op(")");
        return params;
    }

    StmtPtr parse_macro() {
        auto s = make<MacroStmt>(cur());
        next();  // macro
        s->name = expect_name();
        s->params = parse_params();
        expect_block_end();
        const int saved = loop_depth_;
        loop_depth_ = 0;
        s->body = parse_body({"endmacro"});
        loop_depth_ = saved;
        close_tag("endmacro");
        return s;
    }

    StmtPtr parse_call_block() {
        auto s = make<CallBlockStmt>(cur());
        next();  // call
        if (is_op("(")) s->caller_params = parse_params();
        const Token& at = cur();
        ExprPtr e = parse_expression(true);
        auto* call = dynamic_cast<CallExpr*>(e.get());
        if (!call) fail(at, "expected a call after 'call'");
        e.release();
        s->call.reset(call);
        expect_block_end();
        s->body = parse_body({"endcall"});
        close_tag("endcall");
        return s;
    }

    StmtPtr parse_filter_block() {
        auto s = make<FilterBlockStmt>(cur());
        next();  // filter
        s->filters.push_back(parse_filter(nullptr));
        while (skip_op("|")) s->filters.push_back(parse_filter(nullptr));
        expect_block_end();
        s->body = parse_body({"endfilter"});
        close_tag("endfilter");
        return s;
    }

    StmtPtr parse_with() {
        auto s = make<WithStmt>(cur());
        next();  // with
        while (cur().kind != TokenKind::BlockEnd) {
            if (!s->assignments.empty()) expect_op(",");
            std::string name = expect_name();
            expect_op("=");
            s->assignments.emplace_back(std::move(name), parse_expression(true));
        }
        expect_block_end();
        s->body = parse_body({"endwith"});
        close_tag("endwith");
        return s;
    }

    StmtPtr parse_scoped(bool named) {
        auto s = make<ScopedBodyStmt>(cur());
        next();  // generation / block
        if (named) expect_name();
        expect_block_end();
        s->body = parse_body({named ? "endblock" : "endgeneration"});
        if (named) {
            next();  // endblock
            if (cur().kind == TokenKind::Name) next();  // optional block name
            expect_block_end();
        } else {
            close_tag("endgeneration");
        }
        return s;
    }

    // ----------------------------------------------------- expressions ----

    // Comma-separated expressions; more than one (or a trailing comma) makes a
    // tuple. `stop_at_if` leaves a `for ... in x if cond` filter alone.
    ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, bool stop_at_if = false) {
        const Token& at = cur();
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) {
                if (!skip_op(",")) break;
                is_tuple = true;
            }
            if (is_op(")") || is_op("]") || cur().kind == TokenKind::VarEnd || cur().kind == TokenKind::BlockEnd ||
                (stop_at_if && is_name("if"))) {
                break;
            }
            items.push_back(parse_expression(with_condexpr));
        }
        if (!is_tuple && items.size() == 1) return std::move(items[0]);
        if (items.empty() && !explicit_parens) fail(at, "Expected an expression, got " + describe(at));
        auto t = make<ListExpr>(at);
        t->items = std::move(items);
        t->tuple = true;
        return t;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        const Restore restore(*this);
        deeper(cur());
        ExprPtr e = parse_or();
        if (!with_condexpr) return e;
        while (is_name("if")) {
            const Token& at = next();
            deeper(at);
            auto c = make<CondExpr>(at);
            c->then = std::move(e);
            c->cond = parse_or();
            if (skip_name("else")) c->otherwise = parse_expression(true);
            e = std::move(c);
        }
        return e;
    }

    // A chain's next link: call inside the chain's function (its Restore).
    ExprPtr binary(BinaryExpr::Op op, const Token& at, ExprPtr l, ExprPtr r) {
        deeper(at);
        auto b = make<BinaryExpr>(at);
        b->op = op;
        b->left = std::move(l);
        b->right = std::move(r);
        return b;
    }

    ExprPtr parse_or() {
        const Restore restore(*this);
        ExprPtr e = parse_and();
        while (is_name("or")) {
            const Token& at = next();
            e = binary(BinaryExpr::Op::Or, at, std::move(e), parse_and());
        }
        return e;
    }

    ExprPtr parse_and() {
        const Restore restore(*this);
        ExprPtr e = parse_not();
        while (is_name("and")) {
            const Token& at = next();
            e = binary(BinaryExpr::Op::And, at, std::move(e), parse_not());
        }
        return e;
    }

    ExprPtr parse_not() {
        const Restore restore(*this);
        if (is_name("not")) {
            const Token& at = next();
            deeper(at);
            auto u = make<UnaryExpr>(at);
            u->op = UnaryExpr::Op::Not;
            u->operand = parse_not();
            return u;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const Token& at = cur();
        ExprPtr first = parse_math1();
        std::vector<std::pair<CompareExpr::Op, ExprPtr>> rest;
        while (true) {
            CompareExpr::Op op;
            if (is_op("==")) op = CompareExpr::Op::Eq;
            else if (is_op("!=")) op = CompareExpr::Op::Ne;
            else if (is_op("<")) op = CompareExpr::Op::Lt;
            else if (is_op("<=")) op = CompareExpr::Op::Le;
            else if (is_op(">")) op = CompareExpr::Op::Gt;
            else if (is_op(">=")) op = CompareExpr::Op::Ge;
            else if (is_name("in")) op = CompareExpr::Op::In;
            else if (is_name("not") && is_name("in", 1)) {
                next();
                op = CompareExpr::Op::NotIn;
            } else {
                break;
            }
            next();
            rest.emplace_back(op, parse_math1());
        }
        if (rest.empty()) return first;
        auto c = make<CompareExpr>(at);
        c->first = std::move(first);
        c->rest = std::move(rest);
        return c;
    }

    ExprPtr parse_math1() {
        const Restore restore(*this);
        ExprPtr e = parse_concat();
        while (is_op("+") || is_op("-")) {
            const Token& at = next();
            e = binary(at.text == "+" ? BinaryExpr::Op::Add : BinaryExpr::Op::Sub, at, std::move(e), parse_concat());
        }
        return e;
    }

    ExprPtr parse_concat() {
        const Restore restore(*this);
        ExprPtr e = parse_math2();
        while (is_op("~")) {
            const Token& at = next();
            e = binary(BinaryExpr::Op::Concat, at, std::move(e), parse_math2());
        }
        return e;
    }

    ExprPtr parse_math2() {
        const Restore restore(*this);
        ExprPtr e = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token& at = next();
            const BinaryExpr::Op op = at.text == "*"    ? BinaryExpr::Op::Mul
                                      : at.text == "/"  ? BinaryExpr::Op::Div
                                      : at.text == "//" ? BinaryExpr::Op::FloorDiv
                                                        : BinaryExpr::Op::Mod;
            e = binary(op, at, std::move(e), parse_pow());
        }
        return e;
    }

    ExprPtr parse_pow() {
        const Restore restore(*this);
        ExprPtr e = parse_unary(true);
        while (is_op("**")) {
            const Token& at = next();
            e = binary(BinaryExpr::Op::Pow, at, std::move(e), parse_unary(true));
        }
        return e;
    }

    ExprPtr parse_unary(bool with_filter) {
        const Restore restore(*this);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            const Token& at = next();
            deeper(at);
            auto u = make<UnaryExpr>(at);
            u->op = at.text == "-" ? UnaryExpr::Op::Neg : UnaryExpr::Op::Pos;
            u->operand = parse_unary(false);
            e = std::move(u);
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprPtr parse_primary() {
        const Token& t = cur();
        switch (t.kind) {
            case TokenKind::Name: {
                next();
                auto lit = make<LiteralExpr>(t);
                if (t.text == "true" || t.text == "True") lit->value = Value(true);
                else if (t.text == "false" || t.text == "False") lit->value = Value(false);
                else if (t.text == "none" || t.text == "None") lit->value = Value::none();
                else {
                    auto n = make<NameExpr>(t);
                    n->name = t.text;
                    return n;
                }
                return lit;
            }
            case TokenKind::String: {
                std::string s;
                while (cur().kind == TokenKind::String) s += next().text;  // adjacent literals join
                auto lit = make<LiteralExpr>(t);
                lit->value = Value(std::move(s));
                return lit;
            }
            case TokenKind::Int:
            case TokenKind::Float: {
                next();
                auto lit = make<LiteralExpr>(t);
                try {
                    lit->value = t.kind == TokenKind::Int ? Value(int64_t(std::stoll(t.text))) : Value(std::stod(t.text));
                } catch (const std::exception&) {
                    fail(t, "number out of range: " + t.text);
                }
                return lit;
            }
            case TokenKind::Op:
                if (t.text == "(") {
                    next();
                    ExprPtr e = parse_tuple(true, true);
                    expect_op(")");
                    return e;
                }
                if (t.text == "[") {
                    next();
                    auto l = make<ListExpr>(t);
                    while (!is_op("]")) {
                        if (!l->items.empty()) expect_op(",");
                        if (is_op("]")) break;
                        l->items.push_back(parse_expression(true));
                    }
                    expect_op("]");
                    return l;
                }
                if (t.text == "{") {
                    next();
                    auto d = make<DictExpr>(t);
                    while (!is_op("}")) {
                        if (!d->items.empty()) expect_op(",");
                        if (is_op("}")) break;
                        ExprPtr key = parse_expression(true);
                        expect_op(":");
                        d->items.emplace_back(std::move(key), parse_expression(true));
                    }
                    expect_op("}");
                    return d;
                }
                break;
            default: break;
        }
        fail(t, "unexpected " + describe(t));
    }

    ExprPtr parse_postfix(ExprPtr e) {
        const Restore restore(*this);
        while (true) {
            const Token& at = cur();
            if (is_op(".") || is_op("[") || is_op("(")) deeper(at);
            if (is_op(".")) {
                next();
                const Token& name = cur();
                if (name.kind == TokenKind::Name) {
                    auto a = make<AttrExpr>(at);
                    a->object = std::move(e);
                    a->name = next().text;
                    e = std::move(a);
                } else if (name.kind == TokenKind::Int) {  // foo.0 is foo[0]
                    auto i = make<ItemExpr>(at);
                    i->object = std::move(e);
                    auto lit = make<LiteralExpr>(name);
                    try {
                        lit->value = Value(int64_t(std::stoll(name.text)));
                    } catch (const std::exception&) {
                        fail(name, "number out of range: " + name.text);
                    }
                    next();
                    i->index = std::move(lit);
                    e = std::move(i);
                } else {
                    fail(name, "expected a name after '.'");
                }
            } else if (is_op("[")) {
                next();
                e = parse_subscript(std::move(e), at);
                expect_op("]");
            } else if (is_op("(")) {
                e = parse_call(std::move(e), at);
            } else {
                return e;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr object, const Token& at) {
        ExprPtr start, stop, step;
        if (is_op("]")) {  // x[] subscripts with an empty tuple, as in jinja2
            auto i = make<ItemExpr>(at);
            i->object = std::move(object);
            auto empty = make<ListExpr>(at);
            empty->tuple = true;
            i->index = std::move(empty);
            return i;
        }
        if (!is_op(":")) {
            start = parse_expression(true);
            if (!is_op(":")) {
                auto i = make<ItemExpr>(at);
                i->object = std::move(object);
                i->index = std::move(start);
                return i;
            }
        }
        expect_op(":");
        if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
        if (skip_op(":") && !is_op("]")) step = parse_expression(true);
        auto s = make<SliceExpr>(at);
        s->object = std::move(object);
        s->start = std::move(start);
        s->stop = std::move(stop);
        s->step = std::move(step);
        return s;
    }

    ArgList parse_args() {
        ArgList args;
        expect_op("(");
        bool first = true;
        while (!is_op(")")) {
            if (!first) expect_op(",");
            first = false;
            if (is_op(")")) break;
            if (skip_op("*")) {
                args.star = parse_expression(true);
            } else if (skip_op("**")) {
                args.double_star = parse_expression(true);
            } else if (cur().kind == TokenKind::Name && is_op("=", 1)) {
                std::string key = next().text;
                next();  // =
                args.keyword.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!args.keyword.empty()) fail(cur(), "positional argument follows keyword argument");
                args.positional.push_back(parse_expression(true));
            }
        }
        expect_op(")");
        return args;
    }

    ExprPtr parse_call(ExprPtr callee, const Token& at) {
        auto c = make<CallExpr>(at);
        c->callee = std::move(callee);
        c->args = parse_args();
        return c;
    }

    // `name` or `name(args)`, dotted names allowed; value null for filter blocks.
    std::unique_ptr<FilterExpr> parse_filter(ExprPtr value) {
        const Token& at = cur();
        auto f = make<FilterExpr>(at);
        f->value = std::move(value);
        f->name = expect_name();
        while (is_op(".") && peek(1).kind == TokenKind::Name) {
            next();
            f->name += "." + next().text;
        }
        if (!find_filter(f->name)) fail(at, "No filter named '" + f->name + "'.");
        if (is_op("(")) f->args = parse_args();
        return f;
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        const Restore restore(*this);
        while (true) {
            if (is_op("|") || is_name("is") || is_op("(")) deeper(cur());
            if (is_op("|")) {
                next();
                e = parse_filter(std::move(e));
            } else if (is_name("is")) {
                const Token& at = next();
                auto t = make<TestExpr>(at);
                t->negated = skip_name("not");
                t->value = std::move(e);
                const Token& name_at = cur();
                t->name = expect_name();
                while (is_op(".") && peek(1).kind == TokenKind::Name) {
                    next();
                    t->name += "." + next().text;
                }
                if (!find_test(t->name)) fail(name_at, "No test named '" + t->name + "'.");
                if (is_op("(")) {
                    t->args = parse_args();
                } else {
                    const Token& n = cur();
                    const bool arg_start =
                        n.kind == TokenKind::String || n.kind == TokenKind::Int || n.kind == TokenKind::Float ||
                        (n.kind == TokenKind::Name && n.text != "else" && n.text != "or" && n.text != "and" &&
                         n.text != "if" && n.text != "in" && n.text != "not" && n.text != "is") ||
                        is_op("[") || is_op("{");
                    if (arg_start) t->args.positional.push_back(parse_postfix(parse_primary()));
                }
                e = std::move(t);
            } else if (is_op("(")) {
                const Token& at = cur();
                e = parse_call(std::move(e), at);
            } else {
                return e;
            }
        }
    }

    const std::vector<Token>& toks_;
    size_t pos_ = 0;
    int loop_depth_ = 0;
    int nesting_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse(); }

}  // namespace lantern::jinja
