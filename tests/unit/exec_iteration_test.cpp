// The loop nests' reasoning on its own: a reshape's grouping of axes as a coordinate map
// (ops/reshape.hpp), where a kernel's loop nest runs (exec/iteration.hpp) and the facts
// the evaluator branches on (exec/eval_facts.hpp), over flat graphs written by hand. No
// program is planned and no kernel runs: each fact is checked on the nodes it reads.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <luminal/exec/iteration.hpp>
#include <luminal/ops/all.hpp>

using namespace luminal;
using detail::iteration;

namespace {
template <index_t... E>
using extents_of = std::integer_sequence<index_t, E...>;
template <int... C>
using children = std::integer_sequence<int, C...>;
template <class... Nodes>
using graph = flat::graph<4, Nodes...>;

// Nodes of a flat graph: an input, a computed node that gets a buffer (Stored) or is
// evaluated where it is read, and a constant.
template <class Extents>
using in = flat::node<op_kind::input, flat::no_op, float, true, Extents, children<>>;
template <class Op, class Extents, bool Stored, int... C>
using computed = flat::node<Op::kind, Op, float, Stored, Extents, children<C...>>;
template <class Extents, int... C>
using map_of = computed<Map<fn::Add>, Extents, false, C...>;
using one = flat::node<op_kind::constant, flat::constant<std::bit_cast<std::uint64_t>(1.0)>, float, false,
                       extents_of<>, children<>>;
/// The coordinate map of a reshape of In to Out, as flat graphs hold it.
template <class Out, class In>
using reshape_op = typename Reshape<Out>::template coordinate_map<In>;
/// A pad of one element on each side of axis 1, of 0.
using pad_op = Pad<1, 1, 1, std::bit_cast<std::uint64_t>(0.0)>;
}  // namespace

TEST_CASE("reshape grouping: a coordinate map splits or merges axes by groups, no division where it splits",
          "[exec][reshape]") {
  // (4, 28) read as (4, 14, 2): the output's 28 is one group of the input's 14 and 2.
  using pool = reshape_op<Shape<4, 28>, Shape<4, 14, 2>>;
  STATIC_REQUIRE(pool::only_splits && !pool::only_merges);
  STATIC_REQUIRE(pool::inputs_of(0) == 1 && pool::inputs_of(1) == 2);
  // (2, 3, 16) read as (2, 3, 4, 4): every input axis one group of output axes.
  using conv = reshape_op<Shape<2, 3, 4, 4>, Shape<2, 3, 16>>;
  STATIC_REQUIRE(conv::only_merges && !conv::only_splits);
  STATIC_REQUIRE(conv::inputs_of(2) == 1 && conv::inputs_of(3) == 1);
  // to_child and from_child are inverse where the reshape only splits.
  const extents<2> out_dims{4, 28};
  const extents<3> in_dims{4, 14, 2};
  for (index_t i = 0; i < 4; ++i)
    for (index_t j = 0; j < 28; ++j) {
      const extents<2> c{i, j};
      const extents<3> child = pool::to_child(c, out_dims, in_dims);
      CHECK(child == extents<3>{i, j / 2, j % 2});
      CHECK((pool::from_child<2>(child, in_dims)) == c);
    }
  // Extents of 1 belong to no group; a symbolic batch is a group of its own.
  constexpr Dim Batch{"Batch"};
  using squeeze = reshape_op<Shape<Batch, 6>, Shape<Batch, 1, 6>>;
  STATIC_REQUIRE(squeeze::only_splits && squeeze::only_merges);
  const extents<3> squeezed = squeeze::to_child(extents<2>{5, 4}, extents<2>{7, 6}, extents<3>{7, 1, 6});
  CHECK(squeezed == extents<3>{5, 0, 4});
  // (2, 3) as (3, 2) has no finer groups: one group, a flat index and its unravel.
  using whole = reshape_op<Shape<3, 2>, Shape<2, 3>>;
  STATIC_REQUIRE(!whole::only_splits && !whole::only_merges);
  const extents<2> unraveled = whole::to_child(extents<2>{2, 1}, extents<2>{3, 2}, extents<2>{2, 3});
  CHECK(unraveled == extents<2>{1, 2});  // flat index 5
}

TEST_CASE("iteration: a kernel of maps loops over its own coordinates, as one flat loop", "[exec][iteration]") {
  using P = graph<in<extents_of<4, 6>>, in<extents_of<4, 6>>, computed<Map<fn::Add>, extents_of<4, 6>, true, 0, 1>>;
  using where = iteration<P, 2>;
  STATIC_REQUIRE(where::permute == -1 && where::it == 2 && where::split == -1 && where::loop == 2);
  STATIC_REQUIRE(detail::evaluates_flat<P, 2, true>::value);
  STATIC_REQUIRE(detail::evaluates_flat<P, 2>::value);  // stored: read by a load at a flat index
  STATIC_REQUIRE(!detail::reads_padding<P, 2, true>::value);
  STATIC_REQUIRE(detail::row_axis(extents_of<4, 6>{}) == 1 && detail::row_extent(extents_of<4, 6>{}) == 6);
  STATIC_REQUIRE(detail::row_axis(extents_of<4, 6, 1, 1>{}) == 1);  // trailing 1s hold coordinate 0
  STATIC_REQUIRE(detail::row_extent(extents_of<4, -1>{}) == -1);    // symbolic
}

TEST_CASE("iteration: a permute's input is walked in its own order where its rows are no shorter",
          "[exec][iteration]") {
  // x (4, 6), a map of it (4, 6) computed here, its transpose (6, 4) stored: the loop runs
  // over the map's rows of 6 and writes the transpose at a stride.
  using P = graph<in<extents_of<4, 6>>, map_of<extents_of<4, 6>, 0, 0>,
                  computed<Permute<1, 0>, extents_of<6, 4>, true, 1>>;
  using where = iteration<P, 2>;
  STATIC_REQUIRE(where::permute == 2 && where::it == 1 && where::loop == 1);
  STATIC_REQUIRE(!detail::evaluates_flat<P, 2, true>::value);
  // Rows of 4 under rows of 6: the loop stays over the permute's own coordinates.
  using Q = graph<in<extents_of<6, 4>>, map_of<extents_of<6, 4>, 0, 0>,
                  computed<Permute<1, 0>, extents_of<4, 6>, true, 1>>;
  STATIC_REQUIRE(iteration<Q, 2>::permute == -1 && iteration<Q, 2>::it == 2);
  // A permute of a stored value is read through its strides: nothing to walk.
  using R = graph<in<extents_of<4, 6>>, computed<Permute<1, 0>, extents_of<6, 4>, true, 0>>;
  STATIC_REQUIRE(iteration<R, 1>::permute == -1 && iteration<R, 1>::it == 1);
}

TEST_CASE("iteration: reshapes at a kernel's root are looped past, same elements in the same order",
          "[exec][iteration]") {
  using P = graph<in<extents_of<4, 6>>, map_of<extents_of<4, 6>, 0, 0>,
                  computed<reshape_op<Shape<24>, Shape<4, 6>>, extents_of<24>, true, 1>>;
  STATIC_REQUIRE(detail::past_reshapes<P, 2>::value == 1);
  STATIC_REQUIRE(iteration<P, 2>::it == 1 && iteration<P, 2>::loop == 1);
  STATIC_REQUIRE(detail::evaluates_flat<P, 2, true>::value);  // a reshape of maps: flat
}

TEST_CASE("iteration: a reshape that splits the row into short windows is looped over its input",
          "[exec][iteration]") {
  // A pool's gradient: rows of 28 that read (14, 2) windows of a stored value.
  using P = graph<in<extents_of<4, 14, 2>>, in<extents_of<4, 28>>,
                  computed<reshape_op<Shape<4, 28>, Shape<4, 14, 2>>, extents_of<4, 28>, false, 0>,
                  computed<Map<fn::Mul>, extents_of<4, 28>, true, 2, 1>>;
  using where = iteration<P, 3>;
  STATIC_REQUIRE(where::split == 2 && !where::merges && where::loop == 0);
  STATIC_REQUIRE(detail::leads_to<P, 3, 2, true>::value);
  STATIC_REQUIRE(!detail::leads_to<P, 1, 2>::value);
  // Windows longer than short_row_limit are not unrolled: the nest stays over the root.
  using Long = graph<in<extents_of<4, 2, 17>>, in<extents_of<4, 34>>,
                     computed<reshape_op<Shape<4, 34>, Shape<4, 2, 17>>, extents_of<4, 34>, false, 0>,
                     computed<Map<fn::Mul>, extents_of<4, 34>, true, 2, 1>>;
  STATIC_REQUIRE(iteration<Long, 3>::split == -1 && iteration<Long, 3>::loop == 3);
}

TEST_CASE("iteration: a reshape that merges rows is looped over its input's longer rows", "[exec][iteration]") {
  // A convolution's (2, 3, 16) GEMM output read as (2, 3, 4, 4) by a map whose other
  // operand has one value everywhere.
  using P = graph<in<extents_of<2, 3, 16>>, one,
                  computed<reshape_op<Shape<2, 3, 4, 4>, Shape<2, 3, 16>>, extents_of<2, 3, 4, 4>, false, 0>,
                  computed<Map<fn::Add>, extents_of<2, 3, 4, 4>, true, 2, 1>>;
  using where = iteration<P, 3>;
  STATIC_REQUIRE(where::split == 2 && where::merges && where::loop == 0);
  STATIC_REQUIRE(detail::coordinate_free<P, 1>::value);
  // Another operand with coordinates of its own keeps the nest over the root.
  using Q = graph<in<extents_of<2, 3, 16>>, in<extents_of<2, 3, 4, 4>>,
                  computed<reshape_op<Shape<2, 3, 4, 4>, Shape<2, 3, 16>>, extents_of<2, 3, 4, 4>, false, 0>,
                  computed<Map<fn::Add>, extents_of<2, 3, 4, 4>, true, 2, 1>>;
  STATIC_REQUIRE(iteration<Q, 3>::split == -1 && iteration<Q, 3>::loop == 3);
}

TEST_CASE("eval facts: one value everywhere, pads read, and pads whose tests move along a row",
          "[exec][eval_facts]") {
  // 0 x (4, 6); 1 the constant 1; 2 the constant broadcast to (4, 6); 3 x + 1 broadcast;
  // 4 x padded on axis 1 to (4, 8); 5 its transpose; 6 the padded x as (32); 7 a map of 4.
  using P = graph<in<extents_of<4, 6>>, one, computed<Expand<Shape<4, 6>>, extents_of<4, 6>, false, 1>,
                  map_of<extents_of<4, 6>, 0, 2>, computed<pad_op, extents_of<4, 8>, false, 0>,
                  computed<Permute<1, 0>, extents_of<8, 4>, false, 4>,
                  computed<reshape_op<Shape<32>, Shape<4, 8>>, extents_of<32>, false, 4>,
                  computed<Map<fn::Mul>, extents_of<4, 8>, true, 4, 4>>;
  STATIC_REQUIRE(detail::broadcasts_one_element<P, 2>::value);
  STATIC_REQUIRE(detail::coordinate_free<P, 1>::value && detail::coordinate_free<P, 2>::value);
  STATIC_REQUIRE(!detail::coordinate_free<P, 0>::value && !detail::coordinate_free<P, 3>::value);
  STATIC_REQUIRE(detail::evaluates_flat<P, 3>::value);  // a map of x and of a broadcast scalar
  STATIC_REQUIRE(!detail::evaluates_flat<P, 4>::value);  // a pad moves elements
  STATIC_REQUIRE(detail::reads_padding<P, 7, true>::value && !detail::reads_padding<P, 3>::value);
  STATIC_REQUIRE(detail::pads_monotone<P, 7, true>::value);  // through maps: the row's own axis
  STATIC_REQUIRE(detail::pads_monotone<P, 5>::value);        // a permute maps coordinates affinely
  STATIC_REQUIRE(!detail::pads_monotone<P, 6>::value);       // a reshape's unravel wraps around
  STATIC_REQUIRE(detail::first_child_at<P, 5>::value == 4 && detail::first_child_at<P, -1>::value == -1);
}
