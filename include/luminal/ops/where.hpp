// where(cond, a, b): the one ternary primitive.
#pragma once
#include "binary.hpp"
#include "vector_math.hpp"

namespace luminal {

namespace fn {
struct Where {
  static constexpr std::string_view name = "where";
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = true;
  template <class C, class T, class U> using result = T;
  template <class T> LUMINAL_HD static T apply(bool cond, T a, T b) { return detail::select_value(cond, a, b); }
};
}  // namespace fn

/// Picks a where cond is true, else b; all three broadcast together.
/// `auto relu = where(less_than(x, 0.0_c), 0.0_c, x);`
template <expression C, broadcasts_with<C> A, broadcasts_with<C> B>
  requires broadcasts_with<B, A>  // pairwise is enough: every extent is 1 or the one non-1 value
constexpr auto where(C, A, B) {
  static_assert(std::is_same_v<typename C::value_type, bool>, "luminal: where's condition must be a bool tensor (compare with less_than)");
  using TA = decltype(detail::typed_operand<std::remove_cvref_t<A>, std::remove_cvref_t<B>>());
  using TB = decltype(detail::typed_operand<std::remove_cvref_t<B>, std::remove_cvref_t<A>>());
  if constexpr (!std::is_same_v<typename TA::value_type, typename TB::value_type>) {
    (void)error::element_types_differ<dtype_text<typename TA::value_type>(), dtype_text<typename TB::value_type>()>{};
    return TA{};
  } else if constexpr (!broadcast_rule(shape_t<TA>::dims, shape_t<TB>::dims).ok) {
    (void)error::shapes_cannot_broadcast<shape_t<TA>::text, shape_t<TB>::text>{};
    return TA{};
  } else {
    using SAB = decltype(broadcast_shapes<shape_t<TA>, shape_t<TB>>());
    if constexpr (!broadcast_rule(shape_t<C>::dims, SAB::dims).ok) {
      (void)error::shapes_cannot_broadcast<shape_t<C>::text, SAB::text>{};
      return TA{};
    } else {
      using S = decltype(broadcast_shapes<shape_t<C>, SAB>());
      return typename node_of<Map<fn::Where>, decltype(expand(std::remove_cvref_t<C>{}, S{})), decltype(expand(TA{}, S{})),
                  decltype(expand(TB{}, S{}))>::type{};
    }
  }
}
template <auto A, auto B, auto Cond>  // A and B first: the compiler names shaped<> by position
error::shapes_cannot_be_broadcast_together<Cond, A, B> where(const shaped<Cond>&, const shaped<A>&,
                                                             const shaped<B>&);

}  // namespace luminal
