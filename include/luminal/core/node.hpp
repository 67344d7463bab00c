// The graph is a type. Every expression is an empty value whose type names its op, its
// children, its element type and its shape; the same type is the same node, so common
// subexpressions collapse by type identity and nothing is computed while building.
#pragma once
#include <boost/mp11/list.hpp>
#include <boost/mp11/utility.hpp>
#include <type_traits>

#include "dtype.hpp"
#include "node_name.hpp"
#include "shape.hpp"

namespace luminal {

/// How a node is computed; the planner and evaluator dispatch on this.
enum class op_kind {
  input,      // leaf bound at run time (inputs and parameters)
  constant,   // compile-time scalar
  extent,     // scalar holding the runtime value of an extent
  map,        // elementwise function of same-shape children
  view,       // index remapping of one child: no data moves
  reduce,     // sum / max over one axis (kept as size 1)
  matmul,     // batched matrix product
  gather,     // rows of a table picked by an integer index tensor
  iota,       // index along an axis
  opaque,     // runs a kernel of its own, Op::execute (an exchange of gradients over ranks, a
              // quantized matmul, attention over a KV cache): reads whole stored children
};

/// Marker base for every node type.
struct node_base {};

/// The base of every node, naming its shape as a string: `shaped<"(Batch, 3)">`. An op whose
/// operands' shapes must fit has an overload beside it that takes `shaped<S>` and is never
/// defined (errors.hpp), so the compiler's first error is at the user's line and prints
/// the shapes, not the operands' types (a deep graph's type spells kilobytes).
template <auto ShapeText>
struct shaped : node_base {};

template <class T>
// The builtin, not std::is_base_of_v: a variable template is a symbol GCC names (mangles)
// once per node type, and a node type's name spells its whole subgraph.
concept expression = __is_base_of(node_base, std::remove_cvref_t<T>);

namespace detail {
/// F<T...> for an alias template F that declares a fixed number of parameters: a pack
/// cannot be expanded into such an alias directly (a class template's member can).
/// mp11's mp_invoke_q<mp_quote<F>, T...> does the same, through several more class
/// templates per use, and every node type uses it twice.
template <template <class...> class F, class... T>
struct apply_alias {
  using type = F<T...>;
};
}  // namespace detail

/// A computed node: `Op` is a small functor/trait type, the children are node types.
/// One generic node for every op, as in xtensor's xfunction.
///
/// The node is `node_of<Op, Children...>::type`, the short name of the nested class
/// `definition` (node_name.hpp): a graph that reuses a value (a residual, `x` in
/// `x * tanh(x)`) spells that value's type once per use, so the spelling of a depth-d chain
/// of reuses is a tree of size 2^d. Where names are short, a definition spells only its
/// children's names. Where they are not (nvcc), the definition is a nested class, which
/// is a name too: nvcc's device front end (cicc) walks the arguments of a template-id, and
/// paid 4x per layer of a gradient graph (README, "Compile time under nvcc"); using a
/// nested class as an argument walks no further.
template <class Op, class... Children>
struct node_of {
  using node_shape = typename detail::apply_alias<Op::template shape, typename Children::shape...>::type;
  struct definition : shaped<exact_string<node_shape::text>> {
    using op = Op;
    using children = boost::mp11::mp_list<Children...>;
    // An op may declare `template <class T, class U> using value_type` and still
    // receive the children's types as a pack.
    using value_type = typename detail::apply_alias<Op::template value_type, typename Children::value_type...>::type;
    using shape = node_shape;
    static constexpr op_kind kind = Op::kind;
  };
#if LUMINAL_SHORT_NAMES
  using type = node_name<definition, Op, Children...>;
#else
  // Not through an alias: EDG keeps an alias template's arguments as the spelling of the
  // type it yields, and the children's spellings nest (the tree above).
  using type = definition;
#endif
};
/// `Node<Op, C...>` names a node type in user code and tests. The ops in ops/ spell
/// `typename node_of<Op, C...>::type{}` instead: nvcc's front end keeps the spelling of an
/// alias template's arguments with the type it yields, so a graph whose nodes came out of
/// `Node<...>` carries a second, unshared 2^depth tree of spellings that cudafe++ walks,
/// which multiplies the front end's time on deep graphs.
template <class Op, class... Children>
using Node = typename node_of<Op, Children...>::type;

/// Whether N is a computed node (`Node<Op, ...>`) rather than a leaf or a constant.
/// Partial specializations constrain on this and read N::op and N::children: `Node<Op,
/// C...>` itself cannot be matched, its children sit in a non-deduced context.
template <class N>
concept computed_node = requires { typename N::op; };

/// Whether N is a computed node of op Op.
template <class N, class Op>
concept node_with_op = computed_node<N> && std::is_same_v<typename N::op, Op>;

/// Whether a leaf is data fed each run (input), trained (parameter), an optimizer's
/// state that a training step carries from one step to the next (momentum, moments), or a
/// model's buffer: a tensor it carries but does not train, which a training step may
/// assign (BatchNorm's running statistics, train/buffers.hpp).
enum class leaf_role { input, parameter, state, buffer };

/// A named leaf: `Input<"x", f32, Shape<Batch, 784>>`. Names double as checkpoint keys.
template <fixed_string Name, storage_type T, shape_type S, leaf_role Role>
struct Leaf : shaped<exact_string<S::text>> {
  using children = boost::mp11::mp_list<>;
  using value_type = T;
  using shape = S;
  static constexpr op_kind kind = op_kind::input;
  static constexpr leaf_role role = Role;
  static constexpr auto name = Name;
};

template <fixed_string Name, element_type T, shape_type S>
using Input = Leaf<Name, T, S, leaf_role::input>;
template <fixed_string Name, element_type T, shape_type S>
using Param = Leaf<Name, T, S, leaf_role::parameter>;

/// A data input: `auto x = input<"x", f32>(shape<Batch, 784>);`
template <fixed_string Name, element_type T, Dim... D>
constexpr Input<Name, T, Shape<D...>> input(Shape<D...> = {}) { return {}; }

/// A trainable parameter: `auto w = param<"fc1.weight", f32>(shape<784, 256>);`
template <fixed_string Name, element_type T, Dim... D>
constexpr Param<Name, T, Shape<D...>> param(Shape<D...> = {}) { return {}; }

/// A frozen weight stored in one of ggml's formats (Q4_0, Q4_1, Q8_0, F16, BF16, F32: the
/// format is given when it is bound, program::bind_quantized). Its last axis is a row, as a
/// GGUF tensor's: `[out, in]` for a linear layer's weight, `[vocab, width]` for an
/// embedding table. Only ops that read blocks take it (ops/quantized.hpp):
///
///     auto w = quantized_weight<"blk.0.attn_q.weight">(shape<Heads * 64, Width>);
///     auto q = linear(x, w);                      // x @ w^T, the weight read in its blocks
template <fixed_string Name, Dim... D>
constexpr Leaf<Name, quantized, Shape<D...>, leaf_role::input> quantized_weight(Shape<D...> = {}) { return {}; }

/// A typed scalar constant; its value is part of its type.
template <element_type T, T Value>
struct Const : shaped<exact_string<Shape<>::text>> {
  using children = boost::mp11::mp_list<>;
  using value_type = T;
  using shape = Shape<>;
  static constexpr op_kind kind = op_kind::constant;
  static constexpr T value = Value;
};

/// `constant<f32, 0.5f>` as a value.
template <element_type T, T Value>
inline constexpr Const<T, Value> constant{};

/// A weakly typed literal (`2.0_c`, `c<2>`): it takes the element type of the other
/// operand, as a Python number does in PyTorch or JAX.
template <double Value>
struct Literal : shaped<exact_string<Shape<>::text>> {
  using children = boost::mp11::mp_list<>;
  using value_type = double;
  using shape = Shape<>;
  static constexpr op_kind kind = op_kind::constant;
  static constexpr double value = Value;
};

/// `c<2>` or `c<0.5>`: a weakly typed compile-time constant (see Literal).
template <auto Value>
inline constexpr Literal<double(Value)> c{};

template <class T>
struct is_literal : std::false_type {};
template <double V>
struct is_literal<Literal<V>> : std::true_type {};

namespace detail {
template <char... Cs>
consteval double parse_number() {
  constexpr char chars[] = {Cs...};
  double mantissa = 0, fraction_scale = 1;
  bool in_fraction = false;
  int exponent = 0, exponent_sign = 1;
  bool in_exponent = false;
  for (char ch : chars) {
    if (ch == '\'') continue;
    if (ch == '.') { in_fraction = true; continue; }
    if (ch == 'e' || ch == 'E') { in_exponent = true; continue; }
    if (in_exponent) {
      if (ch == '-') exponent_sign = -1;
      else if (ch != '+') exponent = exponent * 10 + (ch - '0');
      continue;
    }
    mantissa = mantissa * 10 + (ch - '0');
    if (in_fraction) fraction_scale *= 10;
  }
  double value = mantissa / fraction_scale;
  for (int i = 0; i < exponent; ++i) value = exponent_sign > 0 ? value * 10 : value / 10;
  return value;
}
}  // namespace detail

inline namespace literals {
/// `x * 2.0_c`: a compile-time constant that adopts x's element type.
template <char... Cs>
consteval auto operator""_c() { return Literal<detail::parse_number<Cs...>()>{}; }
}  // namespace literals

/// A scalar holding the runtime value of an extent (the length of a symbolic axis), so
/// that `mean` over a `Batch` axis divides by the bound batch size.
template <Dim D, element_type T>
struct Extent : shaped<exact_string<Shape<>::text>> {
  using children = boost::mp11::mp_list<>;
  using value_type = T;
  using shape = Shape<>;
  static constexpr op_kind kind = op_kind::extent;
  static constexpr Dim dim = D;
};

/// N's element type, for user code: `value_t<decltype(y)>`. The library writes
/// `typename N::value_type`: nvcc's front end keeps `value_t<N>` as the spelling of the
/// built-in type it yields and walks N's type wherever that type is used, which is
/// exponential in a graph's depth (README, "Compile time under nvcc").
template <class N>
using value_t = typename std::remove_cvref_t<N>::value_type;
template <class N>
using shape_t = typename std::remove_cvref_t<N>::shape;
template <class N>
inline constexpr std::size_t rank_v = shape_t<N>::rank;

}  // namespace luminal
