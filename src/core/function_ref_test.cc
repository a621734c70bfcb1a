#include "core/function_ref.h"

#include <gtest/gtest.h>

#include <string>

namespace stoke {
namespace {

int Apply(FunctionRef<int(int)> f, int x) { return f(x); }
void Each(int n, FunctionRef<void(int)> f) {
  for (int i = 0; i < n; ++i) f(i);
}

int Triple(int x) { return 3 * x; }

// Lambdas with any captures (more than std::function keeps inline), mutable ones, plain functions
// and references to callables: each is called, with its state, through the reference.
TEST(FunctionRef, CallsWhatItRefersTo) {
  int a = 1, b = 2, c = 3;
  EXPECT_EQ(Apply([&](int x) { return x + a + b + c; }, 10), 16);
  int sum = 0;
  Each(5, [&sum](int i) { sum += i; });
  EXPECT_EQ(sum, 10);
  int calls = 0;
  auto counter = [calls](int x) mutable { return x + ++calls; };
  EXPECT_EQ(Apply(counter, 0), 1);
  EXPECT_EQ(Apply(counter, 0), 2) << "the same object, not a copy";
  EXPECT_EQ(Apply(Triple, 4), 12);
  const std::string s = "abc";
  EXPECT_EQ(Apply([s](int i) { return static_cast<int>(s[static_cast<size_t>(i)]); }, 1), 'b');
  FunctionRef<int(int)> ref = Triple;
  FunctionRef<int(int)> copy = ref;  // copies refer to the same callable
  EXPECT_EQ(Apply(copy, 5), 15);
}

}  // namespace
}  // namespace stoke
