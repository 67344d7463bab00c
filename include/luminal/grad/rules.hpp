// The vector-Jacobian rules: one row per primitive op. `vjp<Op>::rule<K, N>(g)` is the
// cotangent of child K of node N given the cotangent g of N, or no_gradient. Composites
// have no rows: the reverse pass differentiates the primitives they are made of.
#pragma once
#include <numbers>

#include "../core/op_facts.hpp"
#include "../ops/composite.hpp"
#include "../ops/cumulative.hpp"
#include "../ops/custom.hpp"
#include "../ops/flip.hpp"
#include "../ops/gather.hpp"
#include "../ops/iota.hpp"
#include "../ops/matmul.hpp"
#include "../ops/permute.hpp"
#include "../ops/reduce.hpp"
#include "../ops/scan.hpp"
#include "../ops/slice.hpp"
#include "../ops/stop_gradient.hpp"
#include "../ops/unfold.hpp"

namespace luminal {

/// Marks a child that receives no gradient (integer data, comparisons, indices).
struct no_gradient {};

template <class N, int K>
using child_t = boost::mp11::mp_at_c<typename N::children, K>;

/// The rule table. A primitive without a row is a compile error naming the op.
template <class Op>
struct vjp {
  static_assert(error::always_false<Op::kind>, "luminal: this op has no gradient rule (grad/rules.hpp)");
};

template <class F>
struct vjp<Map<F>> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    using T = typename N::value_type;
    using x = child_t<N, 0>;
    if constexpr (std::is_same_v<F, fn::Add>) return g;
    else if constexpr (std::is_same_v<F, fn::Mul>) return g * child_t<N, 1 - K>{};
    else if constexpr (std::is_same_v<F, fn::Neg>) return neg(g);
    else if constexpr (std::is_same_v<F, fn::Recip>) return neg(g * N{} * N{});  // d(1/x) = -(1/x)^2
    else if constexpr (std::is_same_v<F, fn::Exp2>) return g * N{} * c<std::numbers::ln2>;
    else if constexpr (std::is_same_v<F, fn::Log2>) return g * recip(x{}) * c<1.0 / std::numbers::ln2>;
    else if constexpr (std::is_same_v<F, fn::Sin>) return g * cos(x{});
    else if constexpr (std::is_same_v<F, fn::Cos>) return neg(g * sin(x{}));
    else if constexpr (std::is_same_v<F, fn::Sqrt>) return g * recip(N{}) * c<0.5>;  // inf at 0, as torch
    else if constexpr (std::is_same_v<F, fn::Erf>) return g * exp(neg(x{} * x{})) * c<std::numbers::inv_sqrtpi * 2>;
    else if constexpr (std::is_same_v<F, fn::Erfc>) return g * exp(neg(x{} * x{})) * c<-std::numbers::inv_sqrtpi * 2>;
    else if constexpr (std::is_same_v<F, fn::Log1p>) return g * recip(x{} + c<1>);
    else if constexpr (std::is_same_v<F, fn::Expm1>) return g * (N{} + c<1>);
    else if constexpr (functor_traits<F>::rounds) return no_gradient{};  // piecewise constant
    else if constexpr (std::is_same_v<F, fn::Pow>) {
      // As torch.pow: d/da = b a^(b-1), 0 where b == 0; d/db = a^b log a, 0 where a == 0
      // and b >= 0 (where log a is -inf but a^b does not move).
      using b = child_t<N, 1>;
      if constexpr (K == 0 && detail::constant_value<b>::known) {
        constexpr double e = detail::constant_value<b>::value;
        if constexpr (e == 0) return no_gradient{};
        else return g * pow(x{}, c<e - 1>) * c<e>;
      } else if constexpr (K == 0) {
        return where(equal(b{}, c<0>), c<0>, g * b{} * pow(x{}, b{} - c<1>));
      } else {
        auto d = g * N{} * log(x{});
        return where(equal(x{}, c<0>), where(less_than(b{}, c<0>), d, c<0>), d);
      }
    } else if constexpr (std::is_same_v<F, fn::Max>) {
      using self = child_t<N, K>;
      using other = child_t<N, 1 - K>;
      // Against a constant, as torch.clamp's bound (torch 2.x): x takes g where it is
      // above the constant, and none at the tie (so relu'(0) = 0, clamp'(bound) = 0).
      // The test reads the result, not x (c < max(x, c) exactly where c < x, NaN
      // included), as torch's threshold_backward does: the backward pass then keeps the
      // activation, which the next layer keeps anyway, and x (a bias add) fuses into it.
      if constexpr (detail::constant_value<other>::known) {
        return where(less_than(other{}, N{}), g, c<0>);
      } else {
        // Between tensors, as torch.maximum: the larger operand takes g, a tie splits it evenly.
        auto larger = cast<T>(less_than(other{}, self{}));
        auto tie = cast<T>(equal(self{}, other{}));
        return g * (larger + tie * c<0.5>);
      }
    } else if constexpr (std::is_same_v<F, fn::Where>) {
      using cond = child_t<N, 0>;
      if constexpr (K == 0) return no_gradient{};
      else if constexpr (K == 1) return where(cond{}, g, c<0>);
      else return where(cond{}, c<0>, g);
    } else if constexpr (functor_traits<F>::casts) {
      using From = typename x::value_type;
      if constexpr (floating_element<From> && floating_element<T>) return cast<From>(g);
      else return no_gradient{};
    } else if constexpr (std::is_same_v<F, fn::StopGradient>) {
      return no_gradient{};
    } else if constexpr (detail::is_custom_functor<F>) {
      return g;  // a custom op without vjp(): through its forward expression
    } else if constexpr (std::is_same_v<F, fn::Mod>) {
      // As torch.fmod: fmod(a, b) = a - trunc(a / b) b, so d/da = 1 and d/db = -trunc(a / b),
      // with trunc(a / b) = (a - fmod(a, b)) / b. Integer mod has no gradient.
      if constexpr (!floating_element<T>) return no_gradient{};
      else if constexpr (K == 0) return g;
      else return neg(g * (x{} - N{}) * recip(child_t<N, 1>{}));
    } else {
      // less_than: bool-valued; no gradient.
      static_assert(std::is_same_v<F, fn::LessThan>, "luminal: this elementwise op has no gradient rule (grad/rules.hpp)");
      return no_gradient{};
    }
  }
};

namespace detail {
/// A max over several axes is a chain of one-axis max reductions (reduce.hpp).
template <class X>
struct max_link : std::false_type {};
template <computed_node X>
  requires std::is_same_v<typename X::op::functor, fn::MaxReduce>
struct max_link<X> : std::true_type {
  static constexpr int axis = X::op::axis;
  using input = boost::mp11::mp_first<typename X::children>;
};
/// For each element of X, how many elements at the bottom of X's max chain tie with it
/// (reach it as maxima): 1 when X is not a max reduction.
template <class X>
constexpr auto max_tie_count() {
  if constexpr (!max_link<X>::value) {
    return c<1>;
  } else {
    using Y = typename max_link<X>::input;
    auto ties = cast<typename X::value_type>(equal(Y{}, expand(X{}, shape_t<Y>{}))) * max_tie_count<Y>();
    return sum<max_link<X>::axis>(ties, keepdim);
  }
}
}  // namespace detail

template <class F, int Axis>
struct vjp<Reduce<F, Axis>> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    using x = child_t<N, 0>;
    using In = shape_t<x>;
    if constexpr (std::is_same_v<F, fn::SumReduce>) {
      return expand(g, In{});
    } else {
      // As torch.amax: the maximal elements share g evenly, over all reduced axes at once.
      // Each link of a several-axis chain weighs its tied elements by the ties below them
      // (weight = is_max when x is not itself a max), so the chain gives every tied
      // element of the input g / (total ties), not g split axis by axis.
      using T = typename N::value_type;
      if constexpr (detail::max_link<x>::value) {
        auto weight = cast<T>(equal(x{}, expand(N{}, In{}))) * detail::max_tie_count<x>();
        return expand(g * recip(sum<Axis>(weight, keepdim)), In{}) * weight;
      } else {
        // One link (a pool's window): the tie mask is a comparison both of its readers
        // recompute from x and the maximum, which they read anyway, rather than a float
        // tensor of the input's size written once and read twice. Where a window holds a
        // NaN nothing ties and the count is 0: v * 0 keeps the NaN the product gave.
        auto is_max = equal(x{}, expand(N{}, In{}));
        auto v = expand(g * recip(sum<Axis>(cast<T>(is_max), keepdim)), In{});
        return where(is_max, v, v * c<0>);
      }
    }
  }
};

template <>
struct vjp<MatMul> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    if constexpr (K == 0) return matmul(g, transpose(child_t<N, 1>{}));
    else return matmul(transpose(child_t<N, 0>{}), g);
  }
};

template <int... Order>
struct vjp<Permute<Order...>> {
  static constexpr std::array<int, sizeof...(Order)> order{Order...};
  /// Where axis `axis` of the input went in the output.
  static constexpr int position(int axis) {
    int p = 0;
    while (order[p] != axis) ++p;
    return p;
  }
  template <std::size_t... I>
  static constexpr auto inverse(std::index_sequence<I...>) {
    return Permute<position(int(I))...>{};
  }
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    using Inverse = decltype(inverse(std::make_index_sequence<sizeof...(Order)>{}));
    if constexpr (is_matrix_transpose<G>()) {
      // (A B)^T = B^T A^T: the GEMM writes the transposed product (a weight's gradient in
      // its own layout), and no kernel copies it into place.
      using A = boost::mp11::mp_first<typename G::children>;
      using B = boost::mp11::mp_second<typename G::children>;
      return matmul(transpose(B{}), transpose(A{}));
    } else {
      return detail::permuted<Inverse>(g);
    }
  }
  /// Whether this permute swaps the axes of a matrix and G is a product of two matrices.
  template <class G>
  static constexpr bool is_matrix_transpose() {
    if constexpr (sizeof...(Order) == 2 && node_with_op<G, MatMul>) return order[0] == 1;
    else return false;
  }
};

template <shape_type Target>
struct vjp<Reshape<Target>> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) { return reshape(g, shape_t<child_t<N, 0>>{}); }
};

template <int Axis>
struct vjp<Flip<Axis>> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) { return flip<Axis>(g); }
};

template <int Axis, long long Begin, long long End>
struct vjp<Slice<Axis, Begin, End>> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    constexpr Dim extent = shape_t<child_t<N, 0>>::dims[Axis];
    constexpr long long after = End <= 0 ? -End : extent.offset - End;
    return pad<Axis, Begin, after>(g);
  }
};

template <int Axis, long long Before, long long After, std::uint64_t ValueBits>
struct vjp<Pad<Axis, Before, After, ValueBits>> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    constexpr Dim extent = shape_t<child_t<N, 0>>::dims[Axis];
    if constexpr (extent.is_static()) return slice<Axis, Before, Before + extent.offset>(g);
    else return slice<Axis, Before, -After>(g);
  }
};

/// A pad by symbolic amounts (concat along a symbolic axis): the same pad by the negated
/// amounts, which removes them from g.
template <int Axis, Dim Before, Dim After>
struct vjp<PadExtents<Axis, Before, After>> {
  template <int K, class N, class G>
  static constexpr auto rule(G) {
    return typename node_of<PadExtents<Axis, negated(Before), negated(After)>, G>::type{};
  }
};

template <int Axis, long long Size, long long Stride, long long Dilation>
struct vjp<Unfold<Axis, Size, Stride, Dilation>> {
  /// Each window's elements added back where they were read: fold (ops/unfold.hpp).
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    return fold<Axis, shape_t<child_t<N, 0>>::dims[Axis].offset, Stride, Dilation>(g);
  }
};

namespace detail {
/// Sums g over the axes an expand created or stretched, back to shape In.
template <class In, expression G>
constexpr auto unbroadcast(G g) {
  using Out = shape_t<G>;
  constexpr std::size_t lead = Out::rank - In::rank;
  constexpr unsigned long long stretched = [] {
    unsigned long long mask = 0;
    for (std::size_t k = 0; k < In::rank; ++k)
      if (In::dims[k] == Dim{1} && !(Out::dims[k + lead] == Dim{1})) mask |= 1ull << (k + lead);
    return mask;
  }();
  constexpr unsigned long long leading = lead == 0 ? 0ull : (1ull << lead) - 1;
  auto kept = reduce_kept<fn::SumReduce, stretched | leading>(g);
  return reshape(kept, In{});
}
}  // namespace detail

template <shape_type Target>
struct vjp<Expand<Target>> {
  template <int K, class N, class G>
  static constexpr auto rule(G g) { return detail::unbroadcast<shape_t<child_t<N, 0>>>(g); }
};

template <>
struct vjp<Gather> {
  /// The table's cotangent is a scatter-add, written as onehot(ids)^T @ g so that it
  /// needs no scatter primitive: exact, and a GEMM, at O(ids * vocabulary) cost.
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    if constexpr (K == 1) {
      return no_gradient{};
    } else {
      using Table = child_t<N, 0>;
      using Index = child_t<N, 1>;
      using T = typename N::value_type;
      constexpr auto rows = [] { Dim n{1}; for (const Dim& d : shape_t<Index>::dims) n = n * d; return n; }();
      constexpr auto row_size = [] { Dim n{1}; for (std::size_t k = 1; k < shape_t<Table>::rank; ++k) n = n * shape_t<Table>::dims[k]; return n; }();
      constexpr Dim vocabulary = shape_t<Table>::dims[0];
      auto ids = reshape(Index{}, Shape<rows, 1>{});
      auto onehot = cast<T>(equal(ids, iota<1, i32>(Shape<rows, vocabulary>{})));
      auto flat_g = reshape(g, Shape<rows, row_size>{});
      return reshape(matmul(transpose(onehot), flat_g), shape_t<Table>{});
    }
  }
};

template <class R, int Axis, bool Reverse>
struct vjp<Cumulative<R, Axis, Reverse>> {
  /// cumsum, cumprod, logcumsumexp, linear_recurrence: scans walked the other way, and
  /// maps (ops/cumulative.hpp). Integer running sums have no gradient.
  template <int K, class N, class G>
  static constexpr auto rule(G g) {
    if constexpr (floating_element<typename N::value_type>) return detail::cumulative_cotangent<K, N>(g);
    else return no_gradient{};
  }
};

namespace detail {
template <int K, class N, class G>
constexpr auto scan_cotangent(G g);  // grad/scan.hpp: it runs the reverse pass on the body
}  // namespace detail
template <class Body>
struct vjp<Scan<Body>> {
  /// A sequential loop for the carries' cotangents, then the body over every step at once.
  template <int K, class N, class G>
  static constexpr auto rule(G g) { return detail::scan_cotangent<K, N>(g); }
};

}  // namespace luminal
