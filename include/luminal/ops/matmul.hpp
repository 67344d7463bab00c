// Batched matrix product: [..., M, K] x [..., K, N] -> [..., M, N]. The primitive needs
// equal batch extents; `matmul` broadcasts batch axes with expand views first.
#pragma once
#include "../core/errors.hpp"
#include "expand.hpp"
#include "permute.hpp"

namespace luminal {

struct MatMul {
  static constexpr op_kind kind = op_kind::matmul;
  static constexpr std::string_view name = "matmul";
  template <class T, class U>
  using value_type = T;
  template <class A, class B>
  static constexpr auto product_dims() {
    auto dims = A::dims;
    dims[A::rank - 1] = B::dims[B::rank - 1];
    return dims;
  }
  template <class A, class B>
  using shape = shape_from<product_dims<A, B>()>;
};

namespace detail {
template <class S, std::size_t R>
constexpr auto batch_dims_padded() {
  dims_t<R - 2> dims{};
  for (std::size_t k = 0; k < R - 2; ++k) dims[k] = Dim{1};
  for (std::size_t k = 0; k + 2 < S::rank; ++k) dims[k + (R - S::rank)] = S::dims[k];
  return dims;
}
template <class S, std::size_t B>
constexpr auto with_batch(const dims_t<B>& batch) {
  dims_t<B + 2> dims{};
  for (std::size_t k = 0; k < B; ++k) dims[k] = batch[k];
  dims[B] = S::dims[S::rank - 2];
  dims[B + 1] = S::dims[S::rank - 1];
  return dims;
}
}  // namespace detail

namespace detail {
/// The transpose of a permute that keeps the last axis last, equal to permute X.
template <class X, class Axes>
struct split_transpose;
template <class X, std::size_t... K>
struct split_transpose<X, std::index_sequence<K...>> {
  static constexpr auto order = permute_order<typename X::op>::value;
  static constexpr std::size_t R = sizeof...(K);
  using rows = typename node_of<Permute<(K == R - 2 ? order[R - 1] : K == R - 1 ? order[R - 2] : order[K])...>,
                                boost::mp11::mp_first<typename X::children>>::type;
  using type = typename node_of<Permute<int(K == R - 2 ? R - 1 : K == R - 1 ? R - 2 : K)...>, rows>::type;
};
/// A GEMM reads an operand through a transpose of its last two axes, not through another
/// permute. So a permute that moves its input's last axis to second-to-last (attention's
/// k^T: [B, S, H, D] -> [B, H, D, S]) is built as the transpose of a permute that keeps the
/// last axis last: the planner stores that inner permute, a copy that reads and writes whole
/// rows, and the GEMM reads it transposed, where a copy writing at a stride was stored.
template <class X>
constexpr auto gemm_readable(X x) {
  if constexpr (is_permute_node<X>()) {
    constexpr auto order = permute_order<typename X::op>::value;
    constexpr std::size_t R = order.size();
    constexpr bool swap_only = [order] {
      for (std::size_t k = 0; k + 2 < order.size(); ++k)
        if (order[k] != int(k)) return false;
      return true;
    }();
    if constexpr (R >= 3 && order[R - 2] == int(R - 1) && !swap_only)
      return typename split_transpose<X, std::make_index_sequence<R>>::type{};
    else
      return x;
  } else {
    return x;
  }
}

template <class SA, class SB>
constexpr bool matmul_shapes_fit() {
  if constexpr (SA::rank < 2 || SB::rank < 2) {
    return false;
  } else {
    constexpr std::size_t R = SA::rank > SB::rank ? SA::rank : SB::rank;
    return SA::dims[SA::rank - 1] == SB::dims[SB::rank - 2] &&
           broadcast_rule(batch_dims_padded<SA, R>(), batch_dims_padded<SB, R>()).ok;
  }
}
}  // namespace detail

/// Whether [..., M, K] @ [..., K, N] fits: both of rank 2 or more, the left operand's
/// last extent equal to the right's second-to-last, batch axes broadcasting.
template <class B, class A>
concept matmul_operand_for = expression<A> && expression<B> && detail::matmul_shapes_fit<shape_t<A>, shape_t<B>>();

/// Matrix product with NumPy batch broadcasting: `matmul(x, w)` for x [Batch, 784] and
/// w [784, 256]; `matmul(q, transpose(k))` for [B, H, S, D] operands. Floating point only.
template <expression A, matmul_operand_for<A> B>
constexpr auto matmul(A a, B b) {
  using SA = shape_t<A>;
  using SB = shape_t<B>;
  static_assert(std::is_same_v<typename A::value_type, typename B::value_type>, "luminal: matmul operands must have the same element type");
  static_assert(floating_element<typename A::value_type>, "luminal: matmul needs floating-point operands (f32, f64, bf16 or f16)");
  constexpr std::size_t R = SA::rank > SB::rank ? SA::rank : SB::rank;
  constexpr auto rule = broadcast_rule(detail::batch_dims_padded<SA, R>(), detail::batch_dims_padded<SB, R>());
  using TA = shape_from<detail::with_batch<SA>(rule.dims)>;
  using TB = shape_from<detail::with_batch<SB>(rule.dims)>;
  return typename node_of<MatMul, decltype(expand(detail::gemm_readable(a), TA{})),
                         decltype(expand(detail::gemm_readable(b), TB{}))>::type{};
}
/// Chosen when the shapes do not fit (above): never defined, its incomplete return type is
/// the error, at the caller's line (errors.hpp).
template <auto A, auto B>
error::matmul_needs_shapes_like_m_by_k_and_k_by_n<A, B> matmul(const shaped<A>&, const shaped<B>&);

}  // namespace luminal
