// autocast<bf16>(x): mixed precision as torch.autocast runs it, as a rewrite of a graph.
//
//     auto loss = nn::cross_entropy(model(x), labels);                  // f32 parameters
//     auto step = compile_train_step(autocast<bf16>(loss), adamw{});    // matmuls in bf16
//
// Every f32 matmul of x's graph becomes cast<f32>(matmul(cast<H>(a), cast<H>(b))): its
// operands are rounded to H, the product is summed in f32 and rounded to H once, as
// torch.autocast's matmul, linear and bmm do, and widened back for the ops that read it.
// Everything else stays f32: softmax, normalization, losses, reductions and elementwise
// work run as before, which is what autocast runs in f32 and slightly more precise than
// its bf16 elementwise ops. The parameters stay f32 leaves, so a training step of the
// rewritten loss keeps f32 master weights and f32 optimizer state; each gradient comes
// back through the casts' gradients (a weight's is the bf16 product A^T g widened, as in
// torch). The backward's matmuls run on H as well: the gradient of a cast to f32 is a
// cast to H.
//
// A cast to H sits below the views of an operand (a transpose, a broadcast, a reshape:
// cast.hpp), so a weight is rounded once, at its own extents, not once per batch. A custom
// op's rule (custom.hpp) is kept, applied to the rewritten inputs: what it computes runs
// as the rule says, in f32 unless the rule itself casts.
#pragma once
#include <boost/mp11/list.hpp>

#include "../core/node.hpp"
#include "cast.hpp"
#include "custom.hpp"
#include "matmul.hpp"

namespace luminal {

namespace detail {
template <class H, class N>
struct autocast_in;

/// The operand N of a matmul, rewritten and rounded to H (cast() puts the rounding below
/// the operand's views).
template <class H, class N>
using rounded_operand = decltype(cast<H>(typename autocast_in<H, N>::type{}));

template <class H, class Op, class Children, bool F32Matmul>
struct autocast_rebuilt;
template <class H, class Op, class... C>
struct autocast_rebuilt<H, Op, boost::mp11::mp_list<C...>, false> {
  using type = typename node_of<Op, typename autocast_in<H, C>::type...>::type;
};
template <class H, class A, class B>
struct autocast_rebuilt<H, MatMul, boost::mp11::mp_list<A, B>, true> {
  using product = typename node_of<MatMul, rounded_operand<H, A>, rounded_operand<H, B>>::type;
  using type = decltype(cast<f32>(product{}));
};

/// A custom op (custom.hpp) names its inputs in its functor, for its rule: they are
/// rewritten with the graph, or the rule would read nodes that are no longer there.
template <class H, class Rule, class... X, class Out>
struct autocast_rebuilt<H, Map<fn::Custom<Rule, X...>>, boost::mp11::mp_list<Out>, false> {
  using type = typename node_of<Map<fn::Custom<Rule, typename autocast_in<H, X>::type...>>,
                                typename autocast_in<H, Out>::type>::type;
};

template <class H, class N>
struct autocast_in {
  using type = N;  // a leaf or a constant
};
template <class H, computed_node N>
struct autocast_in<H, N> {
  using type = typename autocast_rebuilt<H, typename N::op, typename N::children,
                                         std::is_same_v<typename N::op, MatMul> && std::is_same_v<value_t<N>, f32>>::type;
};
}  // namespace detail

/// x's graph with every f32 matmul computed on H = bf16 or f16 operands (above); matmuls
/// of other element types, and everything that is not a matmul, are as they were.
/// autocast<f32>(x) is x: a model written once takes its precision as a parameter.
template <element_type H, expression X>
constexpr auto autocast(X x) {
  static_assert(is_half_float<H> || std::is_same_v<H, f32>, "luminal: autocast computes matmuls in bf16 or f16 (or f32: unchanged)");
  if constexpr (std::is_same_v<H, f32>) return x;
  else return typename detail::autocast_in<H, std::remove_cvref_t<X>>::type{};
}

}  // namespace luminal
