// Primitive binary ops: add mul mod less_than max, with NumPy broadcasting made explicit
// as expand views so that every Map node has same-shape children.
#pragma once
#include "expand.hpp"
#include "map.hpp"
#include "vector_math.hpp"
#include "simplify.hpp"

namespace luminal {

namespace fn {
struct Add : same_type_result {
  static constexpr std::string_view name = "add";
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T a, T b) { return a + b; }
};
struct Mul : same_type_result {
  static constexpr std::string_view name = "mul";
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T a, T b) { return a * b; }
};
/// Remainder with the sign of the dividend (C's fmod / %), as torch.fmod.
struct Mod : same_type_result {
  static constexpr std::string_view name = "mod";
  static constexpr int cost = 4;
  static constexpr bool floating_only = false, takes_bool = false;
  template <class T> LUMINAL_HD static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) { using std::fmod; return fmod(a, b); }
    // x mod 0 is defined as 0; x mod -1 is 0, and INT_MIN % -1 would trap (SIGFPE) on x86.
    else return (b == 0 || b == T(-1)) ? T(0) : T(a % b);
  }
};
struct LessThan {
  static constexpr std::string_view name = "less_than";
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = true;
  template <class T, class U> using result = bool;
  template <class T> LUMINAL_HD static bool apply(T a, T b) { return a < b; }
};
/// Maximum that propagates NaN, as torch.maximum.
struct Max : same_type_result {
  static constexpr std::string_view name = "max";
  static constexpr int cost = 1;
  static constexpr bool floating_only = false, takes_bool = true;
  // Two selects rather than a short-circuit ||, a quiet comparison and blends
  // (vector_math.hpp): GCC then vectorizes the fused loop.
  template <class T> LUMINAL_HD static T apply(T a, T b) {
    T larger = detail::select_value(detail::quiet_greater(a, b), a, b);
    return detail::select_value(a != a, a, larger);
  }
};
}  // namespace fn

namespace detail {
/// A literal operand takes the element type of the other one.
template <class Self, class Other>
constexpr auto typed_operand() {
  if constexpr (is_literal<Self>::value) {
    using T = std::conditional_t<is_literal<Other>::value, f64, typename Other::value_type>;
    return Const<T, static_cast<T>(Self::value)>{};
  } else {
    return Self{};
  }
}
}  // namespace detail

/// The shape both operands broadcast to; a readable compile error otherwise.
template <class SA, class SB>
constexpr auto broadcast_shapes() {
  constexpr auto rule = broadcast_rule(SA::dims, SB::dims);
  if constexpr (!rule.ok) {
    (void)error::shapes_cannot_broadcast<SA::text, SB::text>{};
    return SA{};
  } else {
    return shape_from<rule.dims>{};
  }
}

template <class F, expression A, expression B>
constexpr auto make_binary(A, B) {
  using TA = decltype(detail::typed_operand<std::remove_cvref_t<A>, std::remove_cvref_t<B>>());
  using TB = decltype(detail::typed_operand<std::remove_cvref_t<B>, std::remove_cvref_t<A>>());
  // Each failure stops here, so the user sees one error, not a cascade.
  if constexpr (!std::is_same_v<typename TA::value_type, typename TB::value_type>) {
    (void)error::element_types_differ<dtype_text<typename TA::value_type>(), dtype_text<typename TB::value_type>()>{};
    return TA{};
  } else if constexpr (!broadcast_rule(shape_t<TA>::dims, shape_t<TB>::dims).ok) {
    (void)error::shapes_cannot_broadcast<shape_t<TA>::text, shape_t<TB>::text>{};
    return TA{};
  } else {
    detail::check_operand_type<F, typename TA::value_type>();
    using S = decltype(broadcast_shapes<shape_t<TA>, shape_t<TB>>());
    using Simpler = decltype(detail::simplify_binary<F, TA, TB, S>());
    if constexpr (!std::is_same_v<Simpler, not_simplified>) return Simpler{};
    else return typename node_of<Map<F>, decltype(expand(TA{}, S{})), decltype(expand(TB{}, S{}))>::type{};
  }
}

/// Whether B broadcasts against A: aligned from the right, each pair of extents equal or
/// one of them 1 (NumPy's rule). Every elementwise op of two operands requires it.
template <class B, class A>
concept broadcasts_with = expression<A> && expression<B> &&
                          broadcast_rule(shape_t<A>::dims, shape_t<B>::dims).ok;

/// Declares the overload of NAME chosen when its operands do not broadcast, so that the
/// compiler's first error is at the caller's line and names both shapes (errors.hpp). The
/// real overload wins whenever it is viable: it takes its operands exactly, this one
/// through a base class. Never defined: its incomplete return type is the error.
#define LUMINAL_REFUSE_UNBROADCASTABLE(NAME)                                                      \
  template <auto A, auto B>                                                                     \
  error::shapes_cannot_be_broadcast_together<A, B> NAME(const shaped<A>&, const shaped<B>&);

/// a + b with broadcasting. `auto y = x + bias;`
template <expression A, broadcasts_with<A> B> constexpr auto operator+(A a, B b) { return make_binary<fn::Add>(a, b); }
/// a * b with broadcasting.
template <expression A, broadcasts_with<A> B> constexpr auto operator*(A a, B b) { return make_binary<fn::Mul>(a, b); }
/// Remainder with the sign of a (fmod); integer division by zero gives 0.
template <expression A, broadcasts_with<A> B> constexpr auto mod(A a, B b) { return make_binary<fn::Mod>(a, b); }
template <expression A, broadcasts_with<A> B> constexpr auto operator%(A a, B b) { return mod(a, b); }
/// a < b as bool, with broadcasting.
template <expression A, broadcasts_with<A> B> constexpr auto less_than(A a, B b) { return make_binary<fn::LessThan>(a, b); }
/// Elementwise maximum (NaN propagates).
template <expression A, broadcasts_with<A> B> constexpr auto max(A a, B b) { return make_binary<fn::Max>(a, b); }
LUMINAL_REFUSE_UNBROADCASTABLE(operator+)
LUMINAL_REFUSE_UNBROADCASTABLE(operator*)
LUMINAL_REFUSE_UNBROADCASTABLE(mod)
LUMINAL_REFUSE_UNBROADCASTABLE(operator%)
LUMINAL_REFUSE_UNBROADCASTABLE(less_than)
LUMINAL_REFUSE_UNBROADCASTABLE(max)

}  // namespace luminal
