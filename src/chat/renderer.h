// Renderer: one rendering of a Program. Owns the scopes and the objects a template creates
// (namespaces, loop contexts), so references between them cannot outlive the rendering or
// leak through cycles. Filters, methods and objects call back into it for attribute access,
// calls and resource accounting.
#pragma once

#include <ctime>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/ast.h"
#include "chat/template.h"
#include "chat/value.h"

namespace herd::chat {

struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<int, Value>> vars;  // symbol -> value

  Value* find_local(int symbol) {
    for (auto& [k, v] : vars)
      if (k == symbol) return &v;
    return nullptr;
  }
  void set(int symbol, Value value) {
    if (Value* v = find_local(symbol)) {
      *v = std::move(value);
    } else {
      vars.emplace_back(symbol, std::move(value));
    }
  }
};

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  Renderer(const Program& program, const RenderOptions& options);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string render(const nlohmann::ordered_json& variables);

  // ---- services for filters, methods and objects ----
  const RenderOptions& options() const { return options_; }
  const Program& program() const { return program_; }
  // Jinja2's sandboxed getattr (obj.name) and getitem (obj[key]).
  Value getattr(const Value& obj, std::string_view name);
  Value getitem(const Value& obj, const Value& key);
  Value call(const Value& callee, CallArgs& args);
  // Renders a macro body (also call-block callers).
  Value call_macro(const MacroDef& macro, Scope* closure, CallArgs& args);
  // A new namespace() object owned by this rendering.
  Value make_namespace(Dict attributes);
  Value make_loop_context(std::shared_ptr<const List> items);
  // Counts work; throws when the step budget is exhausted.
  void step(uint64_t n = 1) {
    steps_ += n;
    if (steps_ > options_.max_steps) budget_exceeded();
  }
  // Throws when a string of `n` bytes would exceed the size limit.
  void check_size(size_t n) const;
  std::tm now() const;
  int line() const { return line_; }

 private:
  friend class DepthGuard;
  [[noreturn]] void budget_exceeded() const;
  Scope* new_scope(Scope* parent);

  Flow exec_body(const Body& body, Scope* scope, std::string& out);
  Flow exec(const Stmt& s, Scope* scope, std::string& out);
  void exec_for(const Stmt& s, Scope* scope, std::string& out);
  void exec_set(const Stmt& s, Scope* scope);
  void exec_call_block(const Stmt& s, Scope* scope, std::string& out);
  std::string render_block(const Body& body, Scope* scope);
  Value apply_filter_chain(const std::vector<ExprPtr>& filters, Value input, Scope* scope);
  void assign(const Expr& target, Value value, Scope* scope);
  void append(std::string& out, std::string_view text);

  Value eval(const Expr& e, Scope* scope);
  Value lookup(const Expr& name, Scope* scope);
  Value eval_call(const Expr& e, Scope* scope);
  void eval_args(const Expr& e, size_t first, Scope* scope, CallArgs& args);
  Value eval_filter(const Expr& e, Value input, Scope* scope);
  Value eval_test(const Expr& e, Scope* scope);
  Value eval_compare(const Expr& e, Scope* scope);
  Value eval_slice(const Expr& e, Scope* scope);
  Value eval_literal(const Expr& e, Scope* scope);

  const Program& program_;
  const RenderOptions& options_;
  std::deque<Scope> scopes_;
  std::vector<std::unique_ptr<Object>> owned_;
  uint64_t steps_ = 0;
  int depth_ = 0;
  int line_ = 0;  // line being executed, for error messages
};

}  // namespace herd::chat
