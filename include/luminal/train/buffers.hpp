// Buffers: tensors a model carries but does not train, such as BatchNorm's running
// statistics, named as torch's module buffers ("bn1.running_mean") so that state_dicts
// load unchanged. A buffer is a leaf of role `buffer`: an evaluation program reads it as it
// reads a parameter (parameter_store::bind binds both, a tensor_store reports it missing).
//
// A training graph says what a buffer becomes after each step: `assigning(y, assign(b,
// v)...)` is y itself (an identity node that fuses and costs nothing), carrying in its
// type that buffer b takes the value of v. compile_train_step (train.hpp) finds every such
// assignment in the loss's graph, computes v in the step's gradient program, beside the
// loss and from the same batch (v shares its nodes: a batch mean is computed once), writes
// it to the buffer's second memory, and makes it current when the loss is finite, as it
// does the updated parameters. A step whose loss is NaN changes no buffer.
//
//     auto running_mean = buffer<"bn.running_mean", f32>(shape<16>);
//     auto batch_mean = mean<0, 2, 3>(x);                                  // [16]
//     auto y = assigning(normalized, assign(running_mean, c<0.9> * running_mean + c<0.1> * batch_mean));
//     auto step = compile_train_step(loss_of(y), sgd{});   // step.store() holds "bn.running_mean"
//
// A buffer the graph reads but assigns nothing (BatchNorm in eval mode inside a training
// graph) is held by the step's store and read, never written.
#pragma once
#include <array>
#include <boost/mp11/algorithm.hpp>
#include <string_view>
#include <type_traits>

#include "../core/graph.hpp"
#include "../ops/custom.hpp"

namespace luminal {

/// A buffer leaf: `buffer<"bn.running_var", f32>(shape<16>)`.
template <fixed_string Name, storage_type T, Dim... D>
constexpr Leaf<Name, T, Shape<D...>, leaf_role::buffer> buffer(Shape<D...> = {}) { return {}; }

/// Buffer B takes the value of expression V after each training step (assign()).
template <class B, class V>
struct buffer_assignment {
  using buffer = B;
  using value = V;
};

namespace detail {
template <class L>
constexpr bool is_buffer_leaf() {
  if constexpr (requires { L::role; }) return L::role == leaf_role::buffer;
  else return false;
}
}  // namespace detail

/// That buffer `b` takes the value of `value` after each training step; `value` has b's
/// element type and shape. Pass it to assigning().
template <expression B, expression V>
constexpr buffer_assignment<B, V> assign(B, V) {
  static_assert(detail::is_buffer_leaf<B>(), "luminal: assign(b, value): b must be a buffer<> leaf");
  static_assert(std::is_same_v<value_t<B>, value_t<V>>, "luminal: assign(b, value): value must have b's element type");
  static_assert(std::is_same_v<shape_t<B>, shape_t<V>>, "luminal: assign(b, value): value must have b's shape");
  static_assert(V::kind != op_kind::input, "luminal: assign(b, value): value must be computed, not a leaf");
  return {};
}

namespace detail {
/// The rule of the identity node that carries buffer assignments A... (custom.hpp).
template <class... A>
struct assigns_buffers {
  using buffer_assignments = boost::mp11::mp_list<A...>;
  template <class X>
  static constexpr X forward(X x) { return x; }
};
}  // namespace detail

/// x, unchanged, carrying the assignments: a training step over a loss that reads the
/// result assigns each buffer its value (see the file comment).
template <expression X, class... B, class... V>
constexpr auto assigning(X x, buffer_assignment<B, V>...) {
  static_assert(sizeof...(B) > 0, "luminal: assigning(x, assignments...) needs at least one assign(b, value)");
  return detail::make_custom<detail::assigns_buffers<buffer_assignment<B, V>...>, false, false>(x);
}

namespace detail {
template <class N>
struct carries_assignments : std::false_type {};
template <computed_node N>
  requires requires { typename N::op::functor::rule::buffer_assignments; }
struct carries_assignments<N> : std::true_type {};
template <class N>
using assignments_of = typename N::op::functor::rule::buffer_assignments;

template <class... A>
consteval bool distinct_buffers(boost::mp11::mp_list<A...>) {
  constexpr std::array<std::string_view, sizeof...(A)> names{A::buffer::name.view()...};
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j)
      if (names[i] == names[j]) return false;
  return true;
}

/// The buffer assignments that the nodes Nodes carry, in their order, as an mp_list of
/// buffer_assignment: a graph assigns each buffer once.
template <class Nodes>
using buffer_assignments_in = boost::mp11::mp_apply<
    boost::mp11::mp_append,
    boost::mp11::mp_push_front<boost::mp11::mp_transform<assignments_of, filter_nodes<carries_assignments, Nodes>>,
                               boost::mp11::mp_list<>>>;
template <class A>
using assigned_buffer = typename A::buffer;
template <class A>
using assigned_value = typename A::value;
/// The new values of the assignments, in their order.
template <class Assignments>
using assigned_values = boost::mp11::mp_transform<assigned_value, Assignments>;

/// The buffer assignments in the graph of Loss, as `type`.
template <class Loss>
struct buffer_assignments_of_loss {
  using type = buffer_assignments_in<topo_nodes<Loss>>;
  static_assert(distinct_buffers(type{}),
                "luminal: compile_train_step: the loss assigns a buffer twice (one BatchNorm in training mode "
                "applied to two inputs?)");
};

template <class L>
struct is_buffer_node : std::bool_constant<is_buffer_leaf<L>()> {};
/// The buffers a step holds: those assigned (in the order of Assignments), then those
/// the programs only read.
template <class Assignments, class... Programs>
using step_buffers =
    boost::mp11::mp_unique<boost::mp11::mp_append<boost::mp11::mp_transform<assigned_buffer, Assignments>,
                                                  filter_nodes<is_buffer_node, typename Programs::leaves>...>>;

/// Before a step runs: binds every buffer a program reads to its current value in the
/// store, and points the gradient program's outputs FirstOutput + k, the new value of
/// assignment k, at the buffer's second memory (swapped in once the loss is finite).
template <class Buffers, class Assignments, std::size_t FirstOutput, class GradientProgram, class UpdateProgram,
          class Store>
void bind_buffers(GradientProgram& gradients, UpdateProgram& update, Store& store) {
  boost::mp11::mp_for_each<Buffers>([&](auto leaf) {
    using L = decltype(leaf);
    const auto& s = store.materialized(L::name.view());
    const auto* current = static_cast<const value_t<L>*>(s.current);
    if (GradientProgram::reads_input(L::name.view())) gradients.bind_device(L::name.view(), current, s.shape);
    if (UpdateProgram::reads_input(L::name.view())) update.bind_device(L::name.view(), current, s.shape);
  });
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<boost::mp11::mp_size<Assignments>::value>>([&](auto K) {
    using L = typename boost::mp11::mp_at_c<Assignments, K>::buffer;
    gradients.template write_output_to<FirstOutput + K>(static_cast<value_t<L>*>(store.next_buffer(L::name.view())));
  });
}
}  // namespace detail

}  // namespace luminal
