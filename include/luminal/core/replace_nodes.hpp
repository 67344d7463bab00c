// A graph with some of its nodes replaced: every node of From, wherever it occurs, becomes
// the node at the same position in To, and every node above it is rebuilt over the new
// children. A pass that builds a graph over placeholder leaves (a block's backward over
// its saved tensors, a scan body's gradient over its carries) plugs real nodes in this way.
//
//     using h = Input<"h", f32, Shape<4>>;
//     using y = decltype(exp(h{}) * h{});
//     using z = replace_nodes<y, mp_list<h>, mp_list<decltype(x + x)>>;  // exp(x + x) * (x + x)
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include "graph.hpp"

namespace luminal {

namespace detail {
template <class N, class From, class To, int At = position_in<From, N>::value,
          bool Replaced = (At < int(boost::mp11::mp_size<From>::value))>
struct replace_in {
  using type = N;  // a leaf or a constant that is not replaced
};
template <class N, class From, class To, int At>
struct replace_in<N, From, To, At, true> {
  using type = boost::mp11::mp_at_c<To, std::size_t(At)>;
};
template <class Op, class From, class To, class Children>
struct rebuild_over;
template <class Op, class From, class To, class... C>
struct rebuild_over<Op, From, To, boost::mp11::mp_list<C...>> {
  using type = typename node_of<Op, typename replace_in<C, From, To>::type...>::type;
};
template <computed_node N, class From, class To, int At>
struct replace_in<N, From, To, At, false> {
  using type = typename rebuild_over<typename N::op, From, To, typename N::children>::type;
};
}  // namespace detail

/// N with every node of the list From replaced by the node at its position in To.
template <class N, class From, class To>
using replace_nodes = typename detail::replace_in<N, From, To>::type;

}  // namespace luminal
