// The reverse rule of a scan (ops/scan.hpp), in two parts:
// - a sequential loop (ScanCarryCotangent) for the cotangent of every carry: the loss's
//   own cotangent of that carry plus what reaches it through the later steps;
// - given those, every step's input and the parameters get their cotangents from the
//   body applied to all steps at once (the carries before each step [L, carry...], the
//   sequence [L, ...]), whose reverse pass sums a parameter's cotangent over the steps as
//   broadcasting does. That part is ordinary graph: it fuses, and runs as GEMMs.
// The body is differentiated over placeholder leaves (ops/scan.hpp), which are then
// replaced by the nodes they stand for (core/replace_nodes.hpp).
#pragma once
#include <boost/mp11/algorithm.hpp>

#include "../core/replace_nodes.hpp"
#include "../ops/gather.hpp"
#include "../ops/slice.hpp"
#include "reverse.hpp"

namespace luminal {

namespace detail {
template <class Body, class Carries, class Xs, class Cotangents, class... P>
struct scan_over_steps {
  using out = scan_body_output<Body, Carries, Xs, P...>;
  static_assert(std::is_same_v<shape_t<out>, shape_t<Cotangents>>,
                "luminal: a scan's body, given every step at once (an extra leading axis on the carry and the "
                "input), must return every step's carry: index axes from the end inside the body (transpose<-1, -2>, "
                "sum<-1>), so that leading axes are a batch");
  /// d(all steps) / d(W) for placeholder W, given every carry's cotangent.
  template <class W>
  using cotangent = decltype(vjp_of(out{}, Cotangents{}, W{}));
};

template <class... P>
struct with_parameters {
  template <int K, class N, class G, class Body, class Xs, class SC, std::size_t... I>
  static constexpr auto rule(std::index_sequence<I...>) {
    using T = typename N::value_type;
    using CarryCotangents = typename node_of<ScanCarryCotangent<Body>, G, N, Xs, P...>::type;  // [L + 1, carry...]
    if constexpr (K == 0) {
      return gather(CarryCotangents{}, Const<i32, 0>{});  // the initial carry's row
    } else {
      constexpr Dim steps = shape_t<Xs>::dims[0];
      constexpr long long end = steps.is_static() ? steps.offset : -1;
      using Carries = scan_carry_leaf<T, SC>;
      using Steps = scan_step_leaf<typename Xs::value_type, shape_t<Xs>>;
      using Cotangents = scan_cotangent_leaf<T, SC>;
      using over = scan_over_steps<Body, Carries, Steps, Cotangents, P...>;
      // Step t reads carry t and receives the cotangent of carry t + 1.
      using Before = decltype(slice<0, 0, end>(N{}));
      using After = decltype(slice<0, 1, end == -1 ? 0 : end + 1>(CarryCotangents{}));
      // The body's own values that the stored carries hold (a concat's parts) are read
      // from the carries after each step, not recomputed from the carries before.
      using StatesAfter = decltype(slice<0, 1, end == -1 ? 0 : end + 1>(N{}));
      using Leaves = boost::mp11::mp_list<Carries, Steps, Cotangents, scan_parameter_leaf<I, P>...>;
      using W = boost::mp11::mp_at_c<Leaves, std::size_t(K == 1 ? 1 : K + 1)>;
      using Stored = with_stored_parts<typename over::template cotangent<W>, typename over::out, StatesAfter>;
      return replace_nodes<Stored, Leaves, boost::mp11::mp_list<Before, Xs, After, P...>>{};
    }
  }
};

template <int K, class N, class G>
constexpr auto scan_cotangent(G) {
  using Child = child_t<N, K>;
  if constexpr (!floating_element<typename Child::value_type>) {
    return no_gradient{};
  } else {
    using Xs = child_t<N, 1>;
    using SC = typename steps_then_carry<shape_t<child_t<N, 0>>, shape_t<Xs>::dims[0]>::type;  // [L, carry...]
    using Params = boost::mp11::mp_drop_c<typename N::children, 2>;
    return boost::mp11::mp_apply<with_parameters, Params>::template rule<K, N, G, typename N::op::body, Xs, SC>(
        std::make_index_sequence<boost::mp11::mp_size<Params>::value>{});
  }
}
}  // namespace detail

}  // namespace luminal
