// The reverse pass, at compile time. Walking the loss's node list from the output back,
// each node on a path from a wrt leaf (the critical subgraph) gets a cotangent type: the
// sum over its consumers of their vector-Jacobian rule. The result is ordinary expression
// types that compile, fuse and plan like any forward graph.
#pragma once
#include <tuple>

#include "../core/graph.hpp"
#include "../ops/custom.hpp"
#include "rules.hpp"

namespace luminal {

namespace error {
template <auto Name, auto Type>
struct gradient_of_non_float {
  static_assert(always_false<Name, Type>,
                "luminal: a gradient exists only with respect to f32 or f64 leaves (see the leaf name "
                "and element type above)");
};
}  // namespace error

namespace detail {
inline constexpr auto add_cotangents = [](auto a, auto b) {
  if constexpr (std::is_same_v<decltype(a), no_gradient>) return b;
  else if constexpr (std::is_same_v<decltype(b), no_gradient>) return a;
  else return a + b;
};

struct edge {
  int parent = -1, position = -1;
};
/// Every node's consumers in one table: node I's are list[start[I]] to list[start[I + 1]).
template <std::size_t Nodes, std::size_t Edges>
struct consumer_table {
  std::array<int, Nodes + 1> start{};
  std::array<edge, Edges + 1> list{};
};

/// The children a node passes cotangents to: its children, or a custom op's inputs.
inline constexpr int max_custom_inputs = 8;
struct gradient_row {
  int count = 0;
  std::array<int, max_custom_inputs> ids{};
};
template <class Nodes, class N, class... X>
constexpr void set_custom_row(gradient_row& row, boost::mp11::mp_list<X...>) {
  static_assert(sizeof...(X) <= max_custom_inputs, "luminal: a custom op takes at most 8 inputs");
  static_assert(((node_index<Nodes, X>::value < int(boost::mp11::mp_size<Nodes>::value)) && ...),
                "luminal: every input of a custom op must be used by its forward expression");
  row.count = int(sizeof...(X));
  int k = 0;
  ((row.ids[k++] = node_index<Nodes, X>::value), ...);
}
template <class Nodes, std::size_t Count>
constexpr auto gradient_rows(const std::array<node_info, Count>& table) {
  std::array<gradient_row, Count> rows{};
  for (std::size_t i = 0; i < Count; ++i) {
    rows[i].count = table[i].child_count;
    for (int k = 0; k < table[i].child_count; ++k) rows[i].ids[k] = table[i].children[k];
  }
  [&]<class... N>(boost::mp11::mp_list<N...>) {
    if constexpr ((custom_vjp_node<N> || ...)) {
      std::size_t i = 0;
      auto patch = [&]<class M>(std::type_identity<M>) {
        if constexpr (custom_vjp_node<M>) set_custom_row<Nodes, M>(rows[i], typename M::op::functor::inputs{});
        ++i;
      };
      (patch(std::type_identity<N>{}), ...);
    }
  }(Nodes{});
  return rows;
}

template <class Pass, int I, class Consumers>
struct summed_contributions;
template <class Pass, int I, int Parent, int Position>
struct contribution_of;

// A node's cotangent type is a class template that names its parents' cotangent types,
// not a function whose deduced return type calls its parents' functions. The recursion is
// as deep as the graph either way, but nvcc's host front end (cudafe++) spends time
// exponential in depth on a chain of deduced return types, and its instantiation-depth
// limit stops such a chain a few layers deep.
template <class Pass, int I>
struct cotangent_of {
  using type = typename std::conditional_t<
      I == Pass::output_id, std::type_identity<typename Pass::seed>,
      summed_contributions<Pass, I,
                           std::make_index_sequence<Pass::consumers.start[I + 1] - Pass::consumers.start[I]>>>::type;
};

/// Every critical node's cotangent type, instantiated from the output down (a pack is
/// substituted in order): each then finds its consumers' cotangents complete, and no
/// instantiation nests as deep as the graph, which exceeds GCC's limit of 900 levels in
/// an 8-layer transformer's backward.
template <class Pass, int I>
struct critical_cotangent {
  using type = typename std::conditional_t<Pass::critical[std::size_t(I)], cotangent_of<Pass, I>,
                                           std::type_identity<no_gradient>>::type;
};
template <class Pass, class Positions>
struct cotangents_from_output;
template <class Pass, std::size_t... K>
struct cotangents_from_output<Pass, std::index_sequence<K...>> {
  using type = boost::mp11::mp_list<typename critical_cotangent<Pass, int(sizeof...(K) - 1 - K)>::type...>;
};

template <class Pass, int I, std::size_t... E>
struct summed_contributions<Pass, I, std::index_sequence<E...>> {
  using type = decltype(Pass::fold(
      no_gradient{},
      typename contribution_of<Pass, I, Pass::consumers.list[Pass::consumers.start[I] + E].parent,
                               Pass::consumers.list[Pass::consumers.start[I] + E].position>::type{}...));
};

/// The cotangent a custom op's rule gives input K.
template <int K, class Parent, class G, class... X>
constexpr auto custom_cotangent(G g, boost::mp11::mp_list<X...>) {
  using Out = boost::mp11::mp_first<typename Parent::children>;
  auto all = as_tuple(Parent::op::functor::rule::vjp(g, Out{}, X{}...));
  static_assert(std::tuple_size_v<decltype(all)> == sizeof...(X),
                "luminal: a custom op's vjp() must return one cotangent per input (a std::tuple for several)");
  return std::get<K>(all);
}

/// The cotangent that Parent's rule gives its child at Position.
template <int Position, class Parent, class G>
constexpr auto rule_cotangent(G g) {
  if constexpr (custom_vjp_node<Parent>)
    return custom_cotangent<Position, Parent>(g, typename Parent::op::functor::inputs{});
  else return vjp<typename Parent::op>::template rule<Position, Parent>(g);
}

template <int Position, class Parent, class Child, class G>
constexpr auto apply_rule(G g) {
  if constexpr (std::is_same_v<G, no_gradient>) {
    return no_gradient{};
  } else {
    auto c = rule_cotangent<Position, Parent>(g);
    using C = decltype(c);
    if constexpr (!std::is_same_v<C, no_gradient>)
      static_assert(std::is_same_v<shape_t<C>, shape_t<Child>>,
                    "luminal: a gradient rule produced the wrong shape (a custom op's vjp() gives each input's shape)");
    return c;
  }
}

template <class Pass, int I, int Parent, int Position>
struct contribution_of {
  using type = decltype(apply_rule<Position, node_at<typename Pass::nodes, Parent>, node_at<typename Pass::nodes, I>>(
      typename cotangent_of<Pass, Parent>::type{}));
};
}  // namespace detail

/// The reverse pass of `Output` seeded with cotangent `Seed` (same shape as Output).
template <class Output, class Seed, class... Wrt>
struct reverse_pass {
  using nodes = topo_nodes<Output>;
  static constexpr auto table = graph_table<nodes>;
  static constexpr std::size_t node_count = table.size();
  static constexpr int output_id = int(node_count) - 1;
  static constexpr auto edges = detail::gradient_rows<nodes>(table);
  static constexpr std::size_t edge_count = [] {
    std::size_t n = 0;
    for (const auto& row : edges) n += std::size_t(row.count);
    return n;
  }();

  /// critical[i]: node i depends on a wrt leaf, so its cotangent is needed.
  static constexpr auto critical = [] {
    std::array<bool, node_count> on_path{};
    constexpr std::array<int, sizeof...(Wrt)> wrt{node_index<nodes, Wrt>::value...};
    for (std::size_t i = 0; i < node_count; ++i) {
      for (int w : wrt) on_path[i] = on_path[i] || w == int(i);
      for (int k = 0; k < edges[i].count; ++k) on_path[i] = on_path[i] || on_path[edges[i].ids[k]];
    }
    return on_path;
  }();

  /// Each node's consumers on the critical subgraph, with the child position it holds
  /// there, by ascending consumer: one table for the pass, not one search per node.
  static constexpr auto consumers = [] {
    detail::consumer_table<node_count, edge_count> table{};
    for (std::size_t p = 0; p < node_count; ++p)
      if (critical[p])
        for (int k = 0; k < edges[p].count; ++k) ++table.start[std::size_t(edges[p].ids[k]) + 1];
    for (std::size_t i = 0; i < node_count; ++i) table.start[i + 1] += table.start[i];
    std::array<int, node_count + 1> next = table.start;
    for (std::size_t p = 0; p < node_count; ++p)
      if (critical[p])
        for (int k = 0; k < edges[p].count; ++k)
          table.list[std::size_t(next[std::size_t(edges[p].ids[k])]++)] = {int(p), k};
    return table;
  }();

  using seed = Seed;

  template <class Acc, class... Rest>
  static constexpr auto fold(Acc acc, Rest... rest) {
    if constexpr (sizeof...(Rest) == 0) return acc;
    else return fold_step(acc, rest...);
  }
  template <class Acc, class First, class... Rest>
  static constexpr auto fold_step(Acc acc, First first, Rest... rest) {
    return fold(detail::add_cotangents(acc, first), rest...);
  }

  /// The cotangent of leaf W (zeros when the output does not depend on it).
  template <class W>
  static constexpr auto gradient() {
    using T = typename W::value_type;
    if constexpr (!floating_element<T>) {
      (void)error::gradient_of_non_float<W::name, dtype_text<T>()>{};
      return no_gradient{};
    } else {
      constexpr int id = node_index<nodes, W>::value;
      using in_order [[maybe_unused]] =
          typename detail::cotangents_from_output<reverse_pass, std::make_index_sequence<node_count>>::type;
      if constexpr (id >= int(node_count)) {
        return expand(Const<T, T(0)>{}, shape_t<W>{});
      } else {
        using G = typename detail::cotangent_of<reverse_pass, id>::type;
        if constexpr (std::is_same_v<G, no_gradient>) return expand(Const<T, T(0)>{}, shape_t<W>{});
        else return G{};
      }
    }
  }
};

namespace detail {
template <class... E>
constexpr auto one_or_tuple(E... e) {
  if constexpr (sizeof...(E) == 1) return (e, ...);
  else return std::tuple<E...>{};
}
template <expression Loss>
constexpr void require_scalar() {
  static_assert(shape_t<Loss>::rank == 0, "luminal: grad() needs a scalar loss (reduce it with sum or mean), or use vjp()");
  static_assert(floating_element<typename Loss::value_type>, "luminal: grad() needs a floating-point loss");
}
/// The reverse pass of a scalar loss, seeded with d loss / d loss = 1 (grad,
/// value_and_grad and a training step's gradients).
template <class Loss, class... Wrt>
using scalar_loss_pass = reverse_pass<Loss, Const<typename Loss::value_type, typename Loss::value_type(1)>, Wrt...>;
}  // namespace detail

/// d loss / d wrt for a scalar loss: one expression, or a tuple for several leaves.
///     auto [dw, db] = grad(loss, w, b);
template <expression Loss, expression... Wrt>
constexpr auto grad(Loss, Wrt...) {
  detail::require_scalar<Loss>();
  using pass = detail::scalar_loss_pass<Loss, std::remove_cvref_t<Wrt>...>;
  return detail::one_or_tuple(pass::template gradient<std::remove_cvref_t<Wrt>>()...);
}

/// The loss and its gradients together: `auto [loss, dw, db] = value_and_grad(loss, w, b);`
template <expression Loss, expression... Wrt>
constexpr auto value_and_grad(Loss, Wrt...) {
  detail::require_scalar<Loss>();
  using pass = detail::scalar_loss_pass<Loss, std::remove_cvref_t<Wrt>...>;
  return std::tuple<Loss, decltype(pass::template gradient<std::remove_cvref_t<Wrt>>())...>{};
}

/// Vector-Jacobian product of a non-scalar output: cotangent has the output's shape.
///     auto dx = vjp(y, input<"dy", f32>(shape<Batch, 10>), x);
template <expression Output, expression Cotangent, expression... Wrt>
constexpr auto vjp_of(Output, Cotangent, Wrt...) {
  static_assert(std::is_same_v<shape_t<Output>, shape_t<Cotangent>>,
                "luminal: the cotangent must have the output's shape");
  static_assert(std::is_same_v<typename Output::value_type, typename Cotangent::value_type>,
                "luminal: the cotangent must have the output's element type");
  using pass = reverse_pass<Output, std::remove_cvref_t<Cotangent>, std::remove_cvref_t<Wrt>...>;
  return detail::one_or_tuple(pass::template gradient<std::remove_cvref_t<Wrt>>()...);
}

}  // namespace luminal

// The scan's rule (declared in rules.hpp) runs the reverse pass on the scan's body.
#include "scan.hpp"
