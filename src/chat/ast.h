// The syntax tree of a parsed template. Expressions and statements are plain tagged structs
// walked by the interpreter; variable names are interned to small integers at parse time.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/value.h"

namespace herd::chat {

// Filters and tests receive the renderer (for calls back into the engine), the input value
// and the remaining call arguments.
using FilterFn = Value (*)(Renderer& renderer, const Value& input, CallArgs& args);
using TestFn = bool (*)(Renderer& renderer, const Value& input, CallArgs& args);

enum class ExprKind {
  Const,     // value
  Name,      // name, symbol
  List,      // children: items
  Tuple,     // children: items
  Dict,      // children: key0, value0, key1, value1, ...
  GetAttr,   // children: [object]; name: attribute
  GetItem,   // children: [object, key]
  Slice,     // children: [object, start, stop, step] (absent parts are nullptr)
  Call,      // children: [callee, positional...]; kwargs; star_args; star_kwargs
  Filter,    // children: [input (nullptr in filter blocks), positional...]; name; filter
  Test,      // children: [input, positional...]; name; test
  Not,       // children: [operand]
  Neg,       // children: [operand]
  Pos,       // children: [operand]
  Binary,    // children: [left, right]; bin_op
  Compare,   // children: [first, operand per op]; cmp_ops
  And,       // children: [left, right]
  Or,        // children: [left, right]
  CondExpr,  // children: [test, then, else (nullptr: undefined)]
  Concat,    // children: operands joined with ~
};

enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CmpOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind;
  int line = 0;
  int depth = 1;  // height of this subtree; bounded so evaluation cannot overflow the stack
  Value value;
  std::string name;
  int symbol = -1;
  BinOp bin_op = BinOp::Add;
  std::vector<CmpOp> cmp_ops;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr star_args;
  ExprPtr star_kwargs;
  FilterFn filter = nullptr;  // nullptr: unknown filter, an error if evaluated
  TestFn test = nullptr;      // nullptr: unknown test, an error if evaluated
};

enum class StmtKind {
  Text,         // text
  Output,       // expr
  If,           // branches (cond nullptr = else)
  For,          // target, expr (iterable), cond (loop filter), body, else_body
  Set,          // target, expr
  SetBlock,     // target, filters, body
  Macro,        // macro
  CallBlock,    // macro (the caller), expr (the call)
  FilterBlock,  // filters, body
  Break,
  Continue,
  With,  // assignments, body
  Body,  // body rendered in place ({% generation %}, {% block %})
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroDef {
  std::string name;
  int symbol = -1;
  std::vector<int> params;  // symbols
  std::vector<std::string> param_names;
  std::vector<ExprPtr> defaults;  // one per parameter; nullptr: no default
  Body body;
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
  int line = 0;
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr target;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<ExprPtr> filters;  // Filter exprs with a nullptr input
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;
  std::shared_ptr<MacroDef> macro;
};

// Symbols every template has, at fixed ids.
enum : int { kSymLoop = 0, kSymCaller = 1, kSymVarargs = 2, kSymKwargs = 3 };

struct Program {
  Body body;
  std::vector<std::string> symbols;  // id -> name
};

}  // namespace herd::chat
