// Recurrent layers on scan (ops/scan.hpp), as torch.nn.RNN, LSTM and GRU with
// batch_first=True: input [B, L, In], output [B, L, D * Hidden] (D = 2 when bidirectional),
// L static or symbolic. Parameter names, layouts, gate order (LSTM i, f, g, o; GRU r, z,
// n) and the default init U(-1/sqrt(Hidden), 1/sqrt(Hidden)) are PyTorch's, so a
// state_dict loads unchanged:
//
//     nn::LSTM<"lstm", 64, 128, 2> lstm;     // lstm.weight_ih_l0 [512, 64], ..._hh_l1 [512, 128]
//     auto y = lstm(input<"x", f32>(shape<Batch, Seq, 64>));              // [Batch, Seq, 128]
//     auto [h_n, c_n] = lstm.final_state(x);                              // [2, Batch, 128] each
//     auto z = lstm(x, h0, c0);               // initial states [Layers * D, Batch, Hidden]
//
// Each layer and direction multiplies the whole sequence by weight_ih in one GEMM, then
// scans over time with only the hidden-to-hidden product and the gates inside the step.
// The scan's carry holds h and what the step's backward reads: an LSTM's is h, c, the
// gates i, f, g, o and tanh c ([B, 7 Hidden]); a GRU's h, r, z, n and the n part of
// h W_hh^T + b_hh ([B, 5 Hidden]); an RNN's h. The scan stores every carry, so its reverse
// pass reads those values there (ops/scan.hpp) instead of recomputing h W_hh^T and the
// gates from the carry before, as PyTorch keeps its gates for the backward.
#pragma once
#include <cmath>
#include <tuple>

#include "linear.hpp"

namespace luminal::nn {

/// The cell of a recurrent layer; rnn_tanh and rnn_relu are torch.nn.RNN's nonlinearity.
enum class rnn_cell { rnn_tanh, rnn_relu, lstm, gru };

namespace detail {
constexpr std::int64_t gates_of(rnn_cell cell) { return cell == rnn_cell::lstm ? 4 : cell == rnn_cell::gru ? 3 : 1; }
/// sigmoid and tanh whose derivatives are written in their own values, g (1 - s) s and
/// g (1 - t^2), as torch's recurrent backward reads them: with the values in the scan's
/// stored carry, the backward reads nothing below them (the exponential, h W_hh^T).
/// Custom ops over the scan body's placeholder leaves, whose types are small.
struct sigmoid_by_value {
  template <expression X> static constexpr auto forward(X x) { return sigmoid(x); }
  template <class G, class S, class X> static constexpr auto vjp(G g, S s, X) { return g * (c<1.0> - s) * s; }
};
struct tanh_by_value {
  template <expression X> static constexpr auto forward(X x) { return tanh(x); }
  template <class G, class T, class X> static constexpr auto vjp(G g, T t, X) { return g * (c<1.0> - t * t); }
};
template <expression X> constexpr auto gate_sigmoid(X x) { return custom_vjp<sigmoid_by_value>(x); }
template <expression X> constexpr auto gate_tanh(X x) { return custom_vjp<tanh_by_value>(x); }

/// The scan's carry: h, and the step's values its backward reads (the top of this file).
constexpr std::int64_t carry_width_of(rnn_cell cell, std::int64_t hidden) {
  return cell == rnn_cell::lstm ? 7 * hidden : cell == rnn_cell::gru ? 5 * hidden : hidden;
}

/// One step of a cell over any leading axes: carry, x W_ih^T + b_ih at this step, W_hh, b_hh.
template <rnn_cell Cell, std::int64_t H>
struct cell_step {
  template <expression C, expression XW, expression W, expression B>
  constexpr auto operator()(C carry, XW xw, W w, B b) const {
    if constexpr (Cell == rnn_cell::lstm) {
      auto h = slice<-1, 0, H>(carry);
      auto c = slice<-1, H, 2 * H>(carry);
      auto gates = xw + matmul(h, transpose(w)) + b;
      auto i = gate_sigmoid(slice<-1, 0, H>(gates));
      auto f = gate_sigmoid(slice<-1, H, 2 * H>(gates));
      auto g = gate_tanh(slice<-1, 2 * H, 3 * H>(gates));
      auto o = gate_sigmoid(slice<-1, 3 * H, 4 * H>(gates));
      auto c_next = f * c + i * g;
      auto tanh_c = gate_tanh(c_next);
      return concat<-1>(o * tanh_c, c_next, i, f, g, o, tanh_c);
    } else if constexpr (Cell == rnn_cell::gru) {
      auto h = slice<-1, 0, H>(carry);
      auto hw = matmul(h, transpose(w)) + b;
      auto hn = slice<-1, 2 * H, 3 * H>(hw);
      auto r = gate_sigmoid(slice<-1, 0, H>(xw) + slice<-1, 0, H>(hw));
      auto z = gate_sigmoid(slice<-1, H, 2 * H>(xw) + slice<-1, H, 2 * H>(hw));
      auto n = gate_tanh(slice<-1, 2 * H, 3 * H>(xw) + r * hn);
      return concat<-1>(n + z * (h - n), r, z, n, hn);  // (1 - z) n + z h
    } else if constexpr (Cell == rnn_cell::rnn_tanh) {
      return gate_tanh(xw + matmul(carry, transpose(w)) + b);
    } else {
      return relu(xw + matmul(carry, transpose(w)) + b);
    }
  }
};

/// "<Prefix>.<Stem>_l<Layer>" and "_reverse" for the backward direction, as PyTorch names them.
template <fixed_string Prefix, fixed_string Stem, int Layer, bool Reverse>
consteval auto rnn_parameter_name() {
  static_assert(Layer >= 0 && Layer < 10, "luminal: recurrent layers have at most 10 layers");
  constexpr char digit[2] = {char('0' + Layer), 0};
  if constexpr (Reverse) return Prefix + "." + Stem + "_l" + fixed_string<2>(digit) + "_reverse";
  else return Prefix + "." + Stem + "_l" + fixed_string<2>(digit);
}
}  // namespace detail

/// A stack of Layers recurrent layers of cell Cell (see the top of this file).
template <fixed_string Prefix, rnn_cell Cell, std::int64_t In, std::int64_t Hidden, int Layers = 1,
          bool Bidirectional = false, element_type T = f32>
struct Recurrent {
  static_assert(In >= 1 && Hidden >= 1 && Layers >= 1, "luminal: a recurrent layer needs In, Hidden and Layers >= 1");
  static constexpr std::int64_t gates = detail::gates_of(Cell) * Hidden;
  static constexpr int directions = Bidirectional ? 2 : 1;
  static constexpr std::int64_t carry_width = detail::carry_width_of(Cell, Hidden);

  template <int Layer, bool Reverse>
  struct weights {
    static constexpr std::int64_t in = Layer == 0 ? In : directions * Hidden;
    static constexpr auto weight_ih = param<detail::rnn_parameter_name<Prefix, "weight_ih", Layer, Reverse>(), T>(shape<gates, in>);
    static constexpr auto weight_hh =
        param<detail::rnn_parameter_name<Prefix, "weight_hh", Layer, Reverse>(), T>(shape<gates, Hidden>);
    static constexpr auto bias_ih = param<detail::rnn_parameter_name<Prefix, "bias_ih", Layer, Reverse>(), T>(shape<gates>);
    static constexpr auto bias_hh = param<detail::rnn_parameter_name<Prefix, "bias_hh", Layer, Reverse>(), T>(shape<gates>);
    static constexpr auto all = std::tuple{weight_ih, weight_hh, bias_ih, bias_hh};
  };

  /// Every parameter in PyTorch's order: per layer, the forward direction, then the reverse.
  static constexpr auto parameters = []<int... K>(std::integer_sequence<int, K...>) {
    return std::tuple_cat(weights<K / directions, K % directions == 1>::all...);
  }(std::make_integer_sequence<int, Layers * directions>{});

  /// Output [B, L, D * Hidden] from zero initial states.
  template <features_of<In> X>
  constexpr auto operator()(X x) const {
    return batch_first(run(time_major(x), zero_state<X>{}).first);
  }
  /// Output from initial states [Layers * D, B, Hidden] (RNN, GRU).
  template <features_of<In> X, expression H0>
    requires(Cell != rnn_cell::lstm)
  constexpr auto operator()(X x, H0) const {
    return batch_first(run(time_major(x), given_state<H0>{}).first);
  }
  /// Output from initial states h0 and c0, [Layers * D, B, Hidden] each (LSTM).
  template <features_of<In> X, expression H0, expression C0>
    requires(Cell == rnn_cell::lstm)
  constexpr auto operator()(X x, H0, C0) const {
    return batch_first(run(time_major(x), given_state<H0, C0>{}).first);
  }
  /// The last hidden state of every layer and direction, [Layers * D, B, Hidden], as
  /// PyTorch's h_n (and c_n: for an LSTM a tuple {h_n, c_n}); the same nodes as the output's.
  template <features_of<In> X, expression... States>
  constexpr auto final_state(X x, States...) const {
    using S = std::conditional_t<sizeof...(States) == 0, zero_state<X>, given_state<States...>>;
    auto last = run(time_major(x), S{}).second;  // [Layers * D, B, carry]
    if constexpr (Cell == rnn_cell::lstm) return std::tuple{slice<-1, 0, Hidden>(last), slice<-1, Hidden, 2 * Hidden>(last)};
    else if constexpr (carry_width > Hidden) return slice<-1, 0, Hidden>(last);
    else return last;
  }

  /// PyTorch's default: every weight and bias U(-1/sqrt(Hidden), 1/sqrt(Hidden)).
  void initialize(tensor_store& store, std::uint64_t seed) const {
    std::apply([&](auto... p) { (detail::store_uniform(store, p, seed, 1.0 / std::sqrt(double(Hidden))), ...); },
               parameters);
  }

 private:
  template <class X>
  struct zero_state {
    template <int Index>
    static constexpr auto carry() {
      return expand(Const<T, T(0)>{}, Shape<shape_t<X>::dims[0], carry_width>{});
    }
  };
  template <class... S>
  struct given_state {
    template <int Index>
    static constexpr auto carry() {
      auto row = [](auto s) { return squeeze<0>(slice<0, Index, Index + 1>(s)); };
      auto given = [&] {
        if constexpr (sizeof...(S) == 1) return (row(S{}), ...);
        else return concat<-1>(row(S{})...);  // h and c side by side
      }();
      constexpr std::int64_t missing = carry_width - shape_t<decltype(given)>::dims[1].offset;
      if constexpr (missing == 0) return given;
      else return pad<-1, 0, missing>(given);  // no step's values yet
    }
  };

  template <expression X>
  static constexpr auto time_major(X x) { return transpose<0, 1>(x); }
  template <expression Y>
  static constexpr auto batch_first(Y y) { return transpose<0, 1>(y); }

  /// One direction of one layer over time-major input [L, B, in]: every step's hidden state
  /// [L, B, Hidden] and the last carry [B, carry].
  template <int Layer, bool Reverse, class State, expression X>
  static constexpr auto direction(X x) {
    using w = weights<Layer, Reverse>;
    using S = shape_t<X>;
    constexpr Dim rows = S::dims[0] * S::dims[1];
    auto xs = [&] {
      if constexpr (Reverse) return flip<0>(x);
      else return x;
    }();
    auto xw = reshape(matmul(reshape(xs, Shape<rows, w::in>{}), transpose(w::weight_ih)), Shape<S::dims[0], S::dims[1], gates>{}) +
              w::bias_ih;
    auto carries = scan(detail::cell_step<Cell, Hidden>{}, State::template carry<Layer * directions + int(Reverse)>(), xw,
                        w::weight_hh, w::bias_hh);
    auto hidden = slice<-1, 0, Hidden>(carries);
    auto last = gather(flip<0>(carries), Const<i32, 0>{});  // the carry after the last step
    if constexpr (Reverse) return std::pair{flip<0>(hidden), last};
    else return std::pair{hidden, last};
  }

  /// All layers: the last layer's output [L, B, D * Hidden] and every last carry.
  template <expression X, class State>
  static constexpr auto run(X x, State) {
    return layers<0, State>(x);
  }
  template <int Layer, class State, expression X, expression... Last>
  static constexpr auto layers(X x, Last... last) {
    if constexpr (Layer == Layers) {
      return std::pair{x, stack<0>(last...)};
    } else if constexpr (Bidirectional) {
      auto [forward_out, forward_last] = direction<Layer, false, State>(x);
      auto [backward_out, backward_last] = direction<Layer, true, State>(x);
      return layers<Layer + 1, State>(concat<-1>(forward_out, backward_out), last..., forward_last, backward_last);
    } else {
      auto [out, out_last] = direction<Layer, false, State>(x);
      return layers<Layer + 1, State>(out, last..., out_last);
    }
  }
};

/// torch.nn.LSTM(In, Hidden, Layers, batch_first=True, bidirectional=Bidirectional).
template <fixed_string Prefix, std::int64_t In, std::int64_t Hidden, int Layers = 1, bool Bidirectional = false,
          element_type T = f32>
using LSTM = Recurrent<Prefix, rnn_cell::lstm, In, Hidden, Layers, Bidirectional, T>;
/// torch.nn.GRU(In, Hidden, Layers, batch_first=True, bidirectional=Bidirectional).
template <fixed_string Prefix, std::int64_t In, std::int64_t Hidden, int Layers = 1, bool Bidirectional = false,
          element_type T = f32>
using GRU = Recurrent<Prefix, rnn_cell::gru, In, Hidden, Layers, Bidirectional, T>;
/// torch.nn.RNN(In, Hidden, Layers, nonlinearity="tanh", batch_first=True, bidirectional=...);
/// rnn_cell::rnn_relu for nonlinearity="relu".
template <fixed_string Prefix, std::int64_t In, std::int64_t Hidden, int Layers = 1, bool Bidirectional = false,
          rnn_cell Nonlinearity = rnn_cell::rnn_tanh, element_type T = f32>
using RNN = Recurrent<Prefix, Nonlinearity, In, Hidden, Layers, Bidirectional, T>;

}  // namespace luminal::nn
