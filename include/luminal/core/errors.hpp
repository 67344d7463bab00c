// Compile errors that read like sentences, in two forms.
//
// Where operands' shapes must fit each other (broadcasting, matmul, reshape, a module's
// input), the op has a second overload beside it that takes `shaped<S>` (node.hpp) and is
// chosen only when the real one's constraint fails. It is declared, never defined, and
// returns one of the incomplete class templates below with the shapes as arguments, so
// the call itself is the error, at the user's line, in GCC and in Clang:
//
//     model.cpp:12:16: error: invalid use of incomplete type 'struct luminal::error::
//       shapes_cannot_be_broadcast_together<fixed_string<11>{"(Batch, 3)"}, fixed_string<7>{"(4, 3)"}>'
//
// (A deleted overload would put the error at the user's line too, but Clang then lists
// the real overload's failed constraint with the operands' whole types.)
//
// Every other error is a class template whose template arguments are the offending shapes
// or types rendered as text, so the compiler prints "In instantiation of
// luminal::error::axis_out_of_range<"(2, 3)", 5>" followed by the sentence in the
// static_assert.
#pragma once
#include <string_view>

#include "fixed_string.hpp"

namespace luminal::error {

// What a refusing overload returns: never defined, their names are the sentence.
template <auto... Shapes>
struct shapes_cannot_be_broadcast_together;
template <auto Left, auto Right>
struct matmul_needs_shapes_like_m_by_k_and_k_by_n;
template <auto From, auto To>
struct reshape_must_keep_the_number_of_elements;
template <auto From, auto To>
struct expand_can_only_stretch_extents_of_size_1;
template <auto Module, auto Input, auto Needs>
struct the_input_shape_does_not_fit_the_module;
template <auto Input, auto Weight>
struct linear_needs_rows_as_long_as_the_input_rows;

template <auto...>
inline constexpr bool always_false = false;

template <auto Left, auto Right>
struct shapes_cannot_broadcast {
  static_assert(always_false<Left, Right>,
                "luminal: shapes cannot be broadcast together: aligned from the right, each "
                "pair of extents must be equal or one of them 1 (see the two shapes above)");
};

template <auto Shape, int Axis>
struct axis_out_of_range {
  static_assert(always_false<Shape, Axis>,
                "luminal: axis is out of range for this shape (see the shape and axis above)");
};

template <auto Shape, auto Permutation>
struct not_a_permutation {
  static_assert(always_false<Shape, Permutation>,
                "luminal: permute needs each axis exactly once (see the shape and order above)");
};

template <auto Shape, int Axis, long long Begin, long long End>
struct slice_out_of_range {
  static_assert(always_false<Shape, Axis, Begin, End>,
                "luminal: slice bounds must satisfy 0 <= begin <= end <= extent "
                "(see the shape, axis, begin and end above)");
};

template <auto Left, auto Right>
struct element_types_differ {
  static_assert(always_false<Left, Right>,
                "luminal: both operands must have the same element type; convert one with "
                "cast<T>(x) (see the two element types above)");
};

template <auto Op, auto Type>
struct op_needs_floating_point {
  static_assert(always_false<Op, Type>,
                "luminal: this op needs a floating-point element type (f32 or f64); "
                "convert with cast<f32>(x) (see the op and element type above)");
};

template <auto Op, auto Type>
struct op_not_for_bool {
  static_assert(always_false<Op, Type>,
                "luminal: this op does not take bool operands; convert with cast<T>(x)");
}; 

template <auto Type>
struct index_must_be_integer {
  static_assert(always_false<Type>, "luminal: gather indices must be i32 (see the type above)");
};

}  // namespace luminal::error

namespace luminal {
/// A type's name as a template argument the compiler will print: `name_text<"f32">`.
template <std::size_t N>
constexpr text<16> type_text(const char (&name)[N]) {
  text<16> out;
  out.append(std::string_view(name, N - 1));
  return out;
}
}  // namespace luminal
