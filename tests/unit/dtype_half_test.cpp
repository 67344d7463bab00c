// The element types bf16 and f16 (core/half_types.hpp) against PyTorch: their conversions on
// every one of the 65,536 patterns, on the ties between neighbours and beside them, and on
// random f32 values; ops on bf16 and f16 tensors against torch's eager results, bit for bit
// where each op rounds once; gradients through cast, autocast-style; and safetensors BF16
// and F16 tensors, written by luminal and by torch. tests/fixtures/half.json and
// half.safetensors come from make_half_fixtures.py; no torch at run time.
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#if defined(__F16C__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

#include "fixture_dir.hpp"
#include "io_test_support.hpp"
#include "test_support.hpp"

using namespace luminal;

namespace {
using json = nlohmann::json;

const json& fixture() {
  static const json data = [] {
    const auto path = test::fixture_dir() / "half.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path.string() + " (tests/fixtures/make_half_fixtures.py writes it)");
    return json::parse(in);
  }();
  return data;
}

/// FNV-1a 64 over little-endian bytes, as make_half_fixtures.py hashes torch's results.
struct fnv1a64 {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(std::uint32_t value, int bytes) {
    for (int k = 0; k < bytes; ++k) {
      h ^= (value >> (8 * k)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  std::string hex() const {
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
    return text;
  }
};

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t u) { return std::bit_cast<float>(u); }

/// The float32 inputs of the fixture's "narrow" hash: each pattern's value and, between
/// finite neighbours of one sign, their midpoint and the floats just below and above it.
template <class H>
std::vector<float> narrow_inputs() {
  std::vector<float> out;
  for (std::uint32_t p = 0; p < 65536; ++p) {
    const float a = float(H::from_bits(std::uint16_t(p)));
    out.push_back(a);
    if (p + 1 < 65536 && (p >> 15) == ((p + 1) >> 15)) {
      const float b = float(H::from_bits(std::uint16_t(p + 1)));
      if (std::isfinite(a) && std::isfinite(b)) {
        const float mid = float((double(a) + double(b)) / 2);
        out.push_back(mid);
        out.push_back(std::nextafter(mid, -INFINITY));
        out.push_back(std::nextafter(mid, INFINITY));
      }
    }
  }
  return out;
}

/// How far apart two 16-bit floats of one sign are, in units in the last place.
int ulps_apart(std::uint16_t a, std::uint16_t b) {
  auto ordered = [](std::uint16_t v) { return (v & 0x8000u) ? -int(v & 0x7fffu) : int(v); };
  return std::abs(ordered(a) - ordered(b));
}

template <class H>
constexpr const char* name_of() {
  return std::is_same_v<H, bf16> ? "bf16" : "f16";
}

std::vector<std::uint16_t> bits16(const json& list) { return list.get<std::vector<std::uint16_t>>(); }
std::vector<float> floats32(const json& list) {
  std::vector<float> out;
  for (std::uint32_t u : list.get<std::vector<std::uint32_t>>()) out.push_back(float_of(u));
  return out;
}
template <class H>
std::vector<H> halves(const json& list) {
  std::vector<H> out;
  for (std::uint16_t b : bits16(list)) out.push_back(H::from_bits(b));
  return out;
}
}  // namespace

// --- conversions -----------------------------------------------------------------------

static_assert(bf16(1.0f).bits == 0x3f80 && bf16(-2.0f).bits == 0xc000 && float(bf16::from_bits(0x3eab)) == 0.333984375f);
static_assert(f16(1.0f).bits == 0x3c00 && f16(65504.0f).bits == 0x7bff && f16(65520.0f).bits == 0x7c00);
static_assert(float(f16::from_bits(0x0001)) == 0x1p-24f, "the smallest f16 subnormal widens exactly");
static_assert(element_type<bf16> && floating_element<f16> && dtype_name<bf16>() == "bf16" &&
              dtype_of<f16>() == dtype_tag::f16);

TEMPLATE_TEST_CASE("bf16 and f16: every pattern widens and every tie rounds as torch's", "[dtype][half][torch]", bf16, f16) {
  using H = TestType;
  const json& expected = fixture().at("conversions").at(name_of<H>());
  INFO(name_of<H>() << " against torch " << fixture().at("torch").get<std::string>());

  fnv1a64 widened;
  for (std::uint32_t p = 0; p < 65536; ++p) widened.add(bits_of(float(H::from_bits(std::uint16_t(p)))), 4);
  CHECK(widened.hex() == expected.at("widen").get<std::string>());

  const std::vector<float> inputs = narrow_inputs<H>();
  REQUIRE(inputs.size() == expected.at("narrow_count").get<std::size_t>());
  fnv1a64 narrowed;
  for (float x : inputs) narrowed.add(H(x).bits, 2);
  CHECK(narrowed.hex() == expected.at("narrow").get<std::string>());

  const auto random_inputs = expected.at("random_inputs").get<std::vector<std::uint32_t>>();
  const auto random = bits16(expected.at("random"));
  REQUIRE(random.size() == random_inputs.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < random.size(); ++i)
    if (H(float_of(random_inputs[i])).bits != random[i] && wrong++ < 5)
      FAIL_CHECK("f32 bits " << std::hex << random_inputs[i] << ": " << H(float_of(random_inputs[i])).bits
                             << ", torch " << random[i]);
  CHECK(wrong == 0);

  // Round trip: every pattern but NaN comes back; a NaN comes back as the NaN torch writes.
  for (std::uint32_t p = 0; p < 65536; ++p) {
    const auto h = H::from_bits(std::uint16_t(p));
    const std::uint16_t back = H(float(h)).bits;
    const bool nan = std::isnan(float(h));
    const std::uint16_t nan_bits = std::is_same_v<H, bf16> ? 0xffff : std::uint16_t(p | 0x200u);
    if (back != (nan ? nan_bits : p)) FAIL("pattern " << std::hex << p << " came back as " << back);
  }

#if defined(__F16C__) && !defined(__CUDACC__)
  // The portable f16 conversion is the hardware's (F16C), on every input above.
  if constexpr (std::is_same_v<H, f16>) {
    for (float x : inputs)
      if (H(x).bits != _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)) FAIL("f16(" << x << ") differs from F16C's");
    for (std::uint32_t p = 0; p < 65536; ++p)
      if (bits_of(float(H::from_bits(std::uint16_t(p)))) != bits_of(_cvtsh_ss(std::uint16_t(p))))
        FAIL("f16 pattern " << std::hex << p << " widens unlike F16C");
  }
#endif
}

// --- ops -------------------------------------------------------------------------------

namespace {
template <class B, class H>
auto half_ops_program() {
  auto a = input<"a", H>(shape<4, 16>);
  auto b = input<"b", H>(shape<4, 16>);
  auto w = input<"w", H>(shape<16, 8>);
  return compile<B>(a + b, a * b, a - b, -a, max(a, b), exp(a), sum<1>(a), matmul(a, w), a / b, mean<1>(a),
                    softmax<1>(a), gelu(a));
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("bf16 and f16 ops: each rounds its f32 result once, as torch's eager ops", "[dtype][half][torch]",
                        test_backends) {
  auto check = [&]<class H>(H) {
    const json& data = fixture().at("ops").at(name_of<H>());
    INFO(name_of<H>() << " on " << TestType::name);
    const auto a = halves<H>(data.at("a")), b = halves<H>(data.at("b")), w = halves<H>(data.at("w"));
    auto prog = half_ops_program<TestType, H>();
    prog.bind("a", a.data(), {4, 16});
    prog.bind("b", b.data(), {4, 16});
    prog.bind("w", w.data(), {16, 8});
    prog.run();
    // Exact: the op's one rounding of an exact (or correctly rounded) f32 result.
    auto exact = [&](const char* op, const xt::xarray<H>& got) {
      const auto want = bits16(data.at(op));
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i)
        if (got.data()[i].bits != want[i]) FAIL(op << " element " << i << ": " << got.data()[i].bits << ", torch " << want[i]);
    };
    // Within one unit in the last place, and how many exactly: an f32 result computed
    // otherwise than torch's (exp2 for exp, sums in another order) may round to the
    // neighbour.
    auto within_one = [&](const char* op, const xt::xarray<H>& got) {
      const auto want = bits16(data.at(op));
      REQUIRE(got.size() == want.size());
      std::size_t same = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        same += got.data()[i].bits == want[i];
        if (ulps_apart(got.data()[i].bits, want[i]) > 1) FAIL(op << " element " << i << ": " << got.data()[i].bits << ", torch " << want[i]);
      }
      INFO(op << ": " << same << " of " << want.size() << " bit-identical");
      CHECK(same * 10 >= want.size() * 9);
    };
    exact("add", prog.template output<0>());
    exact("mul", prog.template output<1>());
    exact("sub", prog.template output<2>());
    exact("neg", prog.template output<3>());
    exact("max", prog.template output<4>());
    within_one("exp", prog.template output<5>());
    within_one("sum", prog.template output<6>());
    within_one("matmul", prog.template output<7>());
    // Composites, computed in f32 and rounded once as torch's one op (ops/cast.hpp).
    within_one("div", prog.template output<8>());
    within_one("mean", prog.template output<9>());
    within_one("softmax", prog.template output<10>());
    within_one("gelu", prog.template output<11>());

    // a * b + a fused into one kernel rounds a * b first, as eager torch does: a fused
    // value is the value the node has stored.
    auto x = input<"a", H>(shape<4, 16>);
    auto y = input<"b", H>(shape<4, 16>);
    auto fused = compile<TestType>(x * y + x);
    STATIC_REQUIRE(decltype(fused)::kernel_count() == 1);
    fused.bind("a", a.data(), {4, 16});
    fused.bind("b", b.data(), {4, 16});
    fused.run();
    exact("mul_add", fused.template output<0>());
  };
  check(bf16{});
  check(f16{});
}

// --- gradients -------------------------------------------------------------------------

namespace {
template <class B, class H>
auto autocast_program() {
  auto x = input<"x", f32>(shape<4, 16>);
  auto v = input<"v", f32>(shape<4, 16>);
  auto w = input<"w", f32>(shape<16, 8>);
  auto t = input<"t", f32>(shape<4, 8>);
  auto xh = cast<H>(x);
  auto loss = sum(cast<f32>(xh * cast<H>(v))) + sum(cast<f32>(matmul(xh, cast<H>(w))) * t);
  auto [gx, gv, gw] = grad(loss, x, v, w);
  return compile<B>(loss, gx, gv, gw);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("gradients through cast<bf16> and cast<f16>, autocast-style, as torch's", "[dtype][half][grad][torch]",
                        test_backends) {
  auto check = [&]<class H>(H) {
    const json& data = fixture().at("grads").at(name_of<H>());
    INFO(name_of<H>() << " on " << TestType::name);
    auto prog = autocast_program<TestType, H>();
    const auto x = floats32(data.at("x")), v = floats32(data.at("v")), w = floats32(data.at("w")), t = floats32(data.at("t"));
    prog.bind("x", x.data(), {4, 16});
    prog.bind("v", v.data(), {4, 16});
    prog.bind("w", w.data(), {16, 8});
    prog.bind("t", t.data(), {4, 8});
    prog.run();
    // One unit of H's last place, relative: a matmul's f32 sums run in another order than
    // torch's, and may round to the neighbour.
    const double ulp = std::is_same_v<H, bf16> ? 0x1p-7 : 0x1p-10;
    auto compare = [&](const char* what, const xt::xarray<f32>& got, double rtol, double atol) {
      INFO(what);
      const auto want = floats32(data.at(what));
      REQUIRE(got.size() == want.size());
      std::size_t same = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        same += bits_of(got.data()[i]) == bits_of(want[i]);
        if (std::abs(double(got.data()[i]) - double(want[i])) > atol + rtol * std::abs(double(want[i])))
          FAIL("element " << i << ": " << got.data()[i] << ", torch " << want[i]);
      }
      INFO(same << " of " << want.size() << " bit-identical");
      SUCCEED();
    };
    compare("loss", prog.template output<0>(), 1e-5, 1e-4);
    compare("grad_x", prog.template output<1>(), ulp, ulp);
    compare("grad_v", prog.template output<2>(), 0, 0);  // x rounded to H, exactly
    compare("grad_w", prog.template output<3>(), ulp, ulp);
  };
  check(bf16{});
  check(f16{});
}

// --- safetensors -----------------------------------------------------------------------

TEST_CASE("safetensors: BF16 and F16 tensors load into bf16 and f16 leaves, written by torch and by luminal",
          "[dtype][half][io][torch]") {
  const json& data = fixture().at("safetensors");
  const tensor_store file = load_safetensors((test::fixture_dir() / "half.safetensors").string());
  auto entry_bits = [](const tensor_store::entry& e) {
    std::vector<std::uint16_t> out(e.data.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = std::uint16_t(std::to_integer<unsigned>(e.data[2 * i]) | std::to_integer<unsigned>(e.data[2 * i + 1]) << 8);
    return out;
  };
  REQUIRE(file.at("half.bf16").dtype == dtype_tag::bf16);
  REQUIRE(file.at("half.f16").dtype == dtype_tag::f16);
  CHECK(entry_bits(file.at("half.bf16")) == bits16(data.at("bf16").at("bits")));
  CHECK(entry_bits(file.at("half.f16")) == bits16(data.at("f16").at("bits")));
  const xt::xarray<bf16> got = file.get<bf16>("half.bf16");
  CHECK(got.shape(0) == 3);
  CHECK(got.shape(1) == 5);

  SECTION("bound into bf16 and f16 parameters; an F32 tensor into a bf16 one rounds to nearest even") {
    auto a = param<"half.bf16", bf16>(shape<3, 5>);
    auto b = param<"half.f16", f16>(shape<2, 7>);
    auto c = param<"half.f32", bf16>(shape<4>);
    auto prog = compile(cast<f32>(a), cast<f32>(b), cast<f32>(c));
    CHECK(file.bind_strict(prog).bound.size() == 3);
    prog.run();
    auto same = [](const xt::xarray<f32>& widened, const std::vector<std::uint16_t>& bits, auto type) {
      using H = decltype(type);
      REQUIRE(widened.size() == bits.size());
      for (std::size_t i = 0; i < bits.size(); ++i) CHECK(bits_of(widened.data()[i]) == bits_of(float(H::from_bits(bits[i]))));
    };
    same(prog.output<0>(), bits16(data.at("bf16").at("bits")), bf16{});
    same(prog.output<1>(), bits16(data.at("f16").at("bits")), f16{});
    same(prog.output<2>(), bits16(data.at("f32").at("as_bf16")), bf16{});
  }
  SECTION("a BF16 tensor binds an f32 parameter exactly; integers still refuse floating entries") {
    auto a = param<"half.bf16", f32>(shape<3, 5>);
    auto prog = compile(a * 1.0_c);
    file.bind(prog);
    prog.run();
    const xt::xarray<f32> out = prog.output<0>();
    const auto bits = bits16(data.at("bf16").at("bits"));
    for (std::size_t i = 0; i < bits.size(); ++i) CHECK(bits_of(out.data()[i]) == std::uint32_t(bits[i]) << 16);
    auto ints = input<"half.bf16", i32>(shape<3, 5>);
    auto int_prog = compile(ints + c<1>);
    test::require_throws_with([&] { file.bind(int_prog); }, "holds bf16, but the program's input 'half.bf16' is i32");
  }
  SECTION("saved and read back bit for bit, as BF16 and F16") {
    test::temp_dir dir;
    const std::string path = (dir.path / "half.safetensors").string();
    tensor_store store;
    store.set("b", file.get<bf16>("half.bf16"));
    store.set("h", file.get<f16>("half.f16"));
    save_safetensors(store, path);
    const safetensors_header header = read_safetensors_header(path);
    REQUIRE(header.tensors.size() == 2);
    CHECK(header.tensors[0].dtype == dtype_tag::bf16);
    CHECK(header.tensors[1].dtype == dtype_tag::f16);
    const tensor_store back = load_safetensors(path);
    CHECK(back.at("b").data == file.at("half.bf16").data);
    CHECK(back.at("h").data == file.at("half.f16").data);
    CHECK(back.at("h").shape == std::vector<index_t>{2, 7});
  }
}
