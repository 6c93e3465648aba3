#include "chat/ast_checks.h"

namespace herd::chat {
namespace {

void scan_expr(const Expr& e, MacroDef& m);
void scan_stmt(const Stmt& s, MacroDef& m);
void check_expr(const Expr& e, bool soft);
void check_stmt(const Stmt& s, bool soft);

// Which of caller/varargs/kwargs a macro body mentions (not counting nested macros),
// as Jinja2 decides whether the macro accepts them.
void scan_body(const Body& body, MacroDef& m) {
  for (const auto& s : body) scan_stmt(*s, m);
}
void scan_stmt(const Stmt& s, MacroDef& m) {
  for (const Expr* e : {s.expr.get(), s.target.get(), s.cond.get()})
    if (e) scan_expr(*e, m);
  for (const auto& [c, b] : s.branches) {
    if (c) scan_expr(*c, m);
    scan_body(b, m);
  }
  for (const auto& f : s.filters) scan_expr(*f, m);
  for (const auto& [t, v] : s.assignments) scan_expr(*v, m);
  if (s.kind == StmtKind::Macro) return;
  if (s.kind == StmtKind::CallBlock && s.macro)
    for (const auto& d : s.macro->defaults)
      if (d) scan_expr(*d, m);
  scan_body(s.body, m);
  scan_body(s.else_body, m);
  if (s.kind == StmtKind::CallBlock && s.macro) scan_body(s.macro->body, m);
}
void scan_expr(const Expr& e, MacroDef& m) {
  if (e.kind == ExprKind::Name) {
    if (e.symbol == kSymCaller) m.uses_caller = true;
    if (e.symbol == kSymVarargs) m.uses_varargs = true;
    if (e.symbol == kSymKwargs) m.uses_kwargs = true;
  }
  for (const auto& c : e.children)
    if (c) scan_expr(*c, m);
  for (const auto& [k, v] : e.kwargs) scan_expr(*v, m);
  if (e.star_args) scan_expr(*e.star_args, m);
  if (e.star_kwargs) scan_expr(*e.star_kwargs, m);
}

// Unknown filters/tests are compile-time errors in Jinja2 except inside {% if %} and
// conditional expressions (a "soft" frame); for loops, macros and blocks reset that.
void check_body(const Body& body, bool soft) {
  for (const auto& s : body) check_stmt(*s, soft);
}
void check_stmt(const Stmt& s, bool soft) {
  switch (s.kind) {
    case StmtKind::If:
      for (const auto& [c, b] : s.branches) {
        if (c) check_expr(*c, true);
        check_body(b, true);
      }
      return;
    case StmtKind::For:
      check_expr(*s.expr, soft);
      if (s.cond) check_expr(*s.cond, false);
      check_body(s.body, false);
      check_body(s.else_body, false);
      return;
    case StmtKind::Macro:
    case StmtKind::CallBlock:
      for (const auto& d : s.macro->defaults)
        if (d) check_expr(*d, false);
      if (s.expr) check_expr(*s.expr, soft);
      check_body(s.macro->body, false);
      return;
    default:
      break;
  }
  for (const Expr* e : {s.expr.get(), s.target.get()})
    if (e) check_expr(*e, soft);
  for (const auto& f : s.filters) check_expr(*f, soft);
  for (const auto& [t, v] : s.assignments) check_expr(*v, soft);
  check_body(s.body, false);
}
void check_expr(const Expr& e, bool soft) {
  if (e.kind == ExprKind::CondExpr) soft = true;
  if (!soft && e.kind == ExprKind::Filter && !e.filter)
    fail_at(e.line, "no filter named '" + e.name + "'");
  if (!soft && e.kind == ExprKind::Test && !e.test)
    fail_at(e.line, "no test named '" + e.name + "'");
  for (const auto& c : e.children)
    if (c) check_expr(*c, soft);
  for (const auto& [k, v] : e.kwargs) check_expr(*v, soft);
  if (e.star_args) check_expr(*e.star_args, soft);
  if (e.star_kwargs) check_expr(*e.star_kwargs, soft);
}

}  // namespace

void find_special_names(MacroDef& macro) {
  scan_body(macro.body, macro);
}

void check_unknown_filters_and_tests(const Body& body) {
  check_body(body, false);
}

}  // namespace herd::chat
