// A non-owning reference to a callable, for callbacks that are only called before the function
// taking them returns (visitors, parsers' per-field callbacks). Unlike std::function it never
// allocates: a lambda that captures more than two references makes std::function allocate on the
// heap on every call that passes it (the Parquet footer decoder took one allocation per struct).
// The callable must outlive the FunctionRef: pass lambdas as arguments, do not store the reference.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace stoke {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> && std::is_invocable_r_v<R, F&, Args...>)
  FunctionRef(F&& f) noexcept {  // NOLINT(google-explicit-constructor): implicit, as std::function's
    using T = std::remove_reference_t<F>;
    if constexpr (std::is_function_v<T>) {  // a function named directly: keep its address
      target_.function = reinterpret_cast<void (*)()>(&f);
      call_ = [](Target t, Args... args) -> R {
        return std::invoke(reinterpret_cast<T*>(t.function), std::forward<Args>(args)...);
      };
    } else {
      target_.object = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
      call_ = [](Target t, Args... args) -> R {
        return std::invoke(*static_cast<T*>(t.object), std::forward<Args>(args)...);
      };
    }
  }

  R operator()(Args... args) const { return call_(target_, std::forward<Args>(args)...); }

 private:
  union Target {
    void* object;
    void (*function)();
  };
  Target target_;
  R (*call_)(Target, Args...);
};

}  // namespace stoke
