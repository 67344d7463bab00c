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

inline const std::string& fixture_path() {
  static const std::string path = (test::fixture_dir() / "grad_fixtures.json").string();
  return path;
}
inline const std::string regenerate = " (regenerate it with /usr/bin/python3 tests/fixtures/make_grad_fixtures.py)";

struct fixture_file {
  json cases;
  std::string error;  // empty when the file was read
};

inline fixture_file load_fixture_file() {
  std::ifstream in(fixture_path());
  if (!in) return {json(), "cannot open the gradient fixture file " + fixture_path() + regenerate};
  try {
    json file = json::parse(in);
    if (!file.is_object() || !file.contains("cases") || !file["cases"].is_object())
      return {json(), "the gradient fixture file " + fixture_path() + " has no \"cases\" object" + regenerate};
    return {std::move(file["cases"]), ""};
  } catch (const json::exception& e) {
    return {json(), "the gradient fixture file " + fixture_path() + " is corrupt: " + e.what() + regenerate};
  }
}

/// The file's cases, read once. FAILs the calling test when the file is missing or corrupt.
inline const json& fixture_cases() {
  static const fixture_file file = load_fixture_file();
  if (!file.error.empty()) FAIL(file.error);
  return file.cases;
}

inline const json& fixture_case(const std::string& name) {
  const json& cases = fixture_cases();
  if (!cases.contains(name))
    FAIL("the gradient fixture file " + fixture_path() + " has no case '" + name + "'" + regenerate);
  return cases.at(name);
}

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
    // Doubles with 9 significant digits: the nearest float is exactly the float torch used.
    if constexpr (std::is_floating_point_v<T>) out.data()[i++] = static_cast<T>(v.get<double>());
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
/// compares with torch. The wrt leaves must be the fixture's "wrt" list, in order.
template <class B, class Loss, class... Wrt>
void check_case(const std::string& name, Loss loss, Wrt... wrt) {
  INFO("fixture case " << name << " on backend " << B::name);
  const json& fixture = fixture_case(name);
  const std::vector<std::string> wrt_names{std::string(Wrt::name.view())...};
  REQUIRE(fixture.at("wrt").get<std::vector<std::string>>() == wrt_names);

  auto outputs = std::tuple_cat(std::tuple<Loss>{loss}, as_tuple(grad(loss, wrt...)));
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
    expected() = static_cast<f32>(fixture.at("loss").get<double>());
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
}

}  // namespace torch_oracle
