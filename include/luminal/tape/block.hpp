// A block: a static piece of a model (a transformer layer, one step of a simulation)
// compiled once into a forward and a backward program that a tape (tape.hpp) calls any
// number of times at run time, with a different parameter set per call.
//
//     constexpr Dim Batch{"Batch"};
//     auto x = input<"x", f32>(shape<Batch, 64>);
//     auto y = x + nn::Linear<"layer.fc", 64, 64>{}(x);
//     auto layer = compile_block<"layer">(y, x);  // outputs y, differentiable input x
//     // tape.call(layer, "h.3", {{"x", h}}) binds "layer.fc.weight" to "h.3.fc.weight".
//
// The split into two programs happens at compile time. The reverse pass of the block's
// outputs, seeded with cotangent inputs, gives gradient expressions that share nodes with
// the forward graph. The backward recomputes what fuses (maps, views, gathers): a node the
// gradients read is recomputed from the leaves and from the nearest values under it that
// do not fuse (a matmul, a reduction, an opaque op), by the rule plan/retention.hpp owns.
// Those values are "cut": the forward program computes them as extra outputs, the tape
// keeps them, and in the backward graph each becomes an input leaf "tape.saved.NNN". So a
// GELU between two matmuls keeps the first matmul's output only, not the five
// intermediates of its formula, and a softmax keeps the scores and two row reductions:
// the forward writes fewer tensors, the tape holds less, and the backward recomputes a
// few cheap maps in the loops that read them.
#pragma once
#include <boost/mp11/algorithm.hpp>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "../core/replace_nodes.hpp"
#include "../grad/reverse.hpp"
#include "../plan/retention.hpp"
#include "../ops/all.hpp"
#include "../runtime/program.hpp"

namespace luminal {

template <class B>
class tape;

namespace detail {

/// "[64, 32]"
inline std::string extents_text(std::span<const index_t> shape) {
  std::string text = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) text += (k ? ", " : "") + std::to_string(shape[k]);
  return text + "]";
}

/// The leaf "tape.saved.<K>" that stands for kept node N in the backward program.
template <class N, std::size_t K>
using saved_leaf = Input<numbered_name<"tape.saved.", K>(), typename N::value_type, shape_t<N>>;
template <class Kept, class Indices = std::make_index_sequence<boost::mp11::mp_size<Kept>::value>>
struct saved_leaves;
template <class... N, std::size_t... K>
struct saved_leaves<boost::mp11::mp_list<N...>, std::index_sequence<K...>> {
  using type = boost::mp11::mp_list<saved_leaf<N, K>...>;
};

template <class N>
struct is_float_parameter
    : std::bool_constant<luminal::is_parameter_leaf<N>::value && floating_element<typename N::value_type>> {};

/// Sum over outputs of <output, cotangent>: one scalar whose gradient is the vjp of all
/// outputs at once.
template <class... O, std::size_t... K>
constexpr auto cotangent_pairing(boost::mp11::mp_list<O...>, std::index_sequence<K...>) {
  return (sum(O{} * Input<numbered_name<"tape.cotangent.", K>(), typename O::value_type, shape_t<O>>{}) + ...);
}
}  // namespace detail


/// The runtime face of a block, which the tape holds to run a recorded call's backward.
template <class B>
class block_interface {
 public:
  virtual ~block_interface() = default;
  virtual void run_backward(tape<B>& recording, std::size_t call) = 0;
  /// The store's names of the block's parameters in a call with prefix `call_prefix`.
  virtual std::vector<std::string> parameter_names(std::string_view call_prefix) const = 0;
};

/// A compiled block (see compile_block). Outputs and Wrt are mp_lists of node types; the
/// parameters are the float param<> leaves of the outputs' graph. Not movable once a tape
/// has recorded a call of it (the tape points at it).
template <class B, fixed_string Prefix, class Outputs, class Wrt>
class block final : public block_interface<B> {
 public:
  using forward_nodes = boost::mp11::mp_apply<topo_nodes, Outputs>;
  using parameters = boost::mp11::mp_filter<detail::is_float_parameter, forward_nodes>;
  using differentiated = boost::mp11::mp_append<Wrt, parameters>;
  static constexpr std::size_t output_count = boost::mp11::mp_size<Outputs>::value;
  static constexpr std::size_t input_gradient_count = boost::mp11::mp_size<Wrt>::value;
  static_assert(boost::mp11::mp_size<differentiated>::value > 0,
                "luminal: compile_block: the block has neither float parameters nor differentiable inputs, "
                "so it has no backward; compile() it as an ordinary program");

 private:
  template <class... W>
  static constexpr auto gradient_list(boost::mp11::mp_list<W...>) {
    if constexpr (output_count == 1) {
      using O = boost::mp11::mp_first<Outputs>;
      using pass = reverse_pass<O, Input<detail::numbered_name<"tape.cotangent.", 0>(), typename O::value_type, shape_t<O>>, W...>;
      return boost::mp11::mp_list<decltype(pass::template gradient<W>())...>{};
    } else {
      using L = decltype(detail::cotangent_pairing(Outputs{}, std::make_index_sequence<output_count>{}));
      using pass = reverse_pass<L, Const<typename L::value_type, typename L::value_type(1)>, W...>;
      return boost::mp11::mp_list<decltype(pass::template gradient<W>())...>{};
    }
  }
  struct is_output_q {
    template <class N>
    using fn = std::bool_constant<detail::contains<Outputs, N>::value>;
  };
  template <class... N>
  using program_for = program<B, retention_policy::store_all, N...>;

 public:
  using gradients = decltype(gradient_list(differentiated{}));
  /// Forward nodes the backward program reads: the outputs, then the cut points.
  using kept = boost::mp11::mp_append<
      Outputs, boost::mp11::mp_remove_if_q<typename detail::cut_points<forward_nodes, gradients>::type, is_output_q>>;
  static constexpr std::size_t kept_count = boost::mp11::mp_size<kept>::value;
  template <class G>
  using backward_of = replace_nodes<G, kept, typename detail::saved_leaves<kept>::type>;  // over saved leaves
  using forward_program = boost::mp11::mp_apply<program_for, kept>;
  using backward_program = boost::mp11::mp_apply<program_for, boost::mp11::mp_transform<backward_of, gradients>>;

  explicit block(B backend = {}) : forward_(backend), backward_(backend) {}
  block(const block&) = delete;
  block& operator=(const block&) = delete;

  static constexpr std::string_view prefix() { return Prefix.view(); }
  forward_program& forward() { return forward_; }
  backward_program& backward() { return backward_; }

  /// The store's name of leaf parameter `leaf` in a call with prefix `call_prefix`:
  /// "layer.fc.weight" becomes "h.3.fc.weight". Names outside the block's prefix (shared
  /// parameters) and calls without a prefix keep the leaf's name.
  static std::string parameter_name(std::string_view leaf, std::string_view call_prefix) {
    constexpr std::string_view own = Prefix.view();
    if (own.empty() || call_prefix.empty() || leaf.size() <= own.size() || !leaf.starts_with(own) ||
        leaf[own.size()] != '.')
      return std::string(leaf);
    return std::string(call_prefix) + std::string(leaf.substr(own.size()));
  }

  std::vector<std::string> parameter_names(std::string_view call_prefix) const override {
    std::vector<std::string> names;
    boost::mp11::mp_for_each<parameters>(
        [&](auto leaf) { names.push_back(parameter_name(decltype(leaf)::name.view(), call_prefix)); });
    return names;
  }

  /// Runs the forward program for one call and returns the tape slots of kept (outputs
  /// first). The program writes each kept value straight into its slot, in the tape's
  /// memory on the device; only a kept input or a repeated output is copied. Called by
  /// tape::call.
  std::vector<int> run_forward(tape<B>& recording, std::size_t call) {
    const auto& record = recording.record_at(call);
    bind_leaves(forward_, recording, record);
    forward_.resolve_extents();
    bool requires_grad = boost::mp11::mp_size<parameters>::value > 0;
    boost::mp11::mp_for_each<Wrt>([&](auto leaf) {
      if (int id = record.argument(decltype(leaf)::name.view()); id >= 0) requires_grad |= recording.slot_at(id).requires_grad;
    });
    std::vector<int> slots(kept_count, -1);  // -1: a checkpointed call's activation, computed again by run_backward
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<kept_count>>([&](auto K) {
      using T = typename boost::mp11::mp_at_c<kept, K>::value_type;
      if (K >= output_count && record.checkpointed) return;
      slots[K] = recording.new_slot(dtype_of<T>(), forward_.template output_shape<K>(), requires_grad);
    });
    write_kept_to(recording, slots);
    forward_.run();
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<kept_count>>([&](auto K) {
      if constexpr (!written_in_place<K>())
        if (slots[K] >= 0) recording.copy_into(slots[K], forward_.template output_data<K>());
    });
    return slots;
  }

  /// Runs the backward program of a recorded call: adds its inputs' cotangents and its
  /// parameters' gradients into the tape, on the device.
  void run_backward(tape<B>& recording, std::size_t call) override {
    const auto& record = recording.record_at(call);
    if (record.checkpointed) {  // the activations were not kept: compute them again
      bind_leaves(forward_, recording, record);
      write_kept_to(recording, record.kept);  // the outputs again into their slots, the rest into the arena
      forward_.run();
    }
    bind_leaves(backward_, recording, record);
    // A gradient nothing has reached yet is written by the program in place, not copied.
    constexpr std::size_t gradient_count = boost::mp11::mp_size<differentiated>::value;
    std::array<bool, gradient_count> direct{};
    std::vector<int> direct_slots;  // an input passed twice gets one direct write, then adds
    backward_.resolve_extents();
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<gradient_count>>([&](auto J) {
      using W = boost::mp11::mp_at_c<differentiated, J>;
      using T = typename backward_program::template output_node<J>::value_type;
      if constexpr (writes_output<backward_program, J>()) {
        void* target = nullptr;
        if constexpr (J < input_gradient_count) {
          int id = record.argument(W::name.view());
          if (id >= 0 && recording.slot_at(id).requires_grad && std::ranges::find(direct_slots, id) == direct_slots.end()) {
            target = recording.fresh_cotangent(id);
            if (target) direct_slots.push_back(id);
          }
        } else {
          target = recording.template fresh_parameter_gradient<T>(parameter_name(W::name.view(), record.prefix),
                                                                  backward_.template output_shape<J>());
        }
        direct[J] = target != nullptr;
        backward_.template write_output_to<J>(static_cast<T*>(target));
      }
    });
    backward_.run();
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<gradient_count>>([&](auto J) {
      using W = boost::mp11::mp_at_c<differentiated, J>;
      const auto* incoming = backward_.template output_data<J>();
      if constexpr (J < input_gradient_count) {
        int id = record.argument(W::name.view());
        if (direct[J]) recording.cotangent_written(id);
        else if (id >= 0 && recording.slot_at(id).requires_grad) recording.add_to_cotangent(id, incoming);
      } else {
        const std::string name = parameter_name(W::name.view(), record.prefix);
        if (direct[J]) recording.parameter_gradient_written(name);
        else recording.add_to_parameter_gradient(name, backward_.template output_shape<J>(), incoming);
      }
    });
  }

 private:
  /// Whether Program computes its output K into a buffer of its own, which
  /// write_output_to may point elsewhere: not an input (no kernel writes it), and not a
  /// node that an earlier output already is (one buffer per node).
  template <class Program, std::size_t K>
  static constexpr bool writes_output() {
    constexpr auto& ids = Program::output_ids;
    if (is_leaf(Program::template output_node<K>::kind)) return false;
    for (std::size_t j = 0; j < K; ++j)
      if (ids[j] == ids[K]) return false;
    return true;
  }
  /// Whether the forward program writes kept value K straight into the tape's slot.
  template <std::size_t K>
  static constexpr bool written_in_place() { return writes_output<forward_program, K>(); }
  /// Points each kept value the program writes in place at its slot (-1: into the arena).
  void write_kept_to(tape<B>& recording, const std::vector<int>& slots) {
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<kept_count>>([&](auto K) {
      using T = typename boost::mp11::mp_at_c<kept, K>::value_type;
      if constexpr (written_in_place<K>())
        forward_.template write_output_to<K>(slots[K] < 0 ? nullptr
                                                           : static_cast<T*>(recording.slot_at(slots[K]).value.data));
    });
  }

  /// Binds every leaf of `prog` for a call: the kept tensors and cotangents the tape
  /// holds ("tape.saved.NNN", "tape.cotangent.NNN"), parameters and the call's inputs;
  /// all in place, without copying, except parameters copied in from a host store.
  template <class Program>
  void bind_leaves(Program& prog, tape<B>& recording, const typename tape<B>::call_record& record) {
    boost::mp11::mp_for_each<typename Program::leaves>([&](auto leaf) {
      using L = decltype(leaf);
      using T = typename L::value_type;
      constexpr std::string_view name = L::name.view();
      if constexpr (name.starts_with("tape.cotangent.") || name.starts_with("tape.saved.")) {
        constexpr std::size_t k = std::size_t(name[name.size() - 3] - '0') * 100 +
                                  std::size_t(name[name.size() - 2] - '0') * 10 + std::size_t(name[name.size() - 1] - '0');
        const int id = record.kept[k];
        if (id < 0) {  // a checkpointed call's activation: the forward program just computed it
          bind_recomputed<k>(prog, name);
          return;
        }
        const void* data = name.starts_with("tape.saved.") ? recording.slot_at(id).value.data
                                                            : recording.cotangent_or_zeros(id);
        prog.bind_device(name, static_cast<const T*>(data), recording.slot_at(id).shape);
      } else if constexpr (L::role == leaf_role::parameter) {
        std::vector<index_t> expected;
        for (const Dim& d : L::shape::dims) expected.push_back(d.offset);
        recording.template bind_parameter<T>(prog, name, parameter_name(name, record.prefix), expected,
                                             "block '" + std::string(Prefix.view()) + "'");
      } else {
        int id = record.argument(name);
        if (id < 0)
          throw input_error("luminal: block '" + std::string(Prefix.view()) + "' needs the input '" +
                            std::string(name) + "', which the call does not pass (it passes " +
                            record.argument_names() + ")");
        const auto& s = recording.slot_at(id);
        if (s.dtype != dtype_of<T>())
          throw input_error("luminal: block '" + std::string(Prefix.view()) + "' input '" + std::string(name) +
                            "' is " + std::string(dtype_name<T>()) + ", but the call passes " +
                            std::string(dtype_name(s.dtype)));
        prog.bind_device(name, static_cast<const T*>(s.value.data), s.shape);
      }
    });
  }

  /// Binds leaf `name` of the backward program to kept value K in the forward program's
  /// output buffer, valid until the forward program runs again.
  template <std::size_t K, class Program>
  void bind_recomputed(Program& prog, std::string_view name) {
    if constexpr (K < kept_count) {
      prog.bind_device(name, forward_.template output_data<K>(), forward_.template output_shape<K>());
    }
  }

  forward_program forward_;
  backward_program backward_;
};

/// Compiles a block of outputs (one expression, or a std::tuple of them) for backend B,
/// differentiable with respect to the input<> leaves `wrt` (other inputs, such as token
/// ids, are bound per call without gradients). Parameters named `Prefix + "."...` are
/// renamed per call (block::parameter_name). Returns the block by unique_ptr: the tape
/// holds on to it by address.
///
///     auto head = compile_block<"head">(nn::cross_entropy(lm(x), labels), x);
template <fixed_string Prefix, class B = host, class Out, expression... Wrt>
auto compile_block(Out, Wrt...) {
  using outputs = decltype([] {
    if constexpr (expression<Out>) return boost::mp11::mp_list<Out>{};
    else return boost::mp11::mp_rename<Out, boost::mp11::mp_list>{};
  }());
  static_assert(boost::mp11::mp_size<outputs>::value >= 1, "luminal: compile_block needs at least one output");
  static_assert(((is_leaf(Wrt::kind) && floating_element<typename Wrt::value_type>) && ...),
                "luminal: compile_block differentiates with respect to floating-point input<> leaves only");
  return std::make_unique<block<B, Prefix, outputs, boost::mp11::mp_list<std::remove_cvref_t<Wrt>...>>>();
}

}  // namespace luminal
