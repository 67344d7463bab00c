// The shape algebra on its own (core/shape.hpp): extents static and symbolic, their
// products, broadcasting, element counts, and resolving symbols at run time. No node, no
// program: each rule is checked on dims, as CuTe tests its layouts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <luminal/core/shape.hpp>
#include <stdexcept>
#include <string>

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};
constexpr Dim Seq{"Seq"};
constexpr Dim Heads{"Heads"};

/// The text of one extent, as shapes print it.
constexpr auto dim_text(Dim d) { return shape_text(dims_t<1>{d}); }
}  // namespace

TEST_CASE("shape: an extent is static or a scaled product of symbols plus an offset", "[core][shape]") {
  STATIC_REQUIRE(Dim{784}.is_static());
  STATIC_REQUIRE(Dim{784}.offset == 784);
  STATIC_REQUIRE(!Batch.is_static());
  STATIC_REQUIRE(Batch.scale == 1 && Batch.offset == 0 && Batch.symbol_text() == "Batch");
  STATIC_REQUIRE(symbol("Batch") == Batch);
  STATIC_REQUIRE(Dim{1} == Dim{1} && !(Dim{1} == Dim{2}) && !(Batch == Seq));
  // Arithmetic keeps the symbol and moves the scale and offset.
  STATIC_REQUIRE((Seq + 2).offset == 2 && (Seq + 2).symbol_text() == "Seq");
  STATIC_REQUIRE((Seq + 2 - 2) == Seq);
  STATIC_REQUIRE((Batch * 3).scale == 3 && (3 * Batch) == (Batch * 3));
  STATIC_REQUIRE(Dim{6} * Dim{7} == Dim{42});
  STATIC_REQUIRE(dim_text(Batch * 3).view() == "(3*Batch)");
  STATIC_REQUIRE(dim_text(Seq + 2).view() == "(Seq+2)");
  STATIC_REQUIRE(dim_text(Seq - 1).view() == "(Seq-1)");
}

TEST_CASE("shape: products of symbols are sorted, so equal products compare equal", "[core][shape]") {
  STATIC_REQUIRE(Batch * Seq == Seq * Batch);
  STATIC_REQUIRE((Batch * Seq).symbol_text() == "Batch*Seq");
  STATIC_REQUIRE((Seq * Heads * Batch) == (Batch * (Heads * Seq)));
  STATIC_REQUIRE((Seq * Heads * Batch).symbol_text() == "Batch*Heads*Seq");
  STATIC_REQUIRE((2 * Batch * (3 * Seq)).scale == 6);
  // A symbol times itself is kept twice: Seq*Seq is not Seq.
  STATIC_REQUIRE((Seq * Seq).symbol_text() == "Seq*Seq" && !((Seq * Seq) == Seq));
  // An offset cannot be multiplied: (Seq+2)*Batch has no monomial form.
  REQUIRE_THROWS_AS((Seq + 2) * Batch, std::logic_error);
}

TEST_CASE("shape: a Shape type holds its dims, rank, text and static size", "[core][shape]") {
  using S = Shape<Batch, 28, 28>;
  STATIC_REQUIRE(S::rank == 3);
  STATIC_REQUIRE(S::dims[0] == Batch && S::dims[2] == Dim{28});
  STATIC_REQUIRE(!S::is_static);
  STATIC_REQUIRE(S::text.view() == "(Batch, 28, 28)");
  STATIC_REQUIRE(Shape<4, 5>::is_static && Shape<4, 5>::static_size() == 20);
  STATIC_REQUIRE(Shape<>::rank == 0 && Shape<>::static_size() == 1 && Shape<>::text.view() == "()");
  STATIC_REQUIRE(shape_type<S> && !shape_type<int>);
  constexpr dims_t<2> dims{Seq, Dim{64}};
  STATIC_REQUIRE(std::is_same_v<shape_from<dims>, Shape<Seq, 64>>);
}

TEST_CASE("shape: broadcasting aligns from the right, and a symbol meets only itself or 1", "[core][shape]") {
  constexpr auto bias = broadcast_rule(Shape<Batch, 256>::dims, Shape<256>::dims);
  STATIC_REQUIRE(bias.ok && bias.dims == dims_t<2>{Batch, Dim{256}});
  constexpr auto column = broadcast_rule(Shape<Batch, 1>::dims, Shape<1, 10>::dims);
  STATIC_REQUIRE(column.ok && column.dims == dims_t<2>{Batch, Dim{10}});
  constexpr auto scalar = broadcast_rule(Shape<>::dims, Shape<Batch, Seq>::dims);
  STATIC_REQUIRE(scalar.ok && scalar.dims == dims_t<2>{Batch, Seq});
  // Batch against 3 is not decided at compile time: the rule names the axis that fails.
  constexpr auto guess = broadcast_rule(Shape<Batch, 4>::dims, Shape<2, 3, 4>::dims);
  STATIC_REQUIRE(!guess.ok && guess.failing_axis == 1);
  constexpr auto mismatch = broadcast_rule(Shape<3, 4>::dims, Shape<3, 5>::dims);
  STATIC_REQUIRE(!mismatch.ok && mismatch.failing_axis == 1);
  STATIC_REQUIRE(expandable(Shape<1, 4>::dims, Shape<Batch, 4>::dims));
  STATIC_REQUIRE(!expandable(Shape<2, 4>::dims, Shape<Batch, 4>::dims));
  STATIC_REQUIRE(!expandable(Shape<Batch, 4>::dims, Shape<Seq, 4>::dims));
}

TEST_CASE("shape: element counts are monomials, so reshapes between symbolic shapes are checked", "[core][shape]") {
  STATIC_REQUIRE(same_element_count(Shape<Batch, 6, 4>::dims, Shape<Batch, 24>::dims));
  STATIC_REQUIRE(same_element_count(Shape<Batch, Seq, 64>::dims, Shape<Batch * Seq, 64>::dims));
  STATIC_REQUIRE(same_element_count(Shape<Seq, Batch>::dims, Shape<Batch * Seq>::dims));
  STATIC_REQUIRE(same_element_count(Shape<Batch * 2, 3>::dims, Shape<6, Batch>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<Batch, 6>::dims, Shape<Batch, 7>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<Batch, 6>::dims, Shape<Seq, 6>::dims));
  // An extent with an offset is one factor of the count (core_shape_symbolic_test.cpp).
  STATIC_REQUIRE(same_element_count(Shape<Seq + 2, 3>::dims, Shape<Seq + 2, 3>::dims));
  STATIC_REQUIRE(same_element_count(Shape<Seq + 2, 3>::dims, Shape<3, Seq + 2>::dims));
  STATIC_REQUIRE(!same_element_count(Shape<Seq + 2, 3>::dims, Shape<Seq, 3>::dims));
  constexpr auto count = count_elements(Shape<2 * Batch, 3, Seq>::dims);
  STATIC_REQUIRE(count.coefficient == 6 && count.symbols == Batch * Seq && !count.has_offset_symbol);
}

TEST_CASE("shape: negative axes count from the end", "[core][shape]") {
  STATIC_REQUIRE(normalize_axis<3>(-1) == 2);
  STATIC_REQUIRE(normalize_axis<3>(-3) == 0);
  STATIC_REQUIRE(normalize_axis<3>(1) == 1);
  STATIC_REQUIRE(normalize_axis<3>(-4) >= 3);  // out of range stays out of range
}

TEST_CASE("shape: symbols resolve to their bound values at run time", "[core][shape]") {
  symbol_values values;
  values.set("Batch", 128);
  values.set("Seq", 7);
  CHECK(resolve(Dim{784}, values) == 784);
  CHECK(resolve(Batch, values) == 128);
  CHECK(resolve(Batch * Seq, values) == 896);
  CHECK(resolve(3 * Seq + 2, values) == 23);
  CHECK(resolve(Seq - 1, values) == 6);
  CHECK(to_string(Shape<Batch, 784>::dims) == "(Batch, 784)");
  // An unbound symbol is named.
  try {
    (void)resolve(Batch * Heads, values);
    FAIL("resolve accepted an unbound symbol");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("'Heads'") != std::string::npos);
  }
  // The table of symbols is fixed: a seventeenth is refused, not written past the end.
  symbol_values many;
  for (int i = 0; i < int(symbol_values::capacity); ++i) many.set(std::string_view("ABCDEFGHIJKLMNOP").substr(i, 1), i);
  REQUIRE_THROWS_AS(many.set("Q", 1), std::length_error);
}

TEST_CASE("shape: an extent too large for 64 bits is refused, not wrapped", "[core][shape]") {
  symbol_values values;
  values.set("Batch", std::int64_t(1) << 40);
  values.set("Seq", std::int64_t(1) << 30);
  CHECK(resolve(Batch, values) == std::int64_t(1) << 40);
  try {
    (void)resolve(Batch * Seq, values);
    FAIL("resolve wrapped around");
  } catch (const std::overflow_error& e) {
    CHECK(std::string(e.what()).find("Batch*Seq") != std::string::npos);
  }
  values.set("Heads", std::numeric_limits<std::int64_t>::max());
  REQUIRE_THROWS_AS(resolve(Heads + 1, values), std::overflow_error);
  REQUIRE_THROWS_AS(resolve(2 * Heads, values), std::overflow_error);
}
