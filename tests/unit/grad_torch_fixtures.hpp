// Shared by grad_torch_test.cpp, grad_torch_ops_test.cpp and grad_torch_elementwise_test.cpp
// (three TUs to keep each one's compile time and memory down): reading tests/fixtures/grad_fixtures.json, which
// tests/fixtures/make_grad_fixtures.py writes from PyTorch autograd
// (/usr/bin/python3 tests/fixtures/make_grad_fixtures.py), and checking one case: build
// the loss and its gradients in luminal, bind the fixture's inputs, run on a backend and
// compare every output with torch at float32 tolerance. No torch is needed at run time;
// a missing or corrupt fixture file fails every test that reads it.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixture_dir.hpp"
#include "test_support.hpp"


namespace torch_oracle {
using json = nlohmann::json;
using namespace luminal;

// float32 against float32: both sides round differently (luminal writes exp as exp2,
// tanh through sigmoid, and sums in its own order), so a few ulps of each intermediate.
// The script checks that every case is well conditioned (float32 torch within 2e-5 of
// float64 torch), so these tolerances measure luminal, not rounding.
inline constexpr double rtol = 1e-4;
inline constexpr double atol = 1e-5;

/// The fixture files: make_grad_fixtures.py's, make_parity_fixtures.py's (issue 17's ops
/// and edge semantics, from torch 2.x), make_forward_fixtures.py's (issue 19's jvp and
/// hvp, from torch 2.x; see grad_forward_fixtures.hpp) and make_port_fixtures.py's (issue
/// 17's held-out port: model A and 18 expressions, from torch 2.x).
inline const std::string grad_file = "grad_fixtures.json";
inline const std::string parity_file = "parity_fixtures.json";
inline const std::string forward_file = "forward_fixtures.json";
inline const std::string port_file = "port_fixtures.json";

inline std::string fixture_path(const std::string& file) { return (test::fixture_dir() / file).string(); }
inline std::string regenerate(const std::string& file) {
  const std::string script = file == grad_file     ? "make_grad_fixtures.py"
                             : file == forward_file ? "make_forward_fixtures.py"
                             : file == port_file    ? "make_port_fixtures.py"
                                                    : "make_parity_fixtures.py";
  return " (regenerate it with tests/fixtures/" + script + ")";
}

struct fixture_file {
  json cases;
  std::string error;  // empty when the file was read
};

inline fixture_file load_fixture_file(const std::string& file) {
  const std::string path = fixture_path(file);
  std::ifstream in(path);
  if (!in) return {json(), "cannot open the gradient fixture file " + path + regenerate(file)};
  try {
    json parsed = json::parse(in);
    if (!parsed.is_object() || !parsed.contains("cases") || !parsed["cases"].is_object())
      return {json(), "the gradient fixture file " + path + " has no \"cases\" object" + regenerate(file)};
    return {std::move(parsed["cases"]), ""};
  } catch (const json::exception& e) {
    return {json(), "the gradient fixture file " + path + " is corrupt: " + e.what() + regenerate(file)};
  }
}

/// The file's cases, read once. FAILs the calling test when the file is missing or corrupt.
inline const json& fixture_cases(const std::string& file) {
  static std::map<std::string, fixture_file> loaded;
  auto found = loaded.find(file);
  if (found == loaded.end()) found = loaded.emplace(file, load_fixture_file(file)).first;
  if (!found->second.error.empty()) FAIL(found->second.error);
  return found->second.cases;
}

inline const json& fixture_case(const std::string& file, const std::string& name) {
  const json& cases = fixture_cases(file);
  if (!cases.contains(name))
    FAIL("the gradient fixture file " + fixture_path(file) + " has no case '" + name + "'" + regenerate(file));
  return cases.at(name);
}

/// A float the script wrote: a number, or "inf", "-inf", "nan" (JSON has no such numbers).
/// Doubles with 9 significant digits: the nearest float is exactly the float torch used.
inline double number_from(const json& v) { return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>(); }

/// An array the script wrote: {"dtype": ..., "shape": [...], "data": [...]}.
template <class T>
xt::xarray<T> array_from(const json& a, const std::string& what) {
  INFO(what);
  auto shape = a.at("shape").get<std::vector<std::size_t>>();
  const json& data = a.at("data");
  std::size_t count = 1;
  for (std::size_t n : shape) count *= n;
  REQUIRE(data.is_array());
  REQUIRE(data.size() == count);
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  std::size_t i = 0;
  for (const json& v : data) {
    if constexpr (std::is_floating_point_v<T>) out.data()[i++] = static_cast<T>(number_from(v));
    else out.data()[i++] = v.get<T>();
  }
  return out;
}

template <class T>
struct is_tuple : std::false_type {};
template <class... T>
struct is_tuple<std::tuple<T...>> : std::true_type {};

template <class G>
auto as_tuple(G g) {
  if constexpr (is_tuple<G>::value) return g;
  else return std::tuple<G>{g};
}

/// Builds loss and d loss / d wrt..., runs them on backend B with the fixture's inputs and
/// compares with torch. The wrt leaves must be the fixture's "wrt" list, in order. Values
/// is an empty tuple, or holds one expression compared with the fixture's "value".
template <class B, class Values, class Loss, class... Wrt>
void check_case_in(const std::string& file, const std::string& name, Values values, Loss loss, Wrt... wrt) {
  INFO("fixture case " << name << " on backend " << B::name);
  const json& fixture = fixture_case(file, name);
  const std::vector<std::string> wrt_names{std::string(Wrt::name.view())...};
  REQUIRE(fixture.at("wrt").get<std::vector<std::string>>() == wrt_names);

  auto outputs = std::tuple_cat(std::tuple<Loss>{loss}, as_tuple(grad(loss, wrt...)), values);
  auto prog = std::apply([](auto... o) { return compile<B>(o...); }, outputs);
  for (const auto& item : fixture.at("inputs").items()) {
    const std::string dtype = item.value().at("dtype").get<std::string>();
    if (dtype == "f32") prog.bind(item.key(), array_from<f32>(item.value(), "input " + item.key()));
    else if (dtype == "i32") prog.bind(item.key(), array_from<i32>(item.value(), "input " + item.key()));
    else FAIL("input " << item.key() << " has unknown dtype " << dtype);
  }
  prog.run();

  {
    INFO("the loss");
    xt::xarray<f32> expected = xt::xarray<f32>::from_shape({});
    expected() = static_cast<f32>(number_from(fixture.at("loss")));
    test::require_close(prog.template output<0>(), expected, rtol, atol);
  }
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    auto check_gradient = [&](auto index) {
      constexpr std::size_t k = decltype(index)::value;
      const std::string& leaf = wrt_names[k];
      INFO("d loss / d " << leaf);
      auto expected = array_from<f32>(fixture.at("grads").at(leaf), "torch's gradient for " + leaf);
      test::require_close(prog.template output<k + 1>(), expected, rtol, atol);
    };
    (check_gradient(std::integral_constant<std::size_t, I>{}), ...);
  }(std::index_sequence_for<Wrt...>{});
  if constexpr (std::tuple_size_v<Values> == 1) {
    INFO("the value");
    using T = typename std::tuple_element_t<0, Values>::value_type;
    test::require_close(prog.template output<1 + sizeof...(Wrt)>(), array_from<T>(fixture.at("value"), "torch's value"),
                        rtol, atol);
  }
}

/// check_case_in for a case of grad_fixtures.json, with no value.
template <class B, class Loss, class... Wrt>
void check_case(const std::string& name, Loss loss, Wrt... wrt) {
  check_case_in<B>(grad_file, name, std::tuple<>{}, loss, wrt...);
}

/// A case of parity_fixtures.json that is one elementwise op: op(x) for x of 16 elements,
/// and the gradient of sum(op(x) * r).
template <class B, class Op>
void check_unary(const std::string& name, Op op) {
  auto x = input<"x", f32>(shape<16>);
  auto r = input<"r", f32>(shape<16>);
  check_case_in<B>(parity_file, name, std::tuple{op(x)}, sum(op(x) * r), x);
}

}  // namespace torch_oracle
