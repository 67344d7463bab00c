// The kernels of a scan (ops/scan.hpp): the body compiled as a program of its own on the
// outer program's backend, run once per step over memory of the outer program. The step's
// carry and input are bound in place (program::bind_device) and its output is written
// straight into the next row of the scan's buffer (program::write_output_to), so a step
// copies nothing. One body program per scan node, made at the first run and kept by the
// outer program. Binding by name and resolving the step's extents are small beside the
// body's kernels (benchmarks/RESULTS.md has the figure).
#pragma once
#include <span>
#include <type_traits>

#include "../grad/forward.hpp"
#include "../ops/scan.hpp"
#include "program.hpp"

namespace luminal {

namespace detail {
/// Node N's extents in the outer program, as a span.
template <class N, class Runner>
std::span<const index_t> extents_in(const Runner& runner) {
  return {runner.template dims_of<N>(), shape_t<N>::rank};
}

/// Node N of the outer program as rows along its leading axis (a sequence's steps, a
/// scan's carries): row t's memory and every row's extents.
template <class N, class T = typename N::value_type>
struct rows_of {
  T* data;
  std::span<const index_t> extents;
  index_t size = 1;  // elements per row
  template <class Runner>
  explicit rows_of(const Runner& runner, T* memory)
      : data(memory), extents{runner.template dims_of<N>() + 1, shape_t<N>::rank - 1} {
    for (index_t d : extents) size *= d;
  }
  template <class Runner>
  explicit rows_of(const Runner& runner) : rows_of(runner, runner.template data_of<N>()) {}
  T* operator[](index_t t) const { return data + t * size; }
};

/// The cotangent the loss sends a carry directly (not through later steps).
template <class T, class S>
using scan_direct_cotangent_leaf = Input<"luminal.scan.direct_cotangent", T, S>;

/// Binds the parameters of a body program: parameter K of the scan, where the body reads it.
template <class Program, class Runner, class... P, std::size_t... K>
void bind_scan_parameters(Program& body, const Runner& runner, std::index_sequence<K...>) {
  (
      [&] {
        constexpr auto name = scan_parameter_leaf<K, P>::name;
        if (Program::reads_input(name.view()))
          body.bind_device(name.view(), runner.template data_of<P>(), extents_in<P>(runner));
      }(),
      ...);
}

/// The body program of output graph Out for scan node N, on the runner's backend: made at
/// the first run, kept by the outer program (kernel_runner::state_of).
template <class N, class Out, class Runner>
auto& scan_body_program(Runner& runner) {
  using B = std::remove_cvref_t<decltype(runner.backend)>;
  using Program = program<B, retention_policy::store_all, Out>;
  if constexpr (requires { B::graphs; })
    static_assert(!B::graphs, "luminal: a scan runs its body from the host once per step, which a CUDA Graph cannot "
                              "capture: compile a program with a scan for cuda, not cuda_graph");
  return runner.template state_of<N, Program>([&] { return Program(runner.backend); });
}

template <class Program, class T>
void bind_if_read(Program& body, std::string_view name, const T* data, std::span<const index_t> extents) {
  if (Program::reads_input(name)) body.bind_device(name, data, extents);
}
}  // namespace detail

template <class Body>
struct detail::scan_execution<Scan<Body>> {
  /// Writes the initial carry and then each step's carry into `states` [L + 1, carry...].
  template <class N, class Runner, class T>
  static void forward(Runner& runner, T* states) {
    using Init = boost::mp11::mp_at_c<typename N::children, 0>;
    const rows_of<N, T> carries(runner, states);
    runner.backend.device_copy(carries[0], runner.template data_of<Init>(), std::size_t(carries.size) * sizeof(T));
    if (runner.template dims_of<N>()[0] == 1) return;  // no steps
    boost::mp11::mp_apply<run_steps, boost::mp11::mp_drop_c<typename N::children, 1>>::template run<N>(runner, carries);
  }

  template <class Xs, class... P>
  struct run_steps {
    template <class Node, class Runner, class T>
    static void run(Runner& runner, const rows_of<Node, T>& carries) {
      using Carry = scan_carry_leaf_of<Node>;
      using Step = scan_step_leaf_of<Xs>;
      auto& body = scan_body_program<Node, scan_body_output<Body, Carry, Step, P...>>(runner);
      bind_scan_parameters<std::remove_cvref_t<decltype(body)>, Runner, P...>(body, runner, std::index_sequence_for<P...>{});
      const rows_of<Xs, const typename Xs::value_type> xs(runner);
      const index_t steps = runner.template dims_of<Xs>()[0];
      for (index_t t = 0; t < steps; ++t) {
        bind_if_read(body, Carry::name.view(), carries[t], carries.extents);
        bind_if_read(body, Step::name.view(), xs[t], xs.extents);
        body.template write_output_to<0>(carries[t + 1]);
        body.run();
      }
      body.template write_output_to<0>(nullptr);
    }
  };
};

template <class Body>
struct detail::scan_execution<ScanCarryCotangent<Body>> {
  /// cotangents[t], of carry t (carry 0 the initial one), is the loss's own cotangent g[t]
  /// plus what reaches carry t through step t: the body's vjp with respect to its carry.
  template <class N, class Runner, class T>
  static void backward(Runner& runner, T* cotangents) {
    using G = boost::mp11::mp_at_c<typename N::children, 0>;
    const rows_of<N, T> out(runner, cotangents);
    const rows_of<G, const T> g(runner);
    const index_t steps = runner.template dims_of<N>()[0] - 1;
    runner.backend.device_copy(out[steps], g[steps], std::size_t(out.size) * sizeof(T));
    if (steps == 0) return;
    boost::mp11::mp_apply<run_steps, boost::mp11::mp_drop_c<typename N::children, 1>>::template run<N>(runner, out, g);
  }

  template <class States, class Xs, class... P>
  struct run_steps {
    template <class Node, class Runner, class T>
    static void run(Runner& runner, const rows_of<Node, T>& out,
                    const rows_of<boost::mp11::mp_first<typename Node::children>, const T>& g) {
      using Carry = scan_carry_leaf_of<Node>;
      // The shape is read from Node, not as Carry::shape: nvcc's front end, expanding the
      // aliases, writes the name of the leaf under Carry as an undeclared `__T<n>`.
      using CarryShape = scan_row_shape<Node>;
      using Step = scan_step_leaf_of<Xs>;
      using Cotangent = scan_cotangent_leaf<T, CarryShape>;
      using Direct = scan_direct_cotangent_leaf<T, CarryShape>;
      using Next = scan_next_carry_leaf<T, CarryShape>;  // the carry after the step
      using Y = scan_body_output<Body, Carry, Step, P...>;
      using Out = with_stored_parts<decltype(Direct{} + vjp_of(Y{}, Cotangent{}, Carry{})), Y, Next>;
      auto& body = scan_body_program<Node, Out>(runner);
      bind_scan_parameters<std::remove_cvref_t<decltype(body)>, Runner, P...>(body, runner, std::index_sequence_for<P...>{});
      const rows_of<States, const T> states(runner);
      const rows_of<Xs, const typename Xs::value_type> xs(runner);
      for (index_t t = runner.template dims_of<Xs>()[0] - 1; t >= 0; --t) {  // step t reads carry t, writes carry t + 1
        bind_if_read(body, Carry::name.view(), states[t], states.extents);
        bind_if_read(body, Next::name.view(), states[t + 1], states.extents);
        bind_if_read(body, Step::name.view(), xs[t], xs.extents);
        bind_if_read(body, Cotangent::name.view(), out[t + 1], out.extents);
        body.bind_device(Direct::name.view(), g[t], g.extents);
        body.template write_output_to<0>(out[t]);
        body.run();
      }
      body.template write_output_to<0>(nullptr);
    }
  };
};

template <class Body, int Wrt>
struct detail::scan_execution<ScanTangent<Body, Wrt>> {
  /// tangents[t + 1] = J_carry(step t) tangents[t] + J_Wrt(step t) (the tangent of child
  /// Wrt): one forward-mode step of the body per step of the scan.
  template <class N, class Runner, class T>
  static void tangent(Runner& runner, T* tangents) {
    using Tangent = boost::mp11::mp_back<typename N::children>;
    const rows_of<N, T> out(runner, tangents);
    if constexpr (Wrt == 0)
      runner.backend.device_copy(out[0], runner.template data_of<Tangent>(), std::size_t(out.size) * sizeof(T));
    else
      fill_zero(runner.backend, out[0], std::size_t(out.size) * sizeof(T));
    if (runner.template dims_of<N>()[0] == 1) return;  // no steps
    using Inner = boost::mp11::mp_pop_back<typename N::children>;  // the node, the sequence, the parameters
    boost::mp11::mp_apply<run_steps, Inner>::template run<N, Tangent>(runner, out);
  }

  template <class States, class Xs, class... P>
  struct run_steps {
    using Carry = scan_carry_leaf_of<States>;
    using Step = scan_step_leaf_of<Xs>;
    using CarryTangent = scan_carry_tangent_leaf<typename States::value_type, typename Carry::shape>;

    template <class Node, class Tangent, class Runner, class T>
    static void run(Runner& runner, const rows_of<Node, T>& out) {
      using Out = decltype(output(std::index_sequence_for<P...>{}));
      // Only the name: a parameter's tangent is bound whole, a sequence's a row at a time.
      constexpr std::string_view input_tangent = scan_input_tangent_leaf<Tangent>::name.view();
      auto& body = scan_body_program<Node, Out>(runner);
      bind_scan_parameters<std::remove_cvref_t<decltype(body)>, Runner, P...>(body, runner, std::index_sequence_for<P...>{});
      const rows_of<States, const T> states(runner);
      const rows_of<Xs, const typename Xs::value_type> xs(runner);
      const auto tangent = [&] {
        if constexpr (Wrt == 1) return rows_of<Tangent, const T>(runner);
        else return runner.template data_of<Tangent>();
      }();
      if constexpr (Wrt >= 2) bind_if_read(body, input_tangent, tangent, extents_in<Tangent>(runner));
      for (index_t t = 0; t < runner.template dims_of<Xs>()[0]; ++t) {
        bind_if_read(body, Carry::name.view(), states[t], states.extents);
        bind_if_read(body, Step::name.view(), xs[t], xs.extents);
        bind_if_read(body, CarryTangent::name.view(), out[t], out.extents);
        if constexpr (Wrt == 1) bind_if_read(body, input_tangent, tangent[t], tangent.extents);
        body.template write_output_to<0>(out[t + 1]);
        body.run();
      }
      body.template write_output_to<0>(nullptr);
    }

    /// The body's tangent along the carry's tangent and, but for the initial carry, along
    /// the tangent of child Wrt.
    template <std::size_t... I>
    static auto output(std::index_sequence<I...>) {
      using Params = boost::mp11::mp_list<scan_parameter_leaf<I, P>...>;
      auto y = Body{}(Carry{}, Step{}, scan_parameter_leaf<I, P>{}...);
      if constexpr (Wrt == 0) {
        return jvp(y, Carry{}, CarryTangent{});
      } else {
        using W = std::conditional_t<Wrt == 1, Step, boost::mp11::mp_at_c<Params, std::size_t(Wrt >= 2 ? Wrt - 2 : 0)>>;
        return jvp(y, Carry{}, W{}, CarryTangent{}, scan_input_tangent_leaf<W>{});
      }
    }
  };
};

}  // namespace luminal
