// The one table of op facts (core/op_facts.hpp) and the graph table built from it
// (core/graph.hpp): which kinds fuse and which are kernel boundaries, what each op's
// traits say, and what a node's row records. No program is compiled.
#include <catch2/catch.hpp>

#include <luminal/core/graph.hpp>
#include <luminal/ops/all.hpp>

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

template <class N>
using traits_of = op_traits<typename N::op>;

constexpr op_kind every_kind[] = {op_kind::input, op_kind::constant, op_kind::extent, op_kind::map,
                                  op_kind::view,  op_kind::reduce,   op_kind::matmul, op_kind::gather,
                                  op_kind::iota,  op_kind::opaque};
}  // namespace

TEST_CASE("op facts: each kind has one kernel form, and fuses or is a boundary or is a leaf", "[core][op_facts]") {
  STATIC_REQUIRE(kernel_form_of(op_kind::input) == kernel_form::none);
  STATIC_REQUIRE(kernel_form_of(op_kind::reduce) == kernel_form::reduction);
  STATIC_REQUIRE(kernel_form_of(op_kind::matmul) == kernel_form::gemm);
  STATIC_REQUIRE(kernel_form_of(op_kind::opaque) == kernel_form::own);
  for (op_kind kind : {op_kind::constant, op_kind::extent, op_kind::map, op_kind::view, op_kind::gather, op_kind::iota})
    CHECK(kernel_form_of(kind) == kernel_form::elementwise);
  for (op_kind kind : every_kind) {
    CAPTURE(int(kind));
    CHECK(int(is_leaf(kind)) + int(fuses(kind)) + int(is_boundary(kind)) == 1);
    CHECK(cheap_to_recompute(kind) == !is_boundary(kind));
    CHECK(recomputable(kind) == (!is_leaf(kind) && kind != op_kind::opaque));
  }
  // A gather fuses like a view: it is an index map whose row comes from a value.
  STATIC_REQUIRE(fuses(op_kind::gather) && cheap_to_recompute(op_kind::gather));
  // An opaque op is a boundary the backward never runs again.
  STATIC_REQUIRE(is_boundary(op_kind::opaque) && !recomputable(op_kind::opaque));
}

TEST_CASE("op facts: where a fusing node reads its children", "[core][op_facts]") {
  STATIC_REQUIRE(child_reads_of(op_kind::map) == child_reads::same_place);
  STATIC_REQUIRE(child_reads_of(op_kind::view) == child_reads::remapped);
  STATIC_REQUIRE(child_reads_of(op_kind::gather) == child_reads::by_index);
  STATIC_REQUIRE(child_reads_of(op_kind::iota) == child_reads::none);
  STATIC_REQUIRE(same_everywhere(op_kind::constant) && same_everywhere(op_kind::extent));
  STATIC_REQUIRE(!same_everywhere(op_kind::iota) && !same_everywhere(op_kind::input));
  // A view shows its child, and so does a map of cost 0; a costing map computes new values.
  STATIC_REQUIRE(shows_child(op_kind::view, 1) && shows_child(op_kind::map, 0));
  STATIC_REQUIRE(!shows_child(op_kind::map, 1) && !shows_child(op_kind::gather, 1) && !shows_child(op_kind::reduce, 0));
}

TEST_CASE("op facts: an op's traits come from the op type, never from its name", "[core][op_facts]") {
  auto x = input<"x", f32>(shape<Batch, 6, 4>);
  using Padded = decltype(pad<2, 1, 1>(x));
  using Reshaped = decltype(reshape(x, shape<Batch, 24>));
  using Permuted = decltype(permute<0, 2, 1>(x));
  using Expanded = decltype(expand(input<"b", f32>(shape<1, 6, 4>), shape<Batch, 6, 4>));
  using Summed = decltype(sum<1>(x, keepdim));
  using Maxed = decltype(max<1>(x, keepdim));
  using Exp = decltype(exp2(x));
  using Added = decltype(x + x);
  using Stopped = decltype(stop_gradient(x));
  using Iota = decltype(iota<1, i32>(shape<Batch, 6>));
  STATIC_REQUIRE(traits_of<Padded>::pads && !traits_of<Padded>::reshapes);
  STATIC_REQUIRE(traits_of<Reshaped>::reshapes && !traits_of<Reshaped>::pads && !traits_of<Reshaped>::permutes);
  STATIC_REQUIRE(traits_of<Permuted>::permutes && !traits_of<Permuted>::expands);
  STATIC_REQUIRE(traits_of<Expanded>::expands && !traits_of<Expanded>::permutes);
  STATIC_REQUIRE(traits_of<Summed>::summed_axis == 1 && traits_of<Summed>::axis == 1);
  STATIC_REQUIRE(traits_of<Maxed>::summed_axis == -1 && traits_of<Maxed>::axis == 1);
  STATIC_REQUIRE(traits_of<Iota>::axis == 1 && traits_of<Added>::axis == -1);
  STATIC_REQUIRE(traits_of<Exp>::cost >= arithmetic_bound_cost && traits_of<Added>::cost == 1);
  STATIC_REQUIRE(traits_of<Stopped>::cost == 0);
  STATIC_REQUIRE(!traits_of<Added>::needs_communicator && !traits_of<Added>::reports_bad_indices);
  // A leaf has no op: every trait is off.
  STATIC_REQUIRE(!op_traits<void>::pads && op_traits<void>::summed_axis == -1 && op_traits<void>::cost == 1);
  // The reshape's coordinate map (what a flat graph holds) says how its input's axes meet
  // its output's: each output axis one group of input axes (only_splits: the input splits
  // them), or each input axis one group of output axes (only_merges).
  using Split = Reshape<Shape<Batch, 24>>::coordinate_map<Shape<Batch, 6, 4>>;
  using Merge = Reshape<Shape<Batch, 3, 2, 4>>::coordinate_map<Shape<Batch, 6, 4>>;
  STATIC_REQUIRE(op_traits<Split>::reshapes && op_traits<Split>::only_splits && !op_traits<Split>::only_merges);
  STATIC_REQUIRE(op_traits<Merge>::reshapes && op_traits<Merge>::only_merges && !op_traits<Merge>::only_splits);
  STATIC_REQUIRE(!op_traits<Permuted::op>::only_splits);
}

TEST_CASE("op facts: a map's functor says whether it rounds or casts", "[core][op_facts]") {
  auto x = input<"x", f32>(shape<4>);
  using Floor = decltype(floor(x));
  using Cast = decltype(cast<f64>(x));
  using Exp = decltype(exp2(x));
  STATIC_REQUIRE(functor_traits<Floor::op::functor>::rounds && !functor_traits<Floor::op::functor>::casts);
  STATIC_REQUIRE(functor_traits<Cast::op::functor>::casts && !functor_traits<Cast::op::functor>::rounds);
  STATIC_REQUIRE(!functor_traits<Exp::op::functor>::rounds && !functor_traits<Exp::op::functor>::casts);
}

TEST_CASE("op facts: a parameter is a leaf by its role", "[core][op_facts]") {
  STATIC_REQUIRE(is_parameter_leaf<decltype(param<"w", f32>(shape<4>))>::value);
  STATIC_REQUIRE(!is_parameter_leaf<decltype(input<"x", f32>(shape<4>))>::value);
  STATIC_REQUIRE(!is_parameter_leaf<Const<f32, 1.0f>>::value);
  STATIC_REQUIRE(!is_parameter_leaf<decltype(param<"w", f32>(shape<4>) * 2.0_c)>::value);
}

TEST_CASE("graph table: each row records its node's kind, children and view facts", "[core][graph]") {
  auto x = input<"x", f32>(shape<Batch, 6, 4>);
  auto w = param<"w", f32>(shape<4, 4>);
  auto wt = transpose(w);                                   // swaps the last two axes
  auto wb = expand(wt, shape<Batch, 4, 4>);                 // a weight shared by a batch
  auto y = matmul(x, wb);                                   // (Batch, 6, 4)
  auto flat = reshape(y, shape<Batch, 24>);
  auto s = sum<1>(flat, keepdim);                           // (Batch, 1)
  auto spread = expand(s, shape<Batch, 24>);
  auto out = exp2(spread) + flat;
  using nodes = topo_nodes<decltype(out)>;
  constexpr auto& table = graph_table<nodes>;
  auto row = [&](auto node) { return table[std::size_t(node_index<nodes, decltype(node)>::value)]; };
  CHECK(table.size() == boost::mp11::mp_size<nodes>::value);
  CHECK(row(x).kind == op_kind::input);
  CHECK(row(x).child_count == 0);
  CHECK(row(wt).is_last_two_transpose);
  CHECK(row(wb).is_batch_expand);
  CHECK(row(wb).expansion == 16);  // a symbolic extent counts as 16
  CHECK(row(y).kind == op_kind::matmul);
  CHECK(row(y).child_count == 2);
  CHECK(row(y).children[0] == node_index<nodes, decltype(x)>::value);
  CHECK(row(y).children[1] == node_index<nodes, decltype(wb)>::value);
  CHECK(row(flat).is_reshape);
  CHECK(!row(wt).is_reshape);
  CHECK(row(s).summed_axis == 1);
  CHECK(row(spread).expansion == 24);
  CHECK(!row(spread).is_batch_expand);
  CHECK(row(exp2(spread)).cost == traits_of<decltype(exp2(spread))>::cost);
  CHECK(row(out).element_bytes == 4);
  CHECK(row(out).rank == 2);
  // Children come before their parents.
  for (std::size_t i = 0; i < table.size(); ++i)
    for (int c = 0; c < table[i].child_count; ++c) CHECK(table[i].children[std::size_t(c)] < int(i));
}

namespace {
/// x + y + y + ... (Length additions): a graph as deep as it is long, built by a fold,
/// so that only topo_nodes could recurse with its depth.
template <std::size_t... I>
auto addition_chain(std::index_sequence<I...>) {
  auto x = input<"x", f32>(shape<4>);
  auto y = input<"y", f32>(shape<4>);
  return (x + ... + ((void)I, y));
}
}  // namespace

TEST_CASE("topo_nodes: depth-first, children in order before parents, each once, at any depth", "[core][graph]") {
  auto x = input<"x", f32>(shape<4>);
  auto w = param<"w", f32>(shape<4>);
  auto a = x * w;
  auto b = exp2(a);
  auto out = a + b;
  using boost::mp11::mp_list;
  STATIC_REQUIRE(std::is_same_v<topo_nodes<decltype(out)>,
                                mp_list<decltype(x), decltype(w), decltype(a), decltype(b), decltype(out)>>);
  STATIC_REQUIRE(std::is_same_v<topo_nodes<decltype(out), decltype(a), decltype(out)>, topo_nodes<decltype(out)>>);
  STATIC_REQUIRE(std::is_same_v<topo_nodes<decltype(b), decltype(w), decltype(out)>, topo_nodes<decltype(out)>>);
  STATIC_REQUIRE(std::is_same_v<topo_nodes<decltype(w), decltype(out)>,
                                mp_list<decltype(w), decltype(x), decltype(a), decltype(b), decltype(out)>>);
  STATIC_REQUIRE(std::is_same_v<topo_nodes<>, mp_list<>>);
  // Deeper than a recursive walk could go within GCC's default instantiation depth (900).
  auto deep = addition_chain(std::make_index_sequence<1000>{});
  using nodes = topo_nodes<decltype(deep)>;
  STATIC_REQUIRE(boost::mp11::mp_size<nodes>::value == 1002);
  STATIC_REQUIRE(std::is_same_v<boost::mp11::mp_front<nodes>, decltype(x)>);
  STATIC_REQUIRE(std::is_same_v<boost::mp11::mp_back<nodes>, decltype(deep)>);
  // The nodes done are kept in chunks of 64 and buckets by hash: y, reused by every
  // addition, is found done in its bucket each time, and the chunks join in order.
  STATIC_REQUIRE(std::is_same_v<boost::mp11::mp_at_c<nodes, 1>, decltype(input<"y", f32>(shape<4>))>);
  STATIC_REQUIRE(boost::mp11::mp_count<nodes, decltype(input<"y", f32>(shape<4>))>::value == 1);
  STATIC_REQUIRE(std::is_same_v<boost::mp11::mp_first<typename boost::mp11::mp_at_c<nodes, 500>::children>,
                                boost::mp11::mp_at_c<nodes, 499>>);
}
