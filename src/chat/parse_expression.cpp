// Expressions, with Jinja2's precedence from loosest to tightest: conditional `a if b else
// c`, or, and, not, comparisons (chained, in, not in), + -, ~, * / // %, **, unary - +,
// then postfix (.attr, [key], [a:b:c], calls) with filters `|f` and tests `is t`.
#include "chat/filters.h"
#include "chat/parser_impl.h"

namespace herd::chat {

bool Parser::is_tuple_end(std::initializer_list<const char*> extra_end) const {
  const Token& t = cur();
  if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd || t.type == TokenType::End)
    return true;
  if (t.type == TokenType::Operator && t.text == ")") return true;
  if (t.type == TokenType::Name)
    for (const char* e : extra_end)
      if (t.text == e) return true;
  return false;
}

// Jinja2's parse_tuple: `a`, or `a, b, ...` as a tuple.
ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            std::initializer_list<const char*> extra_end, bool explicit_parens) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    if (simplified) {
      items.push_back(parse_primary());
    } else {
      items.push_back(parse_expression(with_condexpr));
    }
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail_here("expected an expression");
  }
  auto t = node(ExprKind::Tuple, line);
  t->children = std::move(items);
  return finish(std::move(t));
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Guard guard(*this, recursion_, kMaxParseRecursion, "expression");
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr expr = parse_or();
  while (is_name("if")) {
    const int line = cur().line;
    advance();
    ExprPtr test = parse_or();
    ExprPtr otherwise;
    if (skip_name("else")) otherwise = parse_expression(true);
    auto e = node(ExprKind::CondExpr, line);
    e->children.push_back(std::move(test));
    e->children.push_back(std::move(expr));
    e->children.push_back(std::move(otherwise));
    expr = finish(std::move(e));
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const int line = cur().line;
    advance();
    left = make2(ExprKind::Or, line, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const int line = cur().line;
    advance();
    left = make2(ExprKind::And, line, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    Guard guard(*this, recursion_, kMaxParseRecursion, "expression");
    const int line = cur().line;
    advance();
    auto e = node(ExprKind::Not, line);
    e->children.push_back(parse_not());
    return finish(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<CmpOp> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    static const std::pair<const char*, CmpOp> kOps[] = {{"==", CmpOp::Eq}, {"!=", CmpOp::Ne},
                                                         {"<", CmpOp::Lt},  {"<=", CmpOp::Le},
                                                         {">", CmpOp::Gt},  {">=", CmpOp::Ge}};
    bool matched = false;
    for (const auto& [text, op] : kOps) {
      if (is_op(text)) {
        advance();
        ops.push_back(op);
        matched = true;
        break;
      }
    }
    if (!matched) {
      if (is_name("in")) {
        advance();
        ops.push_back(CmpOp::In);
      } else if (is_name("not") && peek().type == TokenType::Name && peek().text == "in") {
        advance();
        advance();
        ops.push_back(CmpOp::NotIn);
      } else {
        break;
      }
    }
    operands.push_back(parse_math1());
  }
  if (ops.empty()) return first;
  auto e = node(ExprKind::Compare, line);
  e->cmp_ops = std::move(ops);
  e->children.push_back(std::move(first));
  for (auto& o : operands) e->children.push_back(std::move(o));
  return finish(std::move(e));
}

ExprPtr Parser::binary(BinOp op, int line, ExprPtr l, ExprPtr r) {
  auto e = make2(ExprKind::Binary, line, std::move(l), std::move(r));
  e->bin_op = op;
  return e;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const BinOp op = is_op("+") ? BinOp::Add : BinOp::Sub;
    const int line = cur().line;
    advance();
    left = binary(op, line, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto e = node(ExprKind::Concat, line);
  e->children.push_back(std::move(first));
  while (skip_op("~")) e->children.push_back(parse_math2());
  return finish(std::move(e));
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (true) {
    BinOp op;
    if (is_op("*")) {
      op = BinOp::Mul;
    } else if (is_op("/")) {
      op = BinOp::Div;
    } else if (is_op("//")) {
      op = BinOp::FloorDiv;
    } else if (is_op("%")) {
      op = BinOp::Mod;
    } else {
      return left;
    }
    const int line = cur().line;
    advance();
    left = binary(op, line, std::move(left), parse_pow());
  }
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const int line = cur().line;
    advance();
    left = binary(BinOp::Pow, line, std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Guard guard(*this, recursion_, kMaxParseRecursion, "expression");
  const int line = cur().line;
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const ExprKind kind = is_op("-") ? ExprKind::Neg : ExprKind::Pos;
    advance();
    e = node(kind, line);
    e->children.push_back(parse_unary(false));
    e = finish(std::move(e));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  Guard guard(*this, recursion_, kMaxParseRecursion, "expression");
  const Token& t = cur();
  const int line = t.line;
  switch (t.type) {
    case TokenType::Name: {
      const std::string& n = t.text;
      ExprPtr e;
      if (n == "true" || n == "True") {
        e = constant(Value(true), line);
      } else if (n == "false" || n == "False") {
        e = constant(Value(false), line);
      } else if (n == "none" || n == "None") {
        e = constant(Value::none(), line);
      } else {
        e = node(ExprKind::Name, line);
        e->name = n;
        e->symbol = intern(n);
      }
      advance();
      return e;
    }
    case TokenType::String: {
      std::string s = t.text;
      advance();
      while (cur().type == TokenType::String) {
        s += cur().text;
        advance();
      }
      return constant(Value(std::move(s)), line);
    }
    case TokenType::Integer: {
      ExprPtr e = constant(Value(t.int_value), line);
      advance();
      return e;
    }
    case TokenType::Float: {
      ExprPtr e = constant(Value(t.float_value), line);
      advance();
      return e;
    }
    case TokenType::Operator:
      if (t.text == "(") {
        advance();
        ExprPtr e = parse_tuple(false, true, {}, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  fail_here("unexpected token");
}

ExprPtr Parser::parse_list() {
  auto e = node(ExprKind::List, cur().line);
  advance();
  while (!is_op("]")) {
    if (!e->children.empty()) expect_op(",");
    if (is_op("]")) break;
    e->children.push_back(parse_expression(true));
  }
  advance();
  return finish(std::move(e));
}

ExprPtr Parser::parse_dict() {
  auto e = node(ExprKind::Dict, cur().line);
  advance();
  while (!is_op("}")) {
    if (!e->children.empty()) expect_op(",");
    if (is_op("}")) break;
    e->children.push_back(parse_expression(true));
    expect_op(":");
    e->children.push_back(parse_expression(true));
  }
  advance();
  return finish(std::move(e));
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const int line = cur().line;
  if (skip_op(".")) {
    if (cur().type == TokenType::Name) {
      auto e = node(ExprKind::GetAttr, line);
      e->name = cur().text;
      advance();
      e->children.push_back(std::move(obj));
      return finish(std::move(e));
    }
    if (cur().type == TokenType::Integer) {
      ExprPtr key = constant(Value(cur().int_value), line);
      advance();
      return make2(ExprKind::GetItem, line, std::move(obj), std::move(key));
    }
    fail_here("expected a name or number after '.'");
  }
  advance();  // [
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) {
      expect_op(",");
      if (is_op("]")) break;
    }
    args.push_back(parse_subscribed());
  }
  advance();
  if (args.empty()) fail_at(line, "expected a subscript");
  if (args.size() == 1 && args[0]->kind == ExprKind::Slice) {
    // parse_subscribed built Slice with a nullptr object slot: fill it.
    args[0]->children[0] = std::move(obj);
    return finish(std::move(args[0]));
  }
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    key = node(ExprKind::Tuple, line);
    key->children = std::move(args);
    key = finish(std::move(key));
  }
  return make2(ExprKind::GetItem, line, std::move(obj), std::move(key));
}

// One subscript: an expression or a slice start:stop:step.
ExprPtr Parser::parse_subscribed() {
  const int line = cur().line;
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) return start;
  }
  advance();  // :
  auto slice = node(ExprKind::Slice, line);
  slice->children.push_back(nullptr);  // the object, filled by the caller
  slice->children.push_back(std::move(start));
  if (!is_op(":") && !is_op("]") && !is_op(",")) {
    slice->children.push_back(parse_expression(true));
  } else {
    slice->children.push_back(nullptr);
  }
  if (skip_op(":") && !is_op("]") && !is_op(",")) {
    slice->children.push_back(parse_expression(true));
  } else {
    slice->children.push_back(nullptr);
  }
  return slice;
}

// Parses "(args)" into e's children (after existing ones), kwargs, star args.
void Parser::parse_call_args(Expr& e) {
  expect_op("(");
  bool need_comma = false;
  while (!is_op(")")) {
    if (need_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (skip_op("*")) {
      if (e.star_args || e.star_kwargs) fail_here("invalid syntax for function call expression");
      e.star_args = parse_expression(true);
    } else if (skip_op("**")) {
      if (e.star_kwargs) fail_here("invalid syntax for function call expression");
      e.star_kwargs = parse_expression(true);
    } else if (cur().type == TokenType::Name && peek().type == TokenType::Operator &&
               peek().text == "=") {
      if (e.star_kwargs) fail_here("invalid syntax for function call expression");
      std::string key = cur().text;
      advance();
      advance();
      e.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!e.kwargs.empty() || e.star_args || e.star_kwargs)
        fail_here("invalid syntax for function call expression");
      e.children.push_back(parse_expression(true));
    }
    need_comma = true;
  }
  advance();
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = node(ExprKind::Call, cur().line);
  e->children.push_back(std::move(callee));
  parse_call_args(*e);
  return finish(std::move(e));
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      const int line = cur().line;
      advance();
      e = parse_one_filter(std::move(e), line);
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

std::string Parser::parse_dotted_name() {
  std::string name = expect_name();
  while (is_op(".") && peek().type == TokenType::Name) {
    advance();
    name += "." + cur().text;
    advance();
  }
  return name;
}

// After '|': name [(args)].
ExprPtr Parser::parse_one_filter(ExprPtr input, int line) {
  auto e = node(ExprKind::Filter, line);
  e->name = parse_dotted_name();
  e->filter = find_filter(e->name);
  e->children.push_back(std::move(input));
  if (is_op("(")) parse_call_args(*e);
  return finish(std::move(e));
}

ExprPtr Parser::parse_test(ExprPtr input) {
  const int line = cur().line;
  advance();  // is
  const bool negated = skip_name("not");
  auto e = node(ExprKind::Test, line);
  e->name = parse_dotted_name();
  e->test = find_test(e->name);
  e->children.push_back(std::move(input));
  const Token& t = cur();
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((t.type == TokenType::Name || t.type == TokenType::String ||
              t.type == TokenType::Integer || t.type == TokenType::Float ||
              (t.type == TokenType::Operator &&
               (t.text == "(" || t.text == "[" || t.text == "{"))) &&
             !(t.type == TokenType::Name &&
               (t.text == "else" || t.text == "or" || t.text == "and"))) {
    if (is_name("is")) fail_here("you cannot chain multiple tests with is");
    e->children.push_back(parse_postfix(parse_primary()));
  }
  ExprPtr result = finish(std::move(e));
  if (negated) {
    auto n = node(ExprKind::Not, line);
    n->children.push_back(std::move(result));
    result = finish(std::move(n));
  }
  return result;
}
}  // namespace herd::chat
