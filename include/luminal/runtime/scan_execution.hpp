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
template <class N, class Runner>
index_t elements_in(const Runner& runner) {
  index_t n = 1;
  for (index_t d : extents_in<N>(runner)) n *= d;
  return n;
}

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
    using Xs = boost::mp11::mp_at_c<typename N::children, 1>;
    using Params = boost::mp11::mp_drop_c<typename N::children, 2>;
    using Carry = scan_carry_leaf<T, shape_t<Init>>;
    using Step = scan_step_leaf<typename Xs::value_type, typename drop_leading_axis<shape_t<Xs>>::type>;
    const index_t carry_size = elements_in<Init>(runner);
    const index_t steps = runner.template dims_of<Xs>()[0];
    const index_t step_size = steps ? elements_in<Xs>(runner) / steps : 0;
    runner.backend.device_copy(states, runner.template data_of<Init>(), std::size_t(carry_size) * sizeof(T));
    if (steps == 0) return;
    boost::mp11::mp_apply<run_steps, boost::mp11::mp_push_front<Params, Carry, Step>>::template run<N, Xs>(
        runner, states, extents_in<Init>(runner), carry_size, steps, step_size);
  }

  template <class Carry, class Step, class... P>
  struct run_steps {
    template <class Node, class Xs, class Runner, class T>
    static void run(Runner& runner, T* states, std::span<const index_t> carry_extents, index_t carry_size, index_t steps,
                    index_t step_size) {
      using Out = scan_body_output<Body, Carry, Step, P...>;
      auto& body = scan_body_program<Node, Out>(runner);
      bind_scan_parameters<std::remove_cvref_t<decltype(body)>, Runner, P...>(body, runner, std::index_sequence_for<P...>{});
      const index_t* xd = runner.template dims_of<Xs>();
      const std::span<const index_t> step_extents{xd + 1, shape_t<Xs>::rank - 1};
      const auto* xs = runner.template data_of<Xs>();
      for (index_t t = 0; t < steps; ++t) {
        bind_if_read(body, Carry::name.view(), states + t * carry_size, carry_extents);
        bind_if_read(body, Step::name.view(), xs + t * step_size, step_extents);
        body.template write_output_to<0>(states + (t + 1) * carry_size);
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
    const index_t steps = runner.template dims_of<G>()[0] - 1;
    const index_t carry_size = elements_in<G>(runner) / (steps + 1);
    runner.backend.device_copy(cotangents + steps * carry_size, runner.template data_of<G>() + steps * carry_size,
                               std::size_t(carry_size) * sizeof(T));
    if (steps == 0) return;
    boost::mp11::mp_apply<run_steps, typename N::children>::template run<N>(runner, cotangents, carry_size, steps);
  }

  template <class G, class States, class Xs, class... P>
  struct run_steps {
    template <class Node, class Runner, class T>
    static void run(Runner& runner, T* cotangents, index_t carry_size, index_t steps) {
      using S = typename drop_leading_axis<shape_t<G>>::type;
      using Carry = scan_carry_leaf<T, S>;
      using Step = scan_step_leaf<typename Xs::value_type, typename drop_leading_axis<shape_t<Xs>>::type>;
      using Cotangent = scan_cotangent_leaf<T, S>;
      using Direct = scan_direct_cotangent_leaf<T, S>;
      using Out = decltype(Direct{} + vjp_of(scan_body_output<Body, Carry, Step, P...>{}, Cotangent{}, Carry{}));
      auto& body = scan_body_program<Node, Out>(runner);
      bind_scan_parameters<std::remove_cvref_t<decltype(body)>, Runner, P...>(body, runner, std::index_sequence_for<P...>{});
      const std::span<const index_t> carry_extents{runner.template dims_of<G>() + 1, S::rank};
      const index_t* xd = runner.template dims_of<Xs>();
      const std::span<const index_t> step_extents{xd + 1, shape_t<Xs>::rank - 1};
      const index_t step_size = elements_in<Xs>(runner) / steps;
      const auto* xs = runner.template data_of<Xs>();
      const T* states = runner.template data_of<States>();
      const T* g = runner.template data_of<G>();
      for (index_t t = steps - 1; t >= 0; --t) {  // step t reads carry t and writes carry t + 1
        bind_if_read(body, Carry::name.view(), states + t * carry_size, carry_extents);
        bind_if_read(body, Step::name.view(), xs + t * step_size, step_extents);
        bind_if_read(body, Cotangent::name.view(), cotangents + (t + 1) * carry_size, carry_extents);
        body.bind_device(Direct::name.view(), g + t * carry_size, carry_extents);
        body.template write_output_to<0>(cotangents + t * carry_size);
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
    using States = boost::mp11::mp_at_c<typename N::children, 0>;
    using Tangent = boost::mp11::mp_back<typename N::children>;
    const index_t steps = runner.template dims_of<States>()[0] - 1;
    const index_t carry_size = elements_in<States>(runner) / (steps + 1);
    if constexpr (Wrt == 0)
      runner.backend.device_copy(tangents, runner.template data_of<Tangent>(), std::size_t(carry_size) * sizeof(T));
    else
      runner.backend.parallel_for(carry_size, zero_fill<T>{tangents});
    if (steps == 0) return;
    using Inner = boost::mp11::mp_pop_back<typename N::children>;  // the node, the sequence, the parameters
    boost::mp11::mp_apply<run_steps, Inner>::template run<N, Tangent>(runner, tangents, carry_size, steps);
  }

  template <class T>
  struct zero_fill {
    T* out;
    LUMINAL_HD void operator()(index_t begin, index_t end) const {
      for (index_t i = begin; i < end; ++i) out[i] = T(0);
    }
  };

  template <class States, class Xs, class... P>
  struct run_steps {
    template <class Node, class Tangent, class Runner, class T>
    static void run(Runner& runner, T* tangents, index_t carry_size, index_t steps) {
      using S = typename drop_leading_axis<shape_t<States>>::type;
      using Carry = scan_carry_leaf<T, S>;
      using Step = scan_step_leaf<typename Xs::value_type, typename drop_leading_axis<shape_t<Xs>>::type>;
      using CarryTangent = Input<"luminal.scan.carry_tangent", T, S>;
      using Out = decltype(output(std::index_sequence_for<P...>{}));
      auto& body = scan_body_program<Node, Out>(runner);
      bind_scan_parameters<std::remove_cvref_t<decltype(body)>, Runner, P...>(body, runner, std::index_sequence_for<P...>{});
      const std::span<const index_t> carry_extents{runner.template dims_of<States>() + 1, S::rank};
      const index_t* xd = runner.template dims_of<Xs>();
      const std::span<const index_t> step_extents{xd + 1, shape_t<Xs>::rank - 1};
      const index_t step_size = elements_in<Xs>(runner) / steps;
      const auto* xs = runner.template data_of<Xs>();
      const T* states = runner.template data_of<States>();
      const T* tangent = runner.template data_of<Tangent>();
      if constexpr (Wrt >= 2) bind_if_read(body, "luminal.scan.input_tangent", tangent, extents_in<Tangent>(runner));
      for (index_t t = 0; t < steps; ++t) {
        bind_if_read(body, Carry::name.view(), states + t * carry_size, carry_extents);
        bind_if_read(body, Step::name.view(), xs + t * step_size, step_extents);
        bind_if_read(body, CarryTangent::name.view(), tangents + t * carry_size, carry_extents);
        if constexpr (Wrt == 1) bind_if_read(body, "luminal.scan.input_tangent", tangent + t * step_size, step_extents);
        body.template write_output_to<0>(tangents + (t + 1) * carry_size);
        body.run();
      }
      body.template write_output_to<0>(nullptr);
    }

    /// The body's tangent along the carry's tangent and, but for the initial carry, along
    /// the tangent of child Wrt.
    template <std::size_t... I>
    static auto output(std::index_sequence<I...>) {
      using T = typename States::value_type;
      using S = typename drop_leading_axis<shape_t<States>>::type;
      using Carry = scan_carry_leaf<T, S>;
      using Step = scan_step_leaf<typename Xs::value_type, typename drop_leading_axis<shape_t<Xs>>::type>;
      using CarryTangent = Input<"luminal.scan.carry_tangent", T, S>;
      using Params = boost::mp11::mp_list<scan_parameter_leaf<I, P>...>;
      auto y = Body{}(Carry{}, Step{}, scan_parameter_leaf<I, P>{}...);
      if constexpr (Wrt == 0) {
        return jvp(y, Carry{}, CarryTangent{});
      } else {
        using W = std::conditional_t<Wrt == 1, Step, boost::mp11::mp_at_c<Params, std::size_t(Wrt >= 2 ? Wrt - 2 : 0)>>;
        using WT = Input<"luminal.scan.input_tangent", typename W::value_type, shape_t<W>>;
        return jvp(y, Carry{}, W{}, CarryTangent{}, WT{});
      }
    }
  };
};

}  // namespace luminal
