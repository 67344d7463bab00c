// Forward mode, at compile time. Walking the outputs' node list from the leaves up, each
// node that depends on a wrt leaf gets a tangent type: the sum over its children of the
// jvp row of its op applied to the child's tangent. As in the reverse pass (reverse.hpp),
// the results are ordinary expressions: they fuse with the primal into the same kernels.
//
// The jvp table has one row per primitive op. Elementwise ops have diagonal Jacobians, so
// their row is the vjp row applied to the tangent (a cast turns the other way); linear
// ops (views, sum, a gather's table) apply themselves to the tangent; matmul is the
// product rule; max follows its maximal elements, evenly over ties.
#pragma once
#include <tuple>

#include "reverse.hpp"

namespace luminal {

/// The jvp table: `jvp_rule<Op>::rule<K, N>(t)` is the tangent of node N due to the
/// tangent t of its child K, or no_gradient.
template <class Op>
struct jvp_rule {
  static_assert(error::always_false<Op::kind>, "luminal: this op has no forward-mode rule (grad/forward.hpp)");
};

template <class F>
struct jvp_rule<Map<F>> {
  template <int K, class N, class T>
  static constexpr auto rule(T t) {
    using From = typename child_t<N, K>::value_type;
    if constexpr (functor_traits<F>::casts) {
      if constexpr (floating_element<From> && floating_element<typename N::value_type>)
        return cast<typename N::value_type>(t);
      else return no_gradient{};
    } else if constexpr (detail::is_custom_functor<F>) {
      return t;  // a rule without jvp(): the tangent of the forward expression
    } else {
      return vjp<Map<F>>::template rule<K, N>(t);
    }
  }
};

namespace detail {
/// A linear op of one child applied to a tangent: the same op (a pad fills with 0).
template <class Op>
struct linear_op {
  using type = Op;
};
template <int Axis, long long Before, long long After, std::uint64_t ValueBits>
struct linear_op<Pad<Axis, Before, After, ValueBits>> {
  using type = Pad<Axis, Before, After, std::bit_cast<std::uint64_t>(0.0)>;
};
}  // namespace detail

template <class Op>
  requires(Op::kind == op_kind::view)
struct jvp_rule<Op> {
  template <int K, class N, class T>
  static constexpr auto rule(T) {
    return typename node_of<typename detail::linear_op<Op>::type, T>::type{};
  }
};

template <class F, int Axis>
struct jvp_rule<Reduce<F, Axis>> {
  template <int K, class N, class T>
  static constexpr auto rule(T t) {
    if constexpr (std::is_same_v<F, fn::SumReduce>) {
      return typename node_of<Reduce<F, Axis>, T>::type{};
    } else {
      // As torch.amax's forward AD: the mean of the tangents at the maximal elements.
      using x = child_t<N, 0>;
      using V = typename N::value_type;
      auto is_max = cast<V>(equal(x{}, expand(N{}, shape_t<x>{})));
      auto along = [](auto e) { return typename node_of<Reduce<fn::SumReduce, Axis>, decltype(e)>::type{}; };
      return along(t * is_max) * recip(along(is_max));
    }
  }
};

template <>
struct jvp_rule<MatMul> {
  template <int K, class N, class T>
  static constexpr auto rule(T t) {
    if constexpr (K == 0) return matmul(t, child_t<N, 1>{});
    else return matmul(child_t<N, 0>{}, t);
  }
};

template <>
struct jvp_rule<Gather> {
  template <int K, class N, class T>
  static constexpr auto rule(T t) {
    if constexpr (K == 1) return no_gradient{};
    else return gather(t, child_t<N, 1>{});
  }
};

template <class R, int Axis, bool Reverse>
struct jvp_rule<Cumulative<R, Axis, Reverse>> {
  /// cumsum's tangent is the cumsum of t; the others' a linear recurrence (ops/cumulative.hpp).
  template <int K, class N, class T>
  static constexpr auto rule(T t) {
    if constexpr (floating_element<typename N::value_type>) return detail::cumulative_tangent<K, N>(t);
    else return no_gradient{};
  }
};

template <class Body>
struct jvp_rule<Scan<Body>> {
  /// A loop of the body's forward mode along the carries, per child with a tangent.
  template <int K, class N, class T>
  static constexpr auto rule(T) {
    if constexpr (!floating_element<typename child_t<N, K>::value_type>) return no_gradient{};
    else
      return typename boost::mp11::mp_apply<node_of, boost::mp11::mp_append<boost::mp11::mp_list<ScanTangent<Body, K>, N>,
                                                                            boost::mp11::mp_drop_c<typename N::children, 1>,
                                                                            boost::mp11::mp_list<T>>>::type{};
  }
};

namespace detail {
template <class Pass, int I>
struct tangent_of;

template <class Pass, int I, int K>
struct tangent_contribution {
  using N = node_at<typename Pass::nodes, I>;
  using Tc = typename tangent_of<Pass, Pass::table[I].children[K]>::type;
  static constexpr auto get() {
    if constexpr (std::is_same_v<Tc, no_gradient>) {
      return no_gradient{};
    } else {
      auto t = jvp_rule<typename N::op>::template rule<K, N>(Tc{});
      if constexpr (!std::is_same_v<decltype(t), no_gradient>)
        static_assert(std::is_same_v<shape_t<decltype(t)>, shape_t<N>>,
                      "luminal: internal error: a forward-mode rule produced the wrong shape");
      return t;
    }
  }
  using type = decltype(get());
};

/// The tangent T of node X, or zeros of X's shape where it has none (no_gradient).
template <class T, class X>
constexpr auto tangent_or_zeros() {
  using V = typename X::value_type;
  if constexpr (std::is_same_v<T, no_gradient>) return expand(Const<V, V(0)>{}, shape_t<X>{});
  else return T{};
}
template <class Pass, class N, class... X>
constexpr auto custom_tangent(boost::mp11::mp_list<X...>) {
  using Out = boost::mp11::mp_first<typename N::children>;
  // The rule is given a tangent for every input: zeros for one that does not vary.
  return N::op::functor::rule::jvp(
      Out{}, X{}...,
      tangent_or_zeros<typename tangent_of<Pass, node_index<typename Pass::nodes, X>::value>::type, X>()...);
}

/// Folds tangents with +, skipping no_gradient.
template <class E = no_gradient>
struct tangent_sum {
  E value;
};
using no_tangent_sum = tangent_sum<>;
template <class E, class T>
constexpr auto operator+(tangent_sum<E> acc, T t) {
  return tangent_sum<decltype(add_cotangents(acc.value, t))>{add_cotangents(acc.value, t)};
}

template <class Pass, int I, std::size_t... K>
constexpr auto summed_tangents(std::index_sequence<K...>) {
  using N = node_at<typename Pass::nodes, I>;
  if constexpr (custom_jvp_node<N>) {
    auto t = custom_tangent<Pass, N>(typename N::op::functor::inputs{});
    static_assert(std::is_same_v<shape_t<decltype(t)>, shape_t<N>>,
                  "luminal: a custom op's jvp() must return the output's shape");
    return t;
  } else {
    return (no_tangent_sum{} + ... + typename tangent_contribution<Pass, I, int(K)>::type{}).value;
  }
}

template <class Pass, int I>
struct summed_tangents_of {
  using type = decltype(summed_tangents<Pass, I>(std::make_index_sequence<std::size_t(Pass::table[I].child_count)>{}));
};

// As cotangent_of in reverse.hpp, a class template per node: only the chosen branch's
// ::type is instantiated.
template <class Pass, int I>
struct tangent_of {
  static constexpr int wrt = Pass::wrt_position(I);
  using type = typename std::conditional_t<
      (wrt >= 0), std::tuple_element<std::size_t(wrt < 0 ? 0 : wrt), typename Pass::tangents>,
      std::conditional_t<Pass::varies[I], summed_tangents_of<Pass, I>, std::type_identity<no_gradient>>>::type;
};
}  // namespace detail

/// The forward pass over Outputs, with tangent Tangents[k] for leaf Wrt[k].
template <class Outputs, class Wrt, class Tangents>
struct forward_pass;
template <class... Outputs, class... Wrt, class... Tangents>
struct forward_pass<std::tuple<Outputs...>, std::tuple<Wrt...>, std::tuple<Tangents...>> {
  using nodes = topo_nodes<Outputs...>;
  static constexpr auto table = graph_table<nodes>;
  static constexpr std::size_t node_count = table.size();
  using tangents = std::tuple<Tangents...>;
  static constexpr std::array<int, sizeof...(Wrt)> wrt_ids{node_index<nodes, Wrt>::value...};

  static constexpr int wrt_position(int id) {
    for (std::size_t k = 0; k < wrt_ids.size(); ++k)
      if (wrt_ids[k] == id) return int(k);
    return -1;
  }
  /// varies[i]: node i depends on a wrt leaf, so its tangent may be nonzero.
  static constexpr auto varies = [] {
    std::array<bool, node_count + 1> on_path{};
    for (std::size_t i = 0; i < node_count; ++i) {
      on_path[i] = wrt_position(int(i)) >= 0;
      for (int k = 0; k < table[i].child_count; ++k) on_path[i] = on_path[i] || on_path[table[i].children[k]];
    }
    return on_path;
  }();

  /// The tangent of node O (zeros when it does not depend on a wrt leaf).
  template <class O>
  static constexpr auto tangent() {
    return detail::tangent_or_zeros<typename detail::tangent_of<forward_pass, node_index<nodes, O>::value>::type, O>();
  }
};

namespace detail {
template <class... E>
constexpr void check_tangents() {
  constexpr std::size_t n = sizeof...(E) / 2;
  using all = std::tuple<E...>;
  [&]<std::size_t... K>(std::index_sequence<K...>) {
    static_assert(((std::is_same_v<shape_t<std::tuple_element_t<K, all>>, shape_t<std::tuple_element_t<K + n, all>>>) && ...),
                  "luminal: jvp() needs each tangent in the shape of its leaf");
    static_assert(((std::is_same_v<typename std::tuple_element_t<K, all>::value_type,
                                   typename std::tuple_element_t<K + n, all>::value_type>) && ...),
                  "luminal: jvp() needs each tangent in the element type of its leaf");
    static_assert((floating_element<typename std::tuple_element_t<K, all>::value_type> && ...),
                  "luminal: jvp() varies only f32 or f64 leaves");
  }(std::make_index_sequence<n>{});
}
template <class Outputs, class... E, std::size_t... W, std::size_t... T>
constexpr auto jvp_of(std::index_sequence<W...>, std::index_sequence<T...>) {
  using all = std::tuple<std::remove_cvref_t<E>...>;
  constexpr std::size_t n = sizeof...(W);
  return forward_pass<Outputs, std::tuple<std::tuple_element_t<W, all>...>, std::tuple<std::tuple_element_t<T + n, all>...>>{};
}
template <class... O>
constexpr auto as_outputs(std::tuple<O...>) { return std::tuple<std::remove_cvref_t<O>...>{}; }
template <expression O>
constexpr auto as_outputs(O) { return std::tuple<std::remove_cvref_t<O>>{}; }
}  // namespace detail

/// Forward-mode derivative (Jacobian-vector product) of `output` (one expression or a
/// std::tuple of them) along tangents for leaves: the first half of the arguments after
/// `output` are the leaves, the second half their tangents, each of its leaf's shape.
/// Returns the output's tangent (a tuple for a tuple of outputs), an ordinary expression.
///
///     auto dy = jvp(y, x, input<"dx", f32>(shape<Batch, 3>));   // d y / d x . dx
///     auto [dy, dz] = jvp(std::tuple{y, z}, w, b, vw, vb);
template <class Output, expression... LeavesThenTangents>
constexpr auto jvp(Output output, LeavesThenTangents...) {
  static_assert(sizeof...(LeavesThenTangents) % 2 == 0 && sizeof...(LeavesThenTangents) > 0,
                "luminal: jvp(output, leaves..., tangents...) needs one tangent per leaf");
  detail::check_tangents<std::remove_cvref_t<LeavesThenTangents>...>();
  constexpr std::size_t n = sizeof...(LeavesThenTangents) / 2;
  using Outputs = decltype(detail::as_outputs(output));
  using pass = decltype(detail::jvp_of<Outputs, LeavesThenTangents...>(std::make_index_sequence<n>{},
                                                                      std::make_index_sequence<n>{}));
  if constexpr (expression<Output>) {
    return pass::template tangent<std::remove_cvref_t<Output>>();
  } else {
    return [&]<class... O>(std::tuple<O...>) {
      return std::tuple{pass::template tangent<O>()...};
    }(Outputs{});
  }
}

/// Hessian-vector product of a scalar loss, forward over reverse: the tangent of
/// grad(loss, wrt) along v. Leaves first, then one vector per leaf, as jvp():
///
///     auto hv = hvp(loss, w, input<"v", f32>(shape<8>));
///     auto [hw, hb] = hvp(loss, w, b, vw, vb);
template <expression Loss, expression... LeavesThenVectors>
constexpr auto hvp(Loss loss, LeavesThenVectors... args) {
  constexpr std::size_t n = sizeof...(LeavesThenVectors) / 2;
  static_assert(sizeof...(LeavesThenVectors) % 2 == 0 && n > 0, "luminal: hvp(loss, leaves..., vectors...) needs one vector per leaf");
  auto all = std::tuple{args...};
  return [&]<std::size_t... W>(std::index_sequence<W...>) {
    auto g = grad(loss, std::get<W>(all)...);
    return jvp(g, args...);
  }(std::make_index_sequence<n>{});
}

/// The Hessian of a scalar loss with respect to one leaf of static shape with n elements
/// (meant for small n): an [n, n] expression, row i the Hessian-vector product with the
/// i-th unit vector. Each row is its own forward pass, so the graph grows with n.
///
///     auto h = hessian(loss, param<"w", f64>(shape<4>));   // Shape<4, 4>
template <expression Loss, expression W>
constexpr auto hessian(Loss loss, W w) {
  using S = shape_t<W>;
  using T = typename W::value_type;
  constexpr long long n = [] {
    long long count = 1;
    for (const Dim& d : S::dims) count *= d.is_static() ? d.offset : -1;
    return count;
  }();
  static_assert(n > 0, "luminal: hessian() needs a leaf of static shape; use hvp() for symbolic extents");
  static_assert(n <= 64, "luminal: hessian() builds one graph per row and is meant for at most 64 elements; use hvp()");
  auto g = reshape(grad(loss, w), Shape<n>{});
  return [&]<long long... I>(std::integer_sequence<long long, I...>) {
    auto row = [&]<long long R>(std::integral_constant<long long, R>) {
      auto unit = reshape(cast<T>(equal(iota<0, i32>(Shape<n>{}), c<R>)), S{});
      return jvp(g, w, unit);
    };
    return stack<0>(row(std::integral_constant<long long, I>{})...);
  }(std::make_integer_sequence<long long, n>{});
}

}  // namespace luminal
