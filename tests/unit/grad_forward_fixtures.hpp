// Shared by grad_forward_torch_test.cpp and grad_forward_torch_ops_test.cpp (two TUs to
// keep each one's compile time and memory down): checking one case of
// tests/fixtures/forward_fixtures.json, which tests/fixtures/make_forward_fixtures.py writes
// from torch.func.jvp and torch.autograd.functional.hvp. The file reading, binding and
// tolerances are grad_torch_fixtures.hpp's.
#pragma once
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "grad_torch_fixtures.hpp"

namespace forward_oracle {
using namespace luminal;
using torch_oracle::json;

/// The tangent and the Hessian's vector for leaf L: inputs of L's shape and type, named
/// after it, which the fixture's "tangents" and "vectors" bind by the same names.
template <class L>
auto tangent_leaf(L) {
  return input<"tangent." + L::name, typename L::value_type>(shape_t<L>{});
}
template <class L>
auto vector_leaf(L) {
  return input<"vector." + L::name, typename L::value_type>(shape_t<L>{});
}

/// Only a single scalar output has a Hessian-vector product (as torch's hvp).
template <class Output>
constexpr bool is_scalar_loss() {
  if constexpr (expression<Output>) return shape_t<Output>::rank == 0;
  else return false;
}

/// Binds every array of a fixture object ({name: array}) as input prefix + name.
template <class Program>
void bind_all(Program& prog, const json& arrays, const std::string& prefix) {
  for (const auto& item : arrays.items()) {
    const std::string name = prefix + item.key();
    const std::string dtype = item.value().at("dtype").get<std::string>();
    if (dtype == "f32") prog.bind(name, torch_oracle::array_from<f32>(item.value(), name));
    else if (dtype == "i32") prog.bind(name, torch_oracle::array_from<i32>(item.value(), name));
    else FAIL("input " << name << " has unknown dtype " << dtype);
  }
}

/// Builds output (an expression or a std::tuple of them), jvp(output, leaves..., tangents...)
/// and, for a scalar, hvp(output, leaves..., vectors...); runs them on backend B with the
/// fixture's data and compares with torch. The leaves must be the fixture's "wrt", in order.
/// Every tangent and vector must reach the program (bind() refuses a name it lacks), so a
/// scalar case needs a nonzero Hessian row for every leaf: a leaf that enters the loss only
/// linearly (a bias before a weighted sum) would leave its vector unused.
template <class B, class Output, class... Leaves>
void check_forward(const std::string& name, Output output, Leaves... leaves) {
  INFO("forward fixture case " << name << " on backend " << B::name);
  const json& fixture = torch_oracle::fixture_case(torch_oracle::forward_file, name);
  const std::vector<std::string> wrt_names{std::string(Leaves::name.view())...};
  REQUIRE(fixture.at("wrt").get<std::vector<std::string>>() == wrt_names);
  constexpr bool scalar = is_scalar_loss<Output>();
  REQUIRE(fixture.contains("hvps") == scalar);

  auto values = torch_oracle::as_tuple(output);
  auto tangents = torch_oracle::as_tuple(jvp(output, leaves..., tangent_leaf(leaves)...));
  auto hvps = [&] {
    if constexpr (scalar) return torch_oracle::as_tuple(hvp(output, leaves..., vector_leaf(leaves)...));
    else return std::tuple<>{};
  }();
  constexpr std::size_t nv = std::tuple_size_v<decltype(values)>;
  static_assert(std::tuple_size_v<decltype(tangents)> == nv);
  REQUIRE(fixture.at("values").size() == nv);
  REQUIRE(fixture.at("jvps").size() == nv);

  auto prog = std::apply([](auto... o) { return compile<B>(o...); }, std::tuple_cat(values, tangents, hvps));
  bind_all(prog, fixture.at("inputs"), "");
  bind_all(prog, fixture.at("tangents"), "tangent.");
  if constexpr (scalar) bind_all(prog, fixture.at("vectors"), "vector.");
  prog.run();

  // Outputs in program order: the values, then their tangents, then one hvp per leaf.
  constexpr std::size_t count = 2 * nv + std::tuple_size_v<decltype(hvps)>;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    auto check = [&](auto index) {
      constexpr std::size_t k = decltype(index)::value;
      const json& expected = k < nv       ? fixture.at("values").at(k)
                             : k < 2 * nv ? fixture.at("jvps").at(k - nv)
                                          : fixture.at("hvps").at(wrt_names[k - 2 * nv]);
      const std::string what = k < nv       ? "value " + std::to_string(k)
                               : k < 2 * nv ? "jvp of value " + std::to_string(k - nv)
                                            : "hvp for " + wrt_names[k - 2 * nv];
      INFO(what);
      test::require_close(prog.template output<k>(), torch_oracle::array_from<f32>(expected, "torch's " + what),
                          torch_oracle::rtol, torch_oracle::atol);
    };
    (check(std::integral_constant<std::size_t, K>{}), ...);
  }(std::make_index_sequence<count>{});
}

/// Mean softmax cross-entropy of logits [B, C] against a one-hot [B, C] (both TUs use it).
template <class L, class O>
auto cross_entropy(L logits, O onehot) {
  return neg(mean(sum<-1>(onehot * log_softmax<-1>(logits))));
}
}  // namespace forward_oracle
