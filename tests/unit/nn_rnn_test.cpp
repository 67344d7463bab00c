// nn::LSTM, nn::GRU and nn::RNN (nn/rnn.hpp) against PyTorch: outputs, final states and
// the gradients of sum(y * r) for the input and every parameter, loaded under torch's
// state_dict names. tests/fixtures/rnn.json comes from make_rnn_fixtures.py.
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <luminal/nn.hpp>
#include <nlohmann/json.hpp>

#include "fixture_dir.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
using json = nlohmann::json;
constexpr Dim Batch{"Batch"};
constexpr Dim Seq{"Seq"};

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "rnn.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path.string() + " (regenerate it with tests/fixtures/make_rnn_fixtures.py)");
    return json::parse(in);
  }();
  return data;
}

xt::xarray<float> array_of(const json& a) {
  xt::xarray<float> out = xt::xarray<float>::from_shape(a.at("shape").get<std::vector<std::size_t>>());
  std::size_t i = 0;
  for (auto& v : out) v = a.at("data")[i++].get<float>();
  return out;
}

/// Binds x, r, the given initial states and every parameter of case `name`.
template <class Program>
void bind_case(Program& prog, const json& c) {
  prog.bind("x", array_of(c.at("x")));
  prog.bind("r", array_of(c.at("r")));
  for (const char* state : {"h0", "c0"})
    if (c.contains(state)) prog.bind(state, array_of(c.at(state)));
  for (const auto& [name, a] : c.at("params").items()) prog.bind(name, array_of(a));
}

/// Checks output I of prog against fixture array `expected`.
template <std::size_t I, class Program>
void check_output(const Program& prog, const json& expected, const std::string& what) {
  INFO(what);
  CHECK(xt::allclose(prog.template output<I>(), array_of(expected), 1e-4, 1e-5));
}

/// The gradients of sum(y * r) for x and every parameter, in the module's order: outputs
/// First, First + 1, ... of prog.
template <std::size_t First, class Module, class Program>
void check_gradients(const Program& prog, const json& c) {
  check_output<First>(prog, c.at("grads").at("x"), "d x");
  std::apply(
      [&](auto... p) {
        auto check_one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>, auto leaf) {
          check_output<First + 1 + I>(prog, c.at("grads").at(std::string(decltype(leaf)::name.view())),
                                      "d " + std::string(decltype(leaf)::name.view()));
        };
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          (check_one(std::integral_constant<std::size_t, I>{}, p), ...);
        }(std::index_sequence_for<decltype(p)...>{});
      },
      Module::parameters);
}

template <class Backend, class Module, class Y, class X, class... Extra>
auto compile_with_gradients(Y y, X x, Extra... extra) {
  auto r = input<"r", f32>(shape_t<Y>{});
  auto loss = sum(y * r);
  return std::apply(
      [&](auto... p) {
        return std::apply([&](auto... g) { return compile<Backend>(y, extra..., g...); }, grad(loss, x, p...));
      },
      Module::parameters);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("nn::LSTM, two layers: torch's outputs, states and gradients at two lengths",
                        "[nn][rnn][torch]", test_backends) {
  using Module = nn::LSTM<"lstm", 3, 4, 2>;
  Module lstm;
  auto x = input<"x", f32>(shape<Batch, Seq, 3>);
  auto [h_n, c_n] = lstm.final_state(x);
  auto r = input<"r", f32>(shape<Batch, Seq, 4>);
  auto y = lstm(x);
  auto prog = std::apply(
      [&](auto... p) {
        return std::apply([&](auto... g) { return compile<TestType>(y, h_n, c_n, g...); }, grad(sum(y * r), x, p...));
      },
      Module::parameters);
  for (const char* name : {"lstm2", "lstm2_short", "lstm2"}) {
    INFO(name);
    const json& c = fixture().at("cases").at(name);
    bind_case(prog, c);
    prog.run();
    check_output<0>(prog, c.at("y"), "y");
    check_output<1>(prog, c.at("h_n"), "h_n");
    check_output<2>(prog, c.at("c_n"), "c_n");
    check_output<3>(prog, c.at("grads").at("x"), "d x");
    check_output<4>(prog, c.at("grads").at("lstm.weight_ih_l0"), "d weight_ih_l0");
    check_output<5>(prog, c.at("grads").at("lstm.weight_hh_l0"), "d weight_hh_l0");
    check_output<6>(prog, c.at("grads").at("lstm.bias_ih_l0"), "d bias_ih_l0");
    check_output<7>(prog, c.at("grads").at("lstm.bias_hh_l0"), "d bias_hh_l0");
    check_output<8>(prog, c.at("grads").at("lstm.weight_ih_l1"), "d weight_ih_l1");
    check_output<9>(prog, c.at("grads").at("lstm.weight_hh_l1"), "d weight_hh_l1");
    check_output<10>(prog, c.at("grads").at("lstm.bias_ih_l1"), "d bias_ih_l1");
    check_output<11>(prog, c.at("grads").at("lstm.bias_hh_l1"), "d bias_hh_l1");
  }
  // The backward reads the gates from the scan's stored carries: only the scans' own
  // kernels read weight_hh (h W_hh^T per step, the carry's cotangent through it), no
  // kernel outside them recomputes h W_hh^T over every step.
  const std::string text = prog.describe();
  int scans_reading = 0;
  for (std::size_t at = text.find("kernel "); at != std::string::npos;) {
    const std::size_t next = text.find("\nkernel ", at + 1);
    const std::string block = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    if (block.find("reads param lstm.weight_hh_l") != std::string::npos) {
      INFO(block);
      REQUIRE(block.find("the op's own kernel: scan") != std::string::npos);
      ++scans_reading;
    }
    at = next == std::string::npos ? next : next + 1;
  }
  REQUIRE(scans_reading == 4);  // per layer the forward scan and the carries' cotangents
}

TEMPLATE_LIST_TEST_CASE("nn::GRU, bidirectional, nn::RNN and nn::LSTM from given states: torch's outputs and gradients",
                        "[nn][rnn][torch]", test_backends) {
  {
    using Module = nn::GRU<"gru", 3, 4, 1, true>;
    auto x = input<"x", f32>(shape<2, 5, 3>);
    auto y = Module{}(x);
    auto prog = compile_with_gradients<TestType, Module>(y, x, Module{}.final_state(x));
    const json& c = fixture().at("cases").at("gru_bi");
    bind_case(prog, c);
    prog.run();
    check_output<0>(prog, c.at("y"), "gru y");
    check_output<1>(prog, c.at("h_n"), "gru h_n");
    check_gradients<2, Module>(prog, c);
  }
  {
    using Module = nn::RNN<"rnn", 3, 4>;
    auto x = input<"x", f32>(shape<2, 4, 3>);
    auto h0 = input<"h0", f32>(shape<1, 2, 4>);
    auto y = Module{}(x, h0);
    auto prog = compile_with_gradients<TestType, Module>(y, x, Module{}.final_state(x, h0));
    const json& c = fixture().at("cases").at("rnn_h0");
    bind_case(prog, c);
    prog.run();
    check_output<0>(prog, c.at("y"), "rnn y");
    check_output<1>(prog, c.at("h_n"), "rnn h_n");
    check_gradients<2, Module>(prog, c);
  }
  {
    using Module = nn::LSTM<"lstm1", 3, 4>;
    auto x = input<"x", f32>(shape<2, 4, 3>);
    auto h0 = input<"h0", f32>(shape<1, 2, 4>);
    auto c0 = input<"c0", f32>(shape<1, 2, 4>);
    auto y = Module{}(x, h0, c0);
    auto [h_n, c_n] = Module{}.final_state(x, h0, c0);
    auto prog = compile_with_gradients<TestType, Module>(y, x, h_n, c_n);
    const json& c = fixture().at("cases").at("lstm_h0c0");
    bind_case(prog, c);
    prog.run();
    check_output<0>(prog, c.at("y"), "lstm y");
    check_output<1>(prog, c.at("h_n"), "lstm h_n");
    check_output<2>(prog, c.at("c_n"), "lstm c_n");
    check_gradients<3, Module>(prog, c);
  }
}
