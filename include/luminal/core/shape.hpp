// Shapes mix static extents and named symbolic extents resolved at run time (like
// CuTe's mixed static/dynamic layouts). A shape is a type, `Shape<Batch, 784>`, and every
// rule on shapes (broadcasting, matmul, reshape) is a constexpr function over its dims.
#pragma once
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "fixed_string.hpp"

namespace luminal {

/// One extent: either static (`784`) or symbolic (`Batch`, `Batch*Seq`, `Seq+2`).
/// A symbolic extent's value is `scale * product(symbols) + offset`; `symbols` holds the
/// '*'-joined, sorted symbol names so that equal products compare equal.
struct Dim {
  static constexpr std::size_t name_capacity = 40;
  char symbols[name_capacity]{};
  std::int64_t scale = 0;
  std::int64_t offset = 0;

  constexpr Dim() = default;
  constexpr Dim(std::int64_t extent) : scale(0), offset(extent) {}  // NOLINT: 784 is a Dim
  template <std::size_t N>
  constexpr explicit Dim(const char (&name)[N]) : scale(1), offset(0) {
    static_assert(N <= name_capacity, "luminal: symbol names are limited to 39 characters");
    for (std::size_t i = 0; i + 1 < N; ++i) symbols[i] = name[i];
  }

  /// All fields: how a Dim template argument is spelled in the host code nvcc generates,
  /// once cmake/nvcc-host/g++ has repaired it: Dim{{'B', 'a', ...}, 1, 0}.
  constexpr Dim(const char (&symbol_chars)[name_capacity], std::int64_t scale_, std::int64_t offset_)
      : scale(scale_), offset(offset_) {
    for (std::size_t i = 0; i < name_capacity; ++i) symbols[i] = symbol_chars[i];
  }

  constexpr bool is_static() const { return scale == 0; }
  constexpr std::string_view symbol_text() const {
    std::size_t n = 0;
    while (n < name_capacity && symbols[n] != 0) ++n;
    return {symbols, n};
  }
  friend constexpr bool operator==(const Dim&, const Dim&) = default;
};

/// `constexpr Dim Batch = symbol("Batch");` declares a symbolic extent.
template <std::size_t N>
constexpr Dim symbol(const char (&name)[N]) { return Dim{name}; }

namespace detail {
constexpr Dim with_symbols(Dim d, std::string_view joined) {
  for (auto& c : d.symbols) c = 0;
  if (joined.size() >= Dim::name_capacity)
    throw std::logic_error("luminal: product of symbol names is too long");
  for (std::size_t i = 0; i < joined.size(); ++i) d.symbols[i] = joined[i];
  return d;
}
// Merges two sorted '*'-joined symbol lists into one sorted list.
constexpr Dim multiply_symbols(Dim result, std::string_view a, std::string_view b) {
  std::array<std::string_view, 16> names{};
  std::size_t count = 0;
  for (std::string_view list : {a, b}) {
    while (!list.empty()) {
      auto star = list.find('*');
      names[count++] = list.substr(0, star);
      list = star == std::string_view::npos ? std::string_view{} : list.substr(star + 1);
    }
  }
  for (std::size_t i = 1; i < count; ++i)  // insertion sort: a handful of names
    for (std::size_t j = i; j > 0 && names[j] < names[j - 1]; --j) std::swap(names[j], names[j - 1]);
  text<Dim::name_capacity + 1> merged;
  for (std::size_t i = 0; i < count; ++i) {
    if (i) merged.append("*");
    merged.append(names[i]);
  }
  return with_symbols(result, merged.view());
}
}  // namespace detail

constexpr Dim operator+(Dim d, std::int64_t amount) { d.offset += amount; return d; }
constexpr Dim operator-(Dim d, std::int64_t amount) { d.offset -= amount; return d; }
/// A static factor scales an extent, offset included (4 * (Seq+1) is 4*Seq+4); two
/// symbolic extents multiply only without offsets (Batch * Seq), as (Seq+1) * Batch is no
/// single extent.
constexpr Dim operator*(Dim a, Dim b) {
  if (a.is_static() && b.is_static()) return Dim{a.offset * b.offset};
  if (a.is_static() || b.is_static()) {
    const std::int64_t factor = a.is_static() ? a.offset : b.offset;
    Dim scaled = a.is_static() ? b : a;
    if (factor == 0) return Dim{0};
    scaled.scale *= factor;
    scaled.offset *= factor;
    return scaled;
  }
  if (a.offset != 0 || b.offset != 0)
    throw std::logic_error("luminal: cannot multiply two symbolic extents when one has an offset (Seq+2)");
  Dim product;
  product.scale = a.scale * b.scale;
  return detail::multiply_symbols(product, a.symbol_text(), b.symbol_text());
}
constexpr Dim operator*(Dim a, std::int64_t b) { return a * Dim{b}; }
constexpr Dim operator*(std::int64_t a, Dim b) { return Dim{a} * b; }

template <std::size_t Capacity>
constexpr void append_dim(text<Capacity>& out, const Dim& d) {
  if (d.is_static()) { out.append_int(d.offset); return; }
  if (d.scale != 1) { out.append_int(d.scale); out.append("*"); }
  out.append(d.symbol_text());
  if (d.offset > 0) { out.append("+"); out.append_int(d.offset); }
  if (d.offset < 0) { out.append_int(d.offset); }
}

template <std::size_t R>
using dims_t = std::array<Dim, R>;

/// Renders dims as "(Batch, 784)" for error messages and DOT labels.
template <std::size_t R>
constexpr text<160> shape_text(const dims_t<R>& dims) {
  text<160> out;
  out.append("(");
  for (std::size_t i = 0; i < R; ++i) {
    if (i) out.append(", ");
    append_dim(out, dims[i]);
  }
  out.append(")");
  return out;
}

/// A tensor shape as a type. `Shape<>` is a scalar.
template <Dim... D>
struct Shape {
  static constexpr std::size_t rank = sizeof...(D);
  static constexpr dims_t<rank> dims{D...};
  static constexpr bool is_static = (D.is_static() && ... && true);
  static constexpr std::int64_t static_size() { return (std::int64_t{1} * ... * D.offset); }
  static constexpr auto text = shape_text(dims);
};

/// `shape<Batch, 784>` is a value of type `Shape<Batch, 784>`, for function arguments.
template <Dim... D>
inline constexpr Shape<D...> shape{};

template <class S>
struct is_shape : std::false_type {};
template <Dim... D>
struct is_shape<Shape<D...>> : std::true_type {};
template <class S>
concept shape_type = is_shape<S>::value;

namespace detail {
// A class template, not a function template: GCC 12 conflates some array-valued template
// arguments of function templates.
template <auto Dims, class Indices = std::make_index_sequence<Dims.size()>>
struct shape_from_dims;
template <auto Dims, std::size_t... I>
struct shape_from_dims<Dims, std::index_sequence<I...>> {
  using type = Shape<Dims[I]...>;
};
}  // namespace detail
/// The Shape type holding a constexpr array of dims.
template <auto Dims>
using shape_from = typename detail::shape_from_dims<Dims>::type;

// ---- rules --------------------------------------------------------------------------

/// Outcome of a constexpr shape rule: the dims, or which axis failed.
template <std::size_t R>
struct rule_result {
  dims_t<R> dims{};
  bool ok = true;
  std::size_t failing_axis = 0;
};

/// NumPy broadcasting, aligned from the right. A symbolic extent broadcasts only against
/// itself or a static 1: luminal will not guess at compile time that Batch == 3.
template <std::size_t RA, std::size_t RB>
constexpr auto broadcast_rule(const dims_t<RA>& a, const dims_t<RB>& b) {
  constexpr std::size_t R = RA > RB ? RA : RB;
  rule_result<R> result;
  for (std::size_t i = 0; i < R; ++i) {
    Dim one{1};
    Dim da = i < R - RA ? one : a[i - (R - RA)];
    Dim db = i < R - RB ? one : b[i - (R - RB)];
    if (da == db) result.dims[i] = da;
    else if (da == one) result.dims[i] = db;
    else if (db == one) result.dims[i] = da;
    else if (result.ok) { result.ok = false; result.failing_axis = i; }
  }
  return result;
}

/// Whether `from` can be expanded to `to`: same rank, and each axis equal or a static 1.
template <std::size_t R>
constexpr bool expandable(const dims_t<R>& from, const dims_t<R>& to) {
  for (std::size_t i = 0; i < R; ++i)
    if (!(from[i] == to[i] || from[i] == Dim{1})) return false;
  return true;
}

/// Total element count as a canonical monomial `coefficient * symbols`, for reshape.
struct element_count {
  std::int64_t coefficient = 1;
  Dim symbols{1};
  bool has_offset_symbol = false;
};
template <std::size_t R>
constexpr element_count count_elements(const dims_t<R>& dims) {
  element_count count;
  for (const Dim& d : dims) {
    if (d.is_static()) { count.coefficient *= d.offset; continue; }
    if (d.offset != 0) { count.has_offset_symbol = true; continue; }
    count.coefficient *= d.scale;
    Dim unit = d;
    unit.scale = 1;
    count.symbols = count.symbols * unit;
  }
  return count;
}

namespace detail {
constexpr std::int64_t gcd_of(std::int64_t a, std::int64_t b) {
  a = a < 0 ? -a : a;
  b = b < 0 ? -b : b;
  while (b != 0) {
    std::int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

/// An element count as an integer times irreducible factors: each symbol of a product
/// (Batch*Seq gives Batch and Seq), and each extent with an offset divided by the gcd of
/// its scale and offset and signed so its scale is positive (2*Seq+4 gives 2 and Seq+2).
/// Integer polynomials factor uniquely, so equal counts have equal factors; a factor that
/// factors further (Seq*Seq-1) is kept whole and only makes counts compare unequal: a
/// refusal, never a wrong acceptance.
template <std::size_t Capacity>
struct factored_count {
  std::int64_t constant = 1;
  std::array<Dim, Capacity> factors{};
  std::size_t count = 0;
  bool overflow = false;

  // No __builtin_mul_overflow: nvcc's front end cannot evaluate it in a constant expression.
  constexpr void scale_by(std::int64_t k) {
    constexpr std::int64_t most = std::int64_t{1} << 62;
    const std::int64_t ak = k < 0 ? -k : k, ac = constant < 0 ? -constant : constant;
    if (ak != 0 && ac != 0 && (ak >= most || ac >= most || ac > most / ak)) overflow = true;
    if (!overflow) constant *= k;
  }
  constexpr void add(const Dim& factor) { factors[count++] = factor; }
};
/// At most this many symbols in one extent: one-letter names joined by '*'.
inline constexpr std::size_t max_symbols_per_dim = Dim::name_capacity / 2;

template <std::size_t R>
constexpr factored_count<R * max_symbols_per_dim + 1> factor_count(const dims_t<R>& dims) {
  factored_count<R * max_symbols_per_dim + 1> f;
  for (const Dim& d : dims) {
    if (d.is_static()) { f.scale_by(d.offset); continue; }
    if (d.offset != 0) {
      std::int64_t content = gcd_of(d.scale, d.offset);
      if (d.scale < 0) content = -content;
      Dim primitive = d;
      primitive.scale /= content;
      primitive.offset /= content;
      f.scale_by(content);
      f.add(primitive);
      continue;
    }
    f.scale_by(d.scale);
    std::string_view rest = d.symbol_text();
    while (!rest.empty()) {
      auto star = rest.find('*');
      f.add(with_symbols(Dim{"_"}, rest.substr(0, star)));
      rest = star == std::string_view::npos ? std::string_view{} : rest.substr(star + 1);
    }
  }
  return f;
}
}  // namespace detail

/// Whether two shapes hold as many elements at every value of their symbols: their
/// products are equal polynomials. (Seq+1, 4) and (1, Seq+1, 4), (2*Seq, 3) and (6*Seq),
/// (Batch, Seq) and (Seq*Batch) are; (Seq+1, 4) and (Seq, 4) are not.
template <std::size_t RA, std::size_t RB>
constexpr bool same_element_count(const dims_t<RA>& a, const dims_t<RB>& b) {
  if constexpr (RA == RB)
    if (a == b) return true;
  auto ca = count_elements(a), cb = count_elements(b);
  if (!ca.has_offset_symbol && !cb.has_offset_symbol)  // monomials: compared as they are
    return ca.coefficient == cb.coefficient && ca.symbols == cb.symbols;
  auto fa = detail::factor_count(a);
  auto fb = detail::factor_count(b);
  if (fa.overflow || fb.overflow) return false;
  if (fa.constant == 0 || fb.constant == 0) return fa.constant == fb.constant;
  if (fa.constant != fb.constant || fa.count != fb.count) return false;
  std::array<bool, RB * detail::max_symbols_per_dim + 1> matched{};
  for (std::size_t i = 0; i < fa.count; ++i) {
    bool found = false;
    for (std::size_t j = 0; j < fb.count && !found; ++j)
      if (!matched[j] && fa.factors[i] == fb.factors[j]) found = matched[j] = true;
    if (!found) return false;
  }
  return true;
}

/// `sum` = a + b where that is one extent: static ones, a symbolic extent and a static one
/// (Past + 1), or multiples of one symbol product (Seq + 2*Seq is 3*Seq). False for
/// others (Past + Seq), which no single extent spells.
constexpr bool add_extents(const Dim& a, const Dim& b, Dim& sum) {
  if (a.is_static()) { sum = b + a.offset; return true; }
  if (b.is_static()) { sum = a + b.offset; return true; }
  if (a.symbol_text() != b.symbol_text()) return false;
  sum = a;
  sum.scale += b.scale;
  sum.offset += b.offset;
  if (sum.scale == 0) sum = Dim{sum.offset};
  return true;
}
/// -d: a pad by -d elements removes them (the adjoint of a pad along a symbolic axis).
constexpr Dim negated(Dim d) {
  d.scale = -d.scale;
  d.offset = -d.offset;
  return d;
}

template <std::size_t R>
constexpr std::size_t normalize_axis(int axis) {
  return axis < 0 ? std::size_t(int(R) + axis) : std::size_t(axis);
}

// ---- runtime ------------------------------------------------------------------------

/// Values of the symbols bound so far ("Batch" = 128). A fixed array: no allocation.
struct symbol_values {
  static constexpr std::size_t capacity = 16;
  std::array<std::string_view, capacity> names{};
  std::array<std::int64_t, capacity> values{};
  std::size_t count = 0;

  const std::int64_t* find(std::string_view name) const {
    for (std::size_t i = 0; i < count; ++i)
      if (names[i] == name) return &values[i];
    return nullptr;
  }
  void set(std::string_view name, std::int64_t value) {
    if (count == capacity) throw std::length_error("luminal: more than 16 distinct symbols");
    names[count] = name;
    values[count++] = value;
  }
};

/// The value of one extent given the symbol values; throws std::invalid_argument naming an
/// unbound symbol, and std::overflow_error where the value does not fit in 64 bits (the
/// extents of the inputs bound multiply to more): a wrapped extent would size buffers
/// smaller than the kernels index.
inline std::int64_t resolve(const Dim& d, const symbol_values& symbols) {
  if (d.is_static()) return d.offset;
  std::int64_t product = d.scale;
  std::string_view rest = d.symbol_text();
  bool overflow = false;
  while (!rest.empty()) {
    auto star = rest.find('*');
    auto name = rest.substr(0, star);
    rest = star == std::string_view::npos ? std::string_view{} : rest.substr(star + 1);
    const std::int64_t* value = symbols.find(name);
    if (!value)
      throw std::invalid_argument("luminal: symbol '" + std::string(name) +
                                  "' has no value: no bound input has an axis of that extent");
    overflow = overflow || __builtin_mul_overflow(product, *value, &product);
  }
  if (overflow || __builtin_add_overflow(product, d.offset, &product)) {
    text<64> extent;
    append_dim(extent, d);
    throw std::overflow_error("luminal: the extent " + std::string(extent.view()) +
                              " is too large for 64 bits at the extents bound");
  }
  return product;
}

/// Shape text for runtime messages: "(Batch, 784)".
template <std::size_t R>
std::string to_string(const dims_t<R>& dims) {
  return std::string(shape_text(dims).view());
}

}  // namespace luminal
