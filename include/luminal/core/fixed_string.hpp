// Compile-time strings usable as template parameters: leaf names ("fc1.weight") and
// symbolic extents ("Batch") are part of a node's type, so they must be structural.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string_view>

namespace luminal {

/// A string literal as a non-type template parameter: `Input<"x", ...>`.
template <std::size_t N>
struct fixed_string {
  char chars[N]{};
  constexpr fixed_string() = default;  // all zeros: filled in by constexpr code
  constexpr fixed_string(const char (&text)[N]) { std::copy_n(text, N, chars); }
  constexpr std::string_view view() const { return {chars, N - 1}; }
  constexpr std::size_t size() const { return N - 1; }
  constexpr const char* c_str() const { return chars; }
};

/// Concatenation at compile time, usable as a template argument, so that a module can
/// name its parameters from its prefix: `param<Prefix + ".weight", f32>(...)`.
template <std::size_t N, std::size_t M>
constexpr fixed_string<N + M - 1> operator+(const fixed_string<N>& a, const fixed_string<M>& b) {
  fixed_string<N + M - 1> out;
  std::copy_n(a.chars, N - 1, out.chars);
  std::copy_n(b.chars, M, out.chars + (N - 1));  // b's terminating zero included
  return out;
}
template <std::size_t N, std::size_t M>
constexpr fixed_string<N + M - 1> operator+(const fixed_string<N>& a, const char (&b)[M]) {
  return a + fixed_string<M>(b);
}
template <std::size_t N, std::size_t M>
constexpr fixed_string<N + M - 1> operator+(const char (&a)[N], const fixed_string<M>& b) {
  return fixed_string<N>(a) + b;
}
template <std::size_t N, std::size_t M>
constexpr bool operator==(const fixed_string<N>& a, const fixed_string<M>& b) {
  return a.view() == b.view();
}

/// A fixed-capacity string built in constexpr code; used to render shapes into the
/// template arguments of compile errors so that the compiler prints them verbatim.
template <std::size_t Capacity>
struct text {
  char chars[Capacity]{};
  std::size_t length = 0;
  constexpr void append(std::string_view piece) {
    for (char c : piece)
      if (length + 1 < Capacity) chars[length++] = c;
  }
  constexpr void append_int(long long value) {
    if (value < 0) { append("-"); value = -value; }
    char digits[24]{};
    int count = 0;
    do { digits[count++] = char('0' + value % 10); value /= 10; } while (value != 0);
    while (count > 0) { char one[2] = {digits[--count], 0}; append(one); }
  }
  constexpr std::string_view view() const { return {chars, length}; }
};

/// Text's characters as a fixed_string of exactly their length. Clang prints a char array
/// with zeros after its end as a list of numbers, and one without as a string.
template <std::size_t N, std::size_t Capacity>
constexpr fixed_string<N> shrink_to(const text<Capacity>& from) {
  fixed_string<N> out;
  std::copy_n(from.chars, N - 1, out.chars);
  return out;
}
template <auto Text>
inline constexpr auto exact_string = shrink_to<Text.length + 1>(Text);

namespace detail {
/// Stem followed by K in three digits, "tape.saved.007": the names of leaves a pass makes
/// up (a block's saved tensors, a scan body's parameters).
template <fixed_string Stem, std::size_t K>
consteval auto numbered_name() {
  static_assert(K < 1000, "luminal: numbered names count to 999 (a block keeps at most 1000 tensors, a scan "
                          "body takes at most 1000 parameters)");
  fixed_string<Stem.size() + 4> out;
  for (std::size_t i = 0; i < Stem.size(); ++i) out.chars[i] = Stem.chars[i];
  out.chars[Stem.size()] = char('0' + K / 100);
  out.chars[Stem.size() + 1] = char('0' + K / 10 % 10);
  out.chars[Stem.size() + 2] = char('0' + K % 10);
  return out;
}
}  // namespace detail

}  // namespace luminal
