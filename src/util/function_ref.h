// FunctionRef: a non-owning reference to a callable, for callbacks that do not outlive the
// call that receives them (ThreadPool::run). Unlike std::function it never allocates: a
// lambda capturing more than a couple of references would be copied to the heap by
// std::function on every call, and the forward pass makes hundreds of such calls per token.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace herd {

template <class Signature>
class FunctionRef;

template <class R, class... Args>
class FunctionRef<R(Args...)> {
 public:
  // REQUIRES: f outlives every call through this reference.
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                              std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): used like a lambda
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace herd
