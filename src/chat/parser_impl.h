// The parser's state and helpers, shared by parser.cpp (statements) and
// parse_expression.cpp (expressions). Internal to the chat module.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/ast.h"
#include "chat/ast_checks.h"
#include "chat/lexer.h"

namespace herd::chat {

// Nesting bounds: recursion in the parser and in evaluation follows these, so hostile
// templates get an error instead of a stack overflow.
constexpr int kMaxExprDepth = 250;
constexpr int kMaxParseRecursion = 200;
constexpr int kMaxStatementNesting = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {
    for (const char* s : {"loop", "caller", "varargs", "kwargs"}) intern(s);
  }

  Program run() {
    Program program;
    program.body = parse_body({});
    if (cur().type != TokenType::End) fail_here("unexpected tag");
    check_unknown_filters_and_tests(program.body);
    program.symbols = std::move(symbols_);
    return program;
  }

 private:
  // ---- token helpers -----------------------------------------------------------------
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void advance() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::Operator && cur().text == op; }
  bool is_name(const char* name) const {
    return cur().type == TokenType::Name && cur().text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }
  [[noreturn]] void fail_here(const std::string& message) const {
    fail_at(cur().line, message + describe_current());
  }
  std::string describe_current() const {
    switch (cur().type) {
      case TokenType::End:
        return " (at end of template)";
      case TokenType::BlockEnd:
        return " (at '%}')";
      case TokenType::VariableEnd:
        return " (at '}}')";
      case TokenType::Text:
        return "";
      default:
        return " (at '" + cur().text + "')";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail_here(std::string("expected '") + op + "'");
  }
  void expect_block_end() {
    if (cur().type != TokenType::BlockEnd) fail_here("expected end of statement block");
    advance();
  }
  std::string expect_name() {
    if (cur().type != TokenType::Name) fail_here("expected a name");
    std::string n = cur().text;
    advance();
    return n;
  }
  int intern(const std::string& name) {
    auto it = symbol_ids_.find(name);
    if (it != symbol_ids_.end()) return it->second;
    const int id = static_cast<int>(symbols_.size());
    symbols_.push_back(name);
    symbol_ids_.emplace(name, id);
    return id;
  }

  struct Guard {
    Guard(Parser& p, int& counter, int limit, const char* what) : counter_(counter) {
      if (++counter_ > limit) p.fail_here(std::string(what) + " nested too deeply");
    }
    ~Guard() { --counter_; }
    int& counter_;
  };

  // ---- node construction -------------------------------------------------------------
  ExprPtr node(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  // Recomputes the height after children were attached; refuses trees too deep to walk.
  ExprPtr finish(ExprPtr e) {
    int d = 0;
    for (const auto& c : e->children)
      if (c) d = std::max(d, c->depth);
    for (const auto& [k, v] : e->kwargs) d = std::max(d, v->depth);
    if (e->star_args) d = std::max(d, e->star_args->depth);
    if (e->star_kwargs) d = std::max(d, e->star_kwargs->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) fail_at(e->line, "expression nested too deeply");
    return e;
  }
  ExprPtr make2(ExprKind kind, int line, ExprPtr a, ExprPtr b) {
    auto e = node(kind, line);
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return finish(std::move(e));
  }
  ExprPtr constant(Value v, int line) {
    auto e = node(ExprKind::Const, line);
    e->value = std::move(v);
    return e;
  }

  // ---- statements --------------------------------------------------------------------
  bool at_end_tag(std::initializer_list<const char*> ends) const;
  Body parse_body(std::initializer_list<const char*> ends);
  void end_tag(const char* name);
  StmtPtr parse_statement();
  void parse_if(Stmt& s);
  void parse_for(Stmt& s);
  void parse_set(Stmt& s);
  void parse_filter_chain(Stmt& s);
  ExprPtr parse_assign_target(std::initializer_list<const char*> extra_end);
  void check_assignable(const Expr& e);
  void parse_macro_signature(MacroDef& m);
  void parse_macro_body(MacroDef& m, const char* end);
  void parse_macro(Stmt& s);
  void parse_call_block(Stmt& s);
  void parse_with(Stmt& s);

  // ---- expressions -------------------------------------------------------------------
  bool is_tuple_end(std::initializer_list<const char*> extra_end) const;
  ExprPtr parse_tuple(bool simplified, bool with_condexpr,
                      std::initializer_list<const char*> extra_end, bool explicit_parens = false);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(BinOp op, int line, ExprPtr l, ExprPtr r);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_filter_expr(ExprPtr e);
  std::string parse_dotted_name();
  ExprPtr parse_one_filter(ExprPtr input, int line);
  ExprPtr parse_test(ExprPtr input);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int> symbol_ids_;
  int recursion_ = 0;
  int statement_nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace herd::chat
