// scan: a state carried along the leading axis of a sequence inside one compiled program,
// as jax.lax.scan. The body is a stateless callable that builds the step as an expression:
//
//     struct rnn_step {   // h' = tanh(x_t + h W^T)
//       template <expression H, expression X, expression W>
//       constexpr auto operator()(H h, X x, W w) const { return tanh(x + matmul(h, transpose<-1, -2>(w))); }
//     };
//     auto hs = scan(rnn_step{}, h0, xs, w);   // h0 [B, H], xs [L, B, H] -> hs [L, B, H]
//
// hs[t] is the carry after step t: hs[t] = body(hs[t - 1], xs[t], params...), hs[-1] = h0.
// L may be symbolic (one program for every length). The carry keeps the initial value's
// shape and element type; the parameters are whatever else the step reads (weights), the
// same at every step.
//
// The forward runs the body as a program of its own, once per step, on the program's
// backend (runtime/scan_execution.hpp); the node's value is every carry, the initial one
// first ([L + 1, ...]), which the backward reads. The reverse pass (grad/scan.hpp) runs
// one more sequential loop, for the carries' cotangents (ScanCarryCotangent), and gets
// the cotangents of the inputs and parameters from the body applied to all steps at once:
// so the body must treat extra leading axes as a batch (index axes from the end, as
// `transpose<-1, -2>` above), which a body built from maps, matmuls and last-axis ops does.
// A body that counts axes from the front (sum<0> of the step) is caught when the shapes
// then disagree, but not always: where they agree, its gradients are wrong.
//
// Both parts of the reverse pass read what the stored carries hold instead of recomputing
// it: the body's output (the carry after the step) and, where the body returns a concat
// along the last axis, each operand (detail::carried_parts). A body can so return, beside
// its state, what its derivative reads: nn::LSTM's carry holds its gates, and its backward
// runs no h W_hh^T again and no exponential (its sigmoid and tanh have derivatives written
// in their values, nn/rnn.hpp).
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/bind.hpp>
#include <type_traits>

#include "../core/fixed_string.hpp"
#include "../core/node.hpp"
#include "../core/replace_nodes.hpp"
#include "binary.hpp"
#include "custom.hpp"
#include "slice.hpp"

namespace luminal {

namespace detail {
/// Shape<Dims[0] + Add, Carry's dims...>: a scan's steps (plus Add) over its carry.
template <class Carry, Dim Steps>
struct steps_then_carry;
template <Dim... C, Dim Steps>
struct steps_then_carry<Shape<C...>, Steps> {
  using type = Shape<Steps, C...>;
};
/// The shape without its leading axis: one step of a sequence.
template <class S, class I = std::make_index_sequence<S::rank - 1>>
struct drop_leading_axis;
template <class S, std::size_t... I>
struct drop_leading_axis<S, std::index_sequence<I...>> {
  using type = Shape<S::dims[I + 1]...>;
};

/// The leaves a scan's body is built over: the carry, one step of the sequence, a
/// parameter, a cotangent. The runtime binds them per step (runtime/scan_execution.hpp),
/// and the reverse pass replaces them by the nodes they stand for (grad/scan.hpp).
template <class T, class S>
using scan_carry_leaf = Input<"luminal.scan.carry", T, S>;
template <class T, class S>
using scan_step_leaf = Input<"luminal.scan.step", T, S>;
template <class T, class S>
using scan_cotangent_leaf = Input<"luminal.scan.cotangent", T, S>;
template <std::size_t K, class P>
using scan_parameter_leaf = Input<numbered_name<"luminal.scan.parameter.", K>(), typename P::value_type, shape_t<P>>;
/// Forward mode's: the carry's tangent, and the tangent of the input or parameter W.
template <class T, class S>
using scan_carry_tangent_leaf = Input<"luminal.scan.carry_tangent", T, S>;
template <class W>
using scan_input_tangent_leaf = Input<"luminal.scan.input_tangent", typename W::value_type, shape_t<W>>;
/// The shape of one row of Rows ([L, ...] or [L + 1, ...]), and its leaf as carry or step.
template <class Rows>
using scan_row_shape = typename drop_leading_axis<shape_t<Rows>>::type;
template <class Rows>
using scan_carry_leaf_of = scan_carry_leaf<typename Rows::value_type, scan_row_shape<Rows>>;
template <class Rows>
using scan_step_leaf_of = scan_step_leaf<typename Rows::value_type, scan_row_shape<Rows>>;

template <class Body, class Carry, class Step, class ParamIndices, class... P>
struct scan_body_types;
template <class Body, class Carry, class Step, std::size_t... K, class... P>
struct scan_body_types<Body, Carry, Step, std::index_sequence<K...>, P...> {
  using output = std::remove_cvref_t<decltype(Body{}(Carry{}, Step{}, scan_parameter_leaf<K, P>{}...))>;
};
/// The body's step over leaves: Body{}(carry, step, parameters...).
template <class Body, class Carry, class Step, class... P>
using scan_body_output =
    typename scan_body_types<Body, Carry, Step, std::index_sequence_for<P...>, P...>::output;

/// The carry after a step, as the reverse pass's step reads it (grad/scan.hpp).
template <class T, class S>
using scan_next_carry_leaf = Input<"luminal.scan.next_carry", T, S>;

/// A node of a body's output whose value the stored carries hold: Node, at [Begin, End)
/// of the carry's last axis (End -1: the whole carry).
template <class Node, long long Begin, long long End>
struct carried_part {
  using node = Node;
  static constexpr long long begin = Begin, end = End;
};
/// Where N joins nodes along the last axis (concat: zero pads that add up,
/// ops/concat.hpp), each operand at its offset; any other node gives none.
template <class N, class Op = typename op_or_void<N>::type>
struct pads_along_last {
  using type = boost::mp11::mp_list<>;
};
template <class N>
struct pads_along_last<N, Map<fn::Add>> {
  using type = boost::mp11::mp_append<typename pads_along_last<boost::mp11::mp_at_c<typename N::children, 0>>::type,
                                      typename pads_along_last<boost::mp11::mp_at_c<typename N::children, 1>>::type>;
};
template <class N, int Axis, long long Before, long long After, std::uint64_t Bits>
struct pads_along_last<N, Pad<Axis, Before, After, Bits>> {
  using X = boost::mp11::mp_first<typename N::children>;
  static constexpr Dim extent = shape_t<X>::dims[shape_t<X>::rank - 1];
  static constexpr bool usable = Bits == 0 && Axis == int(shape_t<N>::rank) - 1 && extent.is_static();
  using type = std::conditional_t<usable, boost::mp11::mp_list<carried_part<X, Before, Before + extent.offset>>,
                                  boost::mp11::mp_list<>>;
};
/// Whether parts lie side by side from 0 to `width`, none overlapping (else the sum at an
/// offset is not one operand's value).
template <class Parts>
constexpr bool parts_tile(long long width) {
  long long at = 0;
  bool ok = boost::mp11::mp_size<Parts>::value >= 2;
  boost::mp11::mp_for_each<boost::mp11::mp_transform<std::type_identity, Parts>>([&](auto part) {
    using P = typename decltype(part)::type;
    ok = ok && P::begin == at;
    at = P::end;
  });
  return ok && at == width;
}
/// A part, and the expression under it where it is a custom op (an identity: a rule's
/// `out` is that expression, grad/reverse.hpp).
template <class P, class = void>
struct with_identity_child {
  using type = boost::mp11::mp_list<P>;
};
template <class P>
struct with_identity_child<P, std::enable_if_t<is_custom_functor<typename P::node::op::functor>>> {
  using type = boost::mp11::mp_list<P, carried_part<boost::mp11::mp_first<typename P::node::children>, P::begin, P::end>>;
};
/// The nodes of a body's output N that a scan's stored carries hold: N itself, and where
/// N is a concat along the last axis, each operand (ops/scan.hpp's reverse pass).
template <class N>
struct carried_parts_of {
  using pads = typename pads_along_last<N>::type;
  static constexpr auto width = shape_t<N>::dims[shape_t<N>::rank - 1];
  using parts = boost::mp11::mp_push_front<
      std::conditional_t<width.is_static() && parts_tile<pads>(width.offset), pads, boost::mp11::mp_list<>>,
      carried_part<N, 0, -1>>;
  using type = boost::mp11::mp_apply<boost::mp11::mp_append,
                                     boost::mp11::mp_transform_q<boost::mp11::mp_quote_trait<with_identity_child>, parts>>;
};
template <class N>
using carried_parts = typename carried_parts_of<N>::type;
template <class P>
using part_node = typename P::node;
template <class Stored, class P, bool Whole = P::end == -1>
struct stored_part_of {
  using type = Stored;
};
template <class Stored, class P>
struct stored_part_of<Stored, P, false> {
  using type = decltype(slice<-1, P::begin, P::end>(Stored{}));
};
/// Part P read from Stored, carries whose last axis is the output's.
template <class Stored, class P>
using stored_part = typename stored_part_of<Stored, P>::type;
/// G with the carried parts of output Out read from Stored instead of recomputed.
template <class G, class Out, class Stored, class Parts = carried_parts<Out>>
using with_stored_parts =
    replace_nodes<G, boost::mp11::mp_transform<part_node, Parts>,
                  boost::mp11::mp_transform_q<boost::mp11::mp_bind_front<stored_part, Stored>, Parts>>;

/// A scan's kernels, defined where programs are (runtime/scan_execution.hpp): the forward
/// steps, and the backward's loop over the carries' cotangents.
template <class Op>
struct scan_execution;
}  // namespace detail

/// The op of scan's node: children the initial carry, the sequence [L, ...] and the
/// parameters; its value every carry, the initial one first: [L + 1, carry...].
template <class Body>
struct Scan {
  using body = Body;
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr std::string_view name = "scan";
  template <class Init, class... Rest>
  using value_type = Init;
  template <class SInit, class SXs, class... SP>
  using shape = typename detail::steps_then_carry<SInit, SXs::dims[0] + 1>::type;

  template <class N, class Runner, class T>
  static void execute(Runner& runner, T* out) {
    detail::scan_execution<Scan>::template forward<N>(runner, out);
  }
};

/// The reverse pass's sequential part: children the cotangent of the scan's node [L + 1,
/// carry...], the node, the sequence and the parameters; its value the cotangent of every
/// carry, the initial one first, through every step after it as well.
template <class Body>
struct ScanCarryCotangent {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr std::string_view name = "scan's carry cotangents";
  template <class G, class... Rest>
  using value_type = G;
  template <class SG, class... Rest>
  using shape = SG;

  template <class N, class Runner, class T>
  static void execute(Runner& runner, T* out) {
    detail::scan_execution<ScanCarryCotangent>::template backward<N>(runner, out);
  }
};

/// Forward mode: children the scan's node, the sequence, the parameters and the tangent of
/// the scan's child Wrt (0 the initial carry, 1 the sequence, 2 + k parameter k); its
/// value the tangent of every carry, the initial one first.
template <class Body, int Wrt>
struct ScanTangent {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr std::string_view name = "scan's carry tangents";
  template <class States, class... Rest>
  using value_type = States;
  template <class SStates, class... Rest>
  using shape = SStates;

  template <class N, class Runner, class T>
  static void execute(Runner& runner, T* out) {
    detail::scan_execution<ScanTangent>::template tangent<N>(runner, out);
  }
};

/// Every carry of `body` run along the leading axis of `xs` from `init`: [L, carry...]
/// (see the top of this file). `params` are the tensors the body reads besides the carry
/// and the step, passed to it in order.
template <class Body, expression Init, expression Xs, expression... P>
constexpr auto scan(Body, Init, Xs, P...) {
  using S = shape_t<Init>;
  using SX = shape_t<Xs>;
  using T = typename Init::value_type;
  static_assert(std::is_empty_v<Body> && std::is_default_constructible_v<Body>,
                "luminal: scan's body must be a stateless callable (a struct with a templated operator(), or a "
                "captureless lambda): the step is built from its type");
  static_assert(SX::rank >= 1, "luminal: scan's sequence needs a leading axis to walk along");
  static_assert(floating_element<T>, "luminal: scan carries a floating-point state");
  static_assert(!is_half_float<T>, "luminal: scan does not carry a bf16 or f16 state yet: scan over cast<f32>(x)");
  using out = detail::scan_body_output<Body, detail::scan_carry_leaf<T, S>, detail::scan_step_leaf_of<std::remove_cvref_t<Xs>>,
                                       std::remove_cvref_t<P>...>;
  static_assert(std::is_same_v<shape_t<out>, S>,
                "luminal: scan's body must return a carry of the initial carry's shape");
  static_assert(std::is_same_v<typename out::value_type, T>,
                "luminal: scan's body must return a carry of the initial carry's element type");
  using node = typename node_of<Scan<Body>, std::remove_cvref_t<Init>, std::remove_cvref_t<Xs>,
                                std::remove_cvref_t<P>...>::type;
  return slice<0, 1, SX::dims[0].is_static() ? SX::dims[0].offset + 1 : 0>(node{});
}

}  // namespace luminal
