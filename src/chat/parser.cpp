#include "chat/parser.h"

#include "chat/parser_impl.h"

// Statements: {% if %}, {% for %}, {% set %}, {% macro %}, {% call %}, {% filter %},
// {% with %}, loop controls and the transformers {% generation %} block.
namespace herd::chat {

bool Parser::at_end_tag(std::initializer_list<const char*> ends) const {
  if (cur().type != TokenType::BlockBegin) return false;
  const Token& n = peek();
  if (n.type != TokenType::Name) return false;
  for (const char* e : ends)
    if (n.text == e) return true;
  return false;
}

// Parses until `{% <one of ends>`; leaves the position on the end name.
Body Parser::parse_body(std::initializer_list<const char*> ends) {
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == TokenType::End) {
      if (ends.size() != 0) {
        std::string names;
        for (const char* e : ends) names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
        fail_at(t.line, "unexpected end of template; looking for " + names);
      }
      return body;
    }
    if (t.type == TokenType::Text) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Text;
      s->line = t.line;
      s->text = t.text;
      body.push_back(std::move(s));
      advance();
    } else if (t.type == TokenType::VariableBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = StmtKind::Output;
      s->line = t.line;
      advance();
      s->expr = parse_tuple(false, true, {});
      if (cur().type != TokenType::VariableEnd) fail_here("expected '}}'");
      advance();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::BlockBegin) {
      if (at_end_tag(ends)) {
        advance();
        return body;
      }
      advance();
      body.push_back(parse_statement());
    } else {
      fail_here("unexpected token");
    }
  }
}

// After `{% name` was matched by parse_body: consumes `name %}`.
void Parser::end_tag(const char* name) {
  if (!skip_name(name)) fail_here(std::string("expected '") + name + "'");
  expect_block_end();
}

StmtPtr Parser::parse_statement() {
  Guard guard(*this, statement_nesting_, kMaxStatementNesting, "statements");
  if (cur().type != TokenType::Name) fail_here("expected a statement name");
  const std::string keyword = cur().text;
  const int line = cur().line;
  advance();
  auto s = std::make_unique<Stmt>();
  s->line = line;
  if (keyword == "if") {
    parse_if(*s);
  } else if (keyword == "for") {
    parse_for(*s);
  } else if (keyword == "set") {
    parse_set(*s);
  } else if (keyword == "macro") {
    parse_macro(*s);
  } else if (keyword == "call") {
    parse_call_block(*s);
  } else if (keyword == "filter") {
    s->kind = StmtKind::FilterBlock;
    parse_filter_chain(*s);
    expect_block_end();
    s->body = parse_body({"endfilter"});
    end_tag("endfilter");
  } else if (keyword == "with") {
    parse_with(*s);
  } else if (keyword == "break" || keyword == "continue") {
    if (loop_depth_ == 0) fail_at(line, "'" + keyword + "' outside of a loop");
    s->kind = keyword == "break" ? StmtKind::Break : StmtKind::Continue;
    expect_block_end();
  } else if (keyword == "generation") {
    s->kind = StmtKind::Body;
    expect_block_end();
    s->body = parse_body({"endgeneration"});
    end_tag("endgeneration");
  } else if (keyword == "block") {
    s->kind = StmtKind::Body;
    expect_name();
    skip_name("scoped");
    skip_name("required");
    expect_block_end();
    s->body = parse_body({"endblock"});
    if (!skip_name("endblock")) fail_here("expected 'endblock'");
    if (cur().type == TokenType::Name) advance();
    expect_block_end();
  } else if (keyword == "include" || keyword == "import" || keyword == "from" ||
             keyword == "extends") {
    fail_at(line,
            "'" + keyword + "' is not supported: a chat template cannot load other templates");
  } else {
    fail_at(line, "encountered unknown tag '" + keyword + "'");
  }
  return s;
}

void Parser::parse_if(Stmt& s) {
  s.kind = StmtKind::If;
  while (true) {
    ExprPtr cond = parse_tuple(false, false, {});
    expect_block_end();
    Body body = parse_body({"elif", "else", "endif"});
    s.branches.emplace_back(std::move(cond), std::move(body));
    if (skip_name("elif")) continue;
    if (skip_name("else")) {
      expect_block_end();
      s.branches.emplace_back(nullptr, parse_body({"endif"}));
    }
    end_tag("endif");
    return;
  }
}

void Parser::parse_for(Stmt& s) {
  s.kind = StmtKind::For;
  s.target = parse_assign_target({"in"});
  if (!skip_name("in")) fail_here("expected 'in'");
  s.expr = parse_tuple(false, false, {"recursive"});
  if (skip_name("if")) s.cond = parse_expression(true);
  if (is_name("recursive")) fail_here("recursive loops are not supported");
  expect_block_end();
  ++loop_depth_;
  s.body = parse_body({"endfor", "else"});
  --loop_depth_;
  if (skip_name("else")) {
    expect_block_end();
    s.else_body = parse_body({"endfor"});
  }
  end_tag("endfor");
}

void Parser::parse_set(Stmt& s) {
  if (cur().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "." &&
      peek(2).type == TokenType::Name) {
    // {% set ns.attr = value %}
    auto target = node(ExprKind::GetAttr, cur().line);
    auto ns = node(ExprKind::Name, cur().line);
    ns->name = cur().text;
    ns->symbol = intern(ns->name);
    target->children.push_back(std::move(ns));
    target->name = peek(2).text;
    advance();
    advance();
    advance();
    s.target = finish(std::move(target));
  } else {
    s.target = parse_assign_target({});
  }
  if (skip_op("=")) {
    s.kind = StmtKind::Set;
    s.expr = parse_tuple(false, true, {});
    expect_block_end();
    return;
  }
  if (s.target->kind == ExprKind::GetAttr) fail_here("expected '='");
  s.kind = StmtKind::SetBlock;
  if (skip_op("|")) parse_filter_chain(s);
  expect_block_end();
  const int saved_loop = loop_depth_;
  s.body = parse_body({"endset"});
  loop_depth_ = saved_loop;
  end_tag("endset");
}

void Parser::parse_filter_chain(Stmt& s) {
  bool first = true;
  while (first || is_op("|")) {
    if (!first) advance();
    first = false;
    s.filters.push_back(parse_one_filter(nullptr, cur().line));
  }
}

ExprPtr Parser::parse_assign_target(std::initializer_list<const char*> extra_end) {
  ExprPtr target = parse_tuple(true, true, extra_end);
  check_assignable(*target);
  return target;
}

void Parser::check_assignable(const Expr& e) {
  if (e.kind == ExprKind::Name) {
    if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" ||
        e.name == "False" || e.name == "None")
      fail_at(e.line, "cannot assign to '" + e.name + "'");
    return;
  }
  if (e.kind == ExprKind::Tuple) {
    for (const auto& c : e.children) check_assignable(*c);
    return;
  }
  fail_at(e.line, "cannot assign to this expression");
}

void Parser::parse_macro_signature(MacroDef& m) {
  expect_op("(");
  while (!is_op(")")) {
    if (!m.params.empty()) expect_op(",");
    if (is_op(")")) break;
    const std::string name = expect_name();
    m.param_names.push_back(name);
    m.params.push_back(intern(name));
    if (skip_op("=")) {
      m.defaults.push_back(parse_expression(true));
    } else {
      // Jinja2: a parameter without a default cannot follow one with a default.
      for (const auto& d : m.defaults)
        if (d) fail_here("non-default argument follows default argument");
      m.defaults.push_back(nullptr);
    }
  }
  advance();
}

void Parser::parse_macro_body(MacroDef& m, const char* end) {
  const int saved_loop = loop_depth_;
  loop_depth_ = 0;
  m.body = parse_body({end});
  loop_depth_ = saved_loop;
  find_special_names(m);
}

void Parser::parse_macro(Stmt& s) {
  s.kind = StmtKind::Macro;
  auto m = std::make_shared<MacroDef>();
  m->line = s.line;
  m->name = expect_name();
  m->symbol = intern(m->name);
  parse_macro_signature(*m);
  expect_block_end();
  parse_macro_body(*m, "endmacro");
  end_tag("endmacro");
  s.macro = std::move(m);
}

void Parser::parse_call_block(Stmt& s) {
  s.kind = StmtKind::CallBlock;
  auto m = std::make_shared<MacroDef>();
  m->line = s.line;
  m->name = "caller";
  if (is_op("(")) parse_macro_signature(*m);
  s.expr = parse_expression(true);
  if (s.expr->kind != ExprKind::Call) fail_at(s.line, "expected a call in {% call %}");
  expect_block_end();
  parse_macro_body(*m, "endcall");
  end_tag("endcall");
  s.macro = std::move(m);
}

void Parser::parse_with(Stmt& s) {
  s.kind = StmtKind::With;
  while (cur().type != TokenType::BlockEnd) {
    if (!s.assignments.empty()) expect_op(",");
    ExprPtr target = parse_assign_target({});
    expect_op("=");
    s.assignments.emplace_back(std::move(target), parse_expression(true));
  }
  advance();
  s.body = parse_body({"endwith"});
  end_tag("endwith");
}
Program parse_program(std::string_view source) {
  return Parser(tokenize(source)).run();
}

}  // namespace herd::chat
