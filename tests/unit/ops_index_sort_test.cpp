// gather<Axis>, scatter_add, index_add (ops/take_along.hpp, ops/scatter.hpp), sort, argsort,
// topk (ops/sort.hpp) and einsum (ops/einsum.hpp) against PyTorch. tests/fixtures/index_ops.json
// holds, per case, torch's inputs, outputs, a weight w per floating output and the gradients
// of sum(y * w) w.r.t. every floating input; make_index_fixtures.py writes it (float64 torch
// on float32 inputs). Ranks 2 and 3, a non-last axis, repeated indices, ties, NaN and +-inf.
// No torch at run time.
//
// Each group of cases is one program per backend, each case on leaves of its own named
// "<case>.<input>": one compile per group keeps this file's compile time down.
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixture_dir.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
using json = nlohmann::json;

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "index_ops.json";
    std::ifstream in(path);
    if (!in)
      throw std::runtime_error("cannot open " + path.string() + " (regenerate it with tests/fixtures/make_index_fixtures.py)");
    return json::parse(in);
  }();
  return data;
}

/// A fixture array ({"shape", "data"}; "inf", "-inf", "nan" as strings) as an xarray of T.
template <class T>
xt::xarray<T> array_of(const json& a) {
  const auto shape = a.at("shape").get<std::vector<std::size_t>>();
  xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
  const json& data = a.at("data");
  REQUIRE(data.size() == out.size());
  std::size_t i = 0;
  for (auto& v : out) {
    const json& d = data[i++];
    v = static_cast<T>(d.is_string() ? std::stod(d.get<std::string>()) : d.get<double>());
  }
  return out;
}

/// Binds every input ("index" as i32, the others f32) and weight of the named cases.
template <class Program>
void bind_cases(Program& prog, const std::vector<std::string>& cases) {
  for (const auto& name : cases) {
    const json& c = fixture().at("cases").at(name);
    for (const auto& [input, a] : c.at("inputs").items()) {
      if (input == "index") prog.bind(name + "." + input, array_of<i32>(a));
      else prog.bind(name + "." + input, array_of<f32>(a));
    }
    for (std::size_t k = 0; k < c.at("weights").size(); ++k)
      prog.bind(name + ".w" + std::to_string(k), array_of<f32>(c.at("weights")[k]));
  }
}

/// What output K of a program is: `case`'s output N ("out N") or the gradient of its
/// input ("grad x").
struct reference {
  std::string name, what;
  const json& expected() const {
    const json& c = fixture().at("cases").at(name);
    if (what.rfind("out ", 0) == 0) return c.at("outputs").at(std::stoul(what.substr(4)));
    return c.at("grads").at(what.substr(5));
  }
};

template <std::size_t... K, class Program>
void check_outputs(Program& prog, const std::vector<reference>& refs, std::index_sequence<K...>) {
  REQUIRE(refs.size() == sizeof...(K));
  std::size_t k = 0;
  auto check = [&](auto result) {
    const reference& ref = refs[k++];
    INFO("case " << ref.name << ", " << ref.what);
    const auto expected = array_of<double>(ref.expected());
    if constexpr (std::is_same_v<typename decltype(result)::value_type, i32>)
      test::require_close(result, expected, 0.0, 0.0);
    else
      test::require_close(result, expected, test::rtol_of<f32>, test::atol_of<f32>);
  };
  (check(xt::xarray<value_t<decltype(prog.template output<K>())>>(prog.template output<K>())), ...);
}

template <class Program, class... X>
auto compiled_with_grads(const auto& grads, X... outputs) {
  return std::apply([&](auto... g) { return compile<Program>(outputs..., g...); }, grads);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("gather<axis>, scatter_add and index_add: values and gradients as torch's",
                        "[ops][index][torch]", test_backends) {
  auto gx = input<"gather_axis1.x", f32>(shape<3, 5>);
  auto gi = input<"gather_axis1.index", i32>(shape<3, 4>);
  auto gw = input<"gather_axis1.w0", f32>(shape<3, 4>);
  auto hx = input<"gather_axis0_rank3.x", f32>(shape<4, 3, 2>);
  auto hi = input<"gather_axis0_rank3.index", i32>(shape<2, 2, 2>);  // smaller than x on axis 1
  auto hw = input<"gather_axis0_rank3.w0", f32>(shape<2, 2, 2>);
  auto sx = input<"scatter_add_axis0.x", f32>(shape<4, 3>);
  auto si = input<"scatter_add_axis0.index", i32>(shape<3, 3>);
  auto ss = input<"scatter_add_axis0.src", f32>(shape<3, 3>);
  auto sw = input<"scatter_add_axis0.w0", f32>(shape<4, 3>);
  auto tx = input<"scatter_add_axis2_rank3.x", f32>(shape<2, 3, 4>);
  auto ti = input<"scatter_add_axis2_rank3.index", i32>(shape<2, 3, 5>);
  auto ts = input<"scatter_add_axis2_rank3.src", f32>(shape<2, 3, 5>);
  auto tw = input<"scatter_add_axis2_rank3.w0", f32>(shape<2, 3, 4>);
  auto ax = input<"index_add_axis1_rank3.x", f32>(shape<3, 4, 2>);
  auto ai = input<"index_add_axis1_rank3.index", i32>(shape<5>);
  auto as = input<"index_add_axis1_rank3.src", f32>(shape<3, 5, 2>);
  auto aw = input<"index_add_axis1_rank3.w0", f32>(shape<3, 4, 2>);
  auto bx = input<"index_add_axis0.x", f32>(shape<4, 3>);
  auto bi = input<"index_add_axis0.index", i32>(shape<3>);
  auto bs = input<"index_add_axis0.src", f32>(shape<3, 3>);
  auto bw = input<"index_add_axis0.w0", f32>(shape<4, 3>);
  auto y0 = gather<1>(gx, gi);
  auto y1 = gather<0>(hx, hi);
  auto y2 = scatter_add<0>(sx, si, ss);
  auto y3 = scatter_add<-1>(tx, ti, ts);
  auto y4 = index_add<1>(ax, ai, as);
  auto y5 = index_add<0>(bx, bi, bs);
  auto loss = sum(y0 * gw) + sum(y1 * hw) + sum(y2 * sw) + sum(y3 * tw) + sum(y4 * aw) + sum(y5 * bw);
  auto prog = compiled_with_grads<TestType>(grad(loss, gx, hx, sx, ss, tx, ts, ax, as, bx, bs), y0, y1, y2, y3, y4, y5);
  const std::vector<std::string> cases{"gather_axis1",          "gather_axis0_rank3", "scatter_add_axis0",
                                       "scatter_add_axis2_rank3", "index_add_axis1_rank3", "index_add_axis0"};
  bind_cases(prog, cases);
  prog.run();
  INFO("on " << TestType::name);
  check_outputs(prog,
                {{cases[0], "out 0"}, {cases[1], "out 0"}, {cases[2], "out 0"}, {cases[3], "out 0"},
                 {cases[4], "out 0"}, {cases[5], "out 0"}, {cases[0], "grad x"}, {cases[1], "grad x"},
                 {cases[2], "grad x"}, {cases[2], "grad src"}, {cases[3], "grad x"}, {cases[3], "grad src"},
                 {cases[4], "grad x"}, {cases[4], "grad src"}, {cases[5], "grad x"}, {cases[5], "grad src"}},
                std::make_index_sequence<16>{});

  SECTION("an index out of range makes run() throw, and reads nothing") {
    const auto rebind = [&](const std::string& name, xt::xarray<i32> index) {
      bind_cases(prog, cases);
      prog.bind(name, index);
      REQUIRE_THROWS_AS(prog.run(), run_error);
    };
    rebind("gather_axis1.index", {{0, 1, 2, 3}, {4, 5, 0, 0}, {0, 0, 0, 0}});      // 5 == the extent
    rebind("gather_axis0_rank3.index", {{{0, -1}, {0, 0}}, {{0, 0}, {0, 0}}});     // negative, as torch refuses
    rebind("scatter_add_axis0.index", {{0, 1, 2}, {3, 4, 0}, {0, 0, 0}});
    rebind("index_add_axis0.index", {0, 4, 1});
    bind_cases(prog, cases);
    REQUIRE_NOTHROW(prog.run());  // back in range: runs again
  }
}

TEMPLATE_LIST_TEST_CASE("a gradient-only program checks gather<axis>'s index too", "[ops][index]", test_backends) {
  auto x = input<"gather_axis1.x", f32>(shape<3, 5>);
  auto index = input<"gather_axis1.index", i32>(shape<3, 4>);
  auto w = input<"gather_axis1.w0", f32>(shape<3, 4>);
  auto prog = compile<TestType>(grad(sum(gather<1>(x, index) * w), x));  // reads index and w, not x
  const json& inputs = fixture().at("cases").at("gather_axis1");
  prog.bind("gather_axis1.index", array_of<i32>(inputs.at("inputs").at("index")));
  prog.bind("gather_axis1.w0", array_of<f32>(inputs.at("weights")[0]));
  prog.run();
  check_outputs(prog, {{"gather_axis1", "grad x"}}, std::make_index_sequence<1>{});
  prog.bind("gather_axis1.index", xt::xarray<i32>{{0, 1, 2, 3}, {0, 7, 0, 0}, {0, 0, 0, 0}});
  REQUIRE_THROWS_AS(prog.run(), run_error);
}

TEMPLATE_LIST_TEST_CASE("sort, argsort and topk: values, indices and gradients as torch's (stable at ties)",
                        "[ops][sort][torch]", test_backends) {
  auto sx = input<"sort_axis1.x", f32>(shape<4, 6>);  // ties, NaN, +-inf
  auto sw = input<"sort_axis1.w0", f32>(shape<4, 6>);
  auto dx = input<"sort_axis0_descending_rank3.x", f32>(shape<5, 2, 3>);
  auto dw = input<"sort_axis0_descending_rank3.w0", f32>(shape<5, 2, 3>);
  auto ax = input<"argsort_axis1_descending.x", f32>(shape<3, 6>);
  auto kx = input<"topk3_axis1.x", f32>(shape<3, 6>);
  auto kw = input<"topk3_axis1.w0", f32>(shape<3, 3>);
  auto lx = input<"topk2_axis0_rank3.x", f32>(shape<5, 2, 3>);
  auto lw = input<"topk2_axis0_rank3.w0", f32>(shape<2, 2, 3>);
  auto s = sort<1>(sx);
  auto d = sort<0>(dx, descending);
  auto order = argsort<-1>(ax, descending);
  auto k = topk<3>(kx);
  auto l = topk<2, 0>(lx);
  auto loss = sum(s.values * sw) + sum(d.values * dw) + sum(k.values * kw) + sum(l.values * lw);
  auto prog = compiled_with_grads<TestType>(grad(loss, sx, dx, kx, lx), s.values, s.indices, d.values, d.indices,
                                            order, k.values, k.indices, l.values, l.indices);
  const std::vector<std::string> cases{"sort_axis1", "sort_axis0_descending_rank3", "argsort_axis1_descending",
                                       "topk3_axis1", "topk2_axis0_rank3"};
  bind_cases(prog, cases);
  prog.run();
  INFO("on " << TestType::name);
  check_outputs(prog,
                {{cases[0], "out 0"}, {cases[0], "out 1"}, {cases[1], "out 0"}, {cases[1], "out 1"},
                 {cases[2], "out 0"}, {cases[3], "out 0"}, {cases[3], "out 1"}, {cases[4], "out 0"},
                 {cases[4], "out 1"}, {cases[0], "grad x"}, {cases[1], "grad x"}, {cases[3], "grad x"},
                 {cases[4], "grad x"}},
                std::make_index_sequence<13>{});
}

TEMPLATE_LIST_TEST_CASE("einsum: matmul-like, transposed, batched, outer, implicit and one-operand patterns as torch's",
                        "[ops][einsum][torch]", test_backends) {
  // The weight's shape is spelled out: nvcc misspells a non-dependent decltype (test_support.hpp).
#define LUMINAL_EINSUM_CASE(NAME, PATTERN, SA, SB, SY)             \
  auto NAME##_a = input<#NAME ".a", f32>(SA);                     \
  auto NAME##_b = input<#NAME ".b", f32>(SB);                     \
  auto NAME = einsum<PATTERN>(NAME##_a, NAME##_b);                 \
  auto NAME##_w = input<#NAME ".w0", f32>(SY)
#define LUMINAL_EINSUM_ONE(NAME, PATTERN, SA, SY)                  \
  auto NAME##_a = input<#NAME ".a", f32>(SA);                     \
  auto NAME = einsum<PATTERN>(NAME##_a);                           \
  auto NAME##_w = input<#NAME ".w0", f32>(SY)
  LUMINAL_EINSUM_CASE(einsum_ij_jk_ik, "ij,jk->ik", (shape<3, 4>), (shape<4, 5>), (shape<3, 5>));
  LUMINAL_EINSUM_CASE(einsum_bij_bkj_bik, "bij,bkj->bik", (shape<2, 3, 4>), (shape<2, 5, 4>), (shape<2, 3, 5>));
  LUMINAL_EINSUM_CASE(einsum_ji_jk_ki, "ji,jk->ki", (shape<4, 3>), (shape<4, 5>), (shape<5, 3>));
  LUMINAL_EINSUM_CASE(einsum_ijk_jl_lik, "ijk,jl->lik", (shape<2, 3, 4>), (shape<3, 5>), (shape<5, 2, 4>));
  LUMINAL_EINSUM_CASE(einsum_ij_jk_i, "ij,jk->i", (shape<3, 4>), (shape<4, 5>), (shape<3>));
  LUMINAL_EINSUM_CASE(einsum_bi_bj_bij, "bi,bj->bij", (shape<2, 3>), (shape<2, 4>), (shape<2, 3, 4>));
  LUMINAL_EINSUM_CASE(einsum_i_i, "i,i", (shape<5>), (shape<5>), (shape<>));
  LUMINAL_EINSUM_CASE(einsum_ij_kj, "ij,kj", (shape<3, 4>), (shape<2, 4>), (shape<3, 2>));
  LUMINAL_EINSUM_ONE(einsum_ij_ji, "ij->ji", (shape<3, 4>), (shape<4, 3>));
  LUMINAL_EINSUM_ONE(einsum_ijk_j, "ijk->j", (shape<2, 3, 4>), (shape<3>));
  LUMINAL_EINSUM_ONE(einsum_ijk_kij, "ijk->kij", (shape<2, 3, 4>), (shape<4, 2, 3>));
#undef LUMINAL_EINSUM_CASE
#undef LUMINAL_EINSUM_ONE
  STATIC_REQUIRE(std::is_same_v<decltype(einsum_ij_jk_ik), decltype(matmul(einsum_ij_jk_ik_a, einsum_ij_jk_ik_b))>);
  STATIC_REQUIRE(std::is_same_v<decltype(einsum_ij_ji), decltype(transpose(einsum_ij_ji_a))>);
  auto loss = sum(einsum_ij_jk_ik * einsum_ij_jk_ik_w) + sum(einsum_bij_bkj_bik * einsum_bij_bkj_bik_w) +
              sum(einsum_ji_jk_ki * einsum_ji_jk_ki_w) + sum(einsum_ijk_jl_lik * einsum_ijk_jl_lik_w) +
              sum(einsum_ij_jk_i * einsum_ij_jk_i_w) + sum(einsum_bi_bj_bij * einsum_bi_bj_bij_w) +
              sum(einsum_i_i * einsum_i_i_w) + sum(einsum_ij_kj * einsum_ij_kj_w) + sum(einsum_ij_ji * einsum_ij_ji_w) +
              sum(einsum_ijk_j * einsum_ijk_j_w) + sum(einsum_ijk_kij * einsum_ijk_kij_w);
  auto grads = grad(loss, einsum_ij_jk_ik_a, einsum_ij_jk_ik_b, einsum_bij_bkj_bik_a, einsum_bij_bkj_bik_b,
                    einsum_ji_jk_ki_a, einsum_ji_jk_ki_b, einsum_ijk_jl_lik_a, einsum_ijk_jl_lik_b, einsum_ij_jk_i_a,
                    einsum_ij_jk_i_b, einsum_bi_bj_bij_a, einsum_bi_bj_bij_b, einsum_i_i_a, einsum_i_i_b,
                    einsum_ij_kj_a, einsum_ij_kj_b, einsum_ij_ji_a, einsum_ijk_j_a, einsum_ijk_kij_a);
  auto prog = compiled_with_grads<TestType>(grads, einsum_ij_jk_ik, einsum_bij_bkj_bik, einsum_ji_jk_ki,
                                            einsum_ijk_jl_lik, einsum_ij_jk_i, einsum_bi_bj_bij, einsum_i_i,
                                            einsum_ij_kj, einsum_ij_ji, einsum_ijk_j, einsum_ijk_kij);
  const std::vector<std::string> two{"einsum_ij_jk_ik", "einsum_bij_bkj_bik", "einsum_ji_jk_ki", "einsum_ijk_jl_lik",
                                     "einsum_ij_jk_i",  "einsum_bi_bj_bij",   "einsum_i_i",      "einsum_ij_kj"};
  const std::vector<std::string> one{"einsum_ij_ji", "einsum_ijk_j", "einsum_ijk_kij"};
  std::vector<std::string> cases = two;
  cases.insert(cases.end(), one.begin(), one.end());
  bind_cases(prog, cases);
  prog.run();
  std::vector<reference> refs;
  for (const auto& name : cases) refs.push_back({name, "out 0"});
  for (const auto& name : two) refs.insert(refs.end(), {{name, "grad a"}, {name, "grad b"}});
  for (const auto& name : one) refs.push_back({name, "grad a"});
  INFO("on " << TestType::name);
  check_outputs(prog, refs, std::make_index_sequence<30>{});
}

TEMPLATE_LIST_TEST_CASE("gather<axis>, sort and einsum over a symbolic batch axis", "[ops][index][sort][einsum]",
                        test_backends) {
  constexpr Dim Batch{"Batch"};
  auto x = input<"gather_axis1.x", f32>(shape<Batch, 5>);
  auto index = input<"gather_axis1.index", i32>(shape<Batch, 4>);
  auto picked = gather<1>(x, index);
  auto sorted = sort<1>(x);
  auto gram = einsum<"bi,ci->bc">(x, x);
  auto prog = compile<TestType>(picked, sorted.values, gram);
  const json& inputs = fixture().at("cases").at("gather_axis1").at("inputs");
  prog.bind("gather_axis1.x", array_of<f32>(inputs.at("x")));
  prog.bind("gather_axis1.index", array_of<i32>(inputs.at("index")));
  prog.run();
  const auto xs = array_of<double>(inputs.at("x"));
  check_outputs(prog, {{"gather_axis1", "out 0"}}, std::make_index_sequence<1>{});
  const xt::xarray<f32> values = prog.template output<1>(), products = prog.template output<2>();
  for (std::size_t b = 0; b < 3; ++b) {
    for (std::size_t i = 0; i + 1 < 5; ++i) CHECK(values(b, i) <= values(b, i + 1));
    for (std::size_t c = 0; c < 3; ++c) {
      double dot = 0;
      for (std::size_t i = 0; i < 5; ++i) dot += xs(b, i) * xs(c, i);
      CHECK(std::abs(products(b, c) - dot) <= 1e-5);
    }
  }
}

TEST_CASE("gather(table, ids) stays the embedding lookup beside gather<axis>", "[ops][index]") {
  auto table = input<"table", f32>(shape<10, 4>);
  auto ids = input<"ids", i32>(shape<3>);
  STATIC_REQUIRE(shape_t<decltype(gather(table, ids))>::rank == 2);
}
