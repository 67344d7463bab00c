// reshape: same elements in row-major order, new extents. A view (flat index unchanged).
//
// As a coordinate map it is split at compile time into groups: runs of output axes and
// input axes with equal extent products ((B, 6, 4) -> (B, 24) is the groups {B}->{B} and
// {6, 4}->{24}). A group with one input axis needs no division (a split or a rename); only
// an input coordinate in a merged group is a division. An extent with an offset groups
// with static ones ((Seq+1, 4) -> (4*Seq+4)); extents the compiler cannot match as groups
// ((Seq+1, Batch) -> (Batch, Seq+1)) make one group of everything: flat index, then unravel.
#pragma once
#include <initializer_list>

#include "../core/errors.hpp"
#include "view.hpp"

namespace luminal {

namespace detail {
/// Product of dims[begin, end), or nothing where an extent cannot be multiplied (Seq+2).
template <std::size_t R>
constexpr bool dims_product(const dims_t<R>& dims, std::size_t begin, std::size_t end, Dim& product) {
  product = Dim{1};
  for (std::size_t k = begin; k < end; ++k) {
    const Dim& d = dims[k];
    if (!d.is_static() && d.offset != 0) return false;
    if (!product.is_static() && !d.is_static() &&
        product.symbol_text().size() + d.symbol_text().size() + 1 >= Dim::name_capacity)
      return false;
    product = product * d;
  }
  return true;
}

/// Product of dims[begin, end) for grouping a reshape: as dims_product, and also an extent
/// with an offset times static ones ((Seq+1, 4) is 4*Seq+4).
template <std::size_t R>
constexpr bool group_product(const dims_t<R>& dims, std::size_t begin, std::size_t end, Dim& product) {
  if (dims_product(dims, begin, end, product)) return true;
  product = Dim{1};
  for (std::size_t k = begin; k < end; ++k) {
    if (!product.is_static() && !dims[k].is_static()) return false;
    product = product * dims[k];
  }
  return true;
}

/// Group ids of the output and input axes of a reshape In -> Out; -1 marks an axis of
/// static extent 1 (its coordinate is 0, or is ignored).
template <std::size_t RO, std::size_t RI>
struct reshape_grouping {
  std::array<int, RO> out{};
  std::array<int, RI> in{};
};
template <std::size_t RI, std::size_t RO>
constexpr reshape_grouping<RO, RI> group_reshape(const dims_t<RI>& in, const dims_t<RO>& out) {
  reshape_grouping<RO, RI> g;
  std::size_t i = 0, o = 0;
  int group = 0;
  bool failed = false;
  while (!failed && (i < RI || o < RO)) {
    if (i < RI && in[i] == Dim{1}) { g.in[i++] = -1; continue; }
    if (o < RO && out[o] == Dim{1}) { g.out[o++] = -1; continue; }
    if (i == RI || o == RO) { failed = true; break; }
    bool found = false;
    for (std::size_t total = 2; !found && total <= (RI - i) + (RO - o); ++total)
      for (std::size_t a = 1; !found && a < total; ++a) {
        std::size_t b = total - a;
        if (i + a > RI || o + b > RO) continue;
        Dim pa, pb;
        if (!group_product(in, i, i + a, pa) || !group_product(out, o, o + b, pb) || !(pa == pb)) continue;
        for (std::size_t k = i; k < i + a; ++k) g.in[k] = group;
        for (std::size_t k = o; k < o + b; ++k) g.out[k] = group;
        i += a;
        o += b;
        ++group;
        found = true;
      }
    failed = !found;
  }
  if (failed) {
    for (auto& x : g.in) x = 0;
    for (auto& x : g.out) x = 0;
  }
  return g;
}

template <class Out, class In, std::size_t... K>
auto reshape_out_groups(std::index_sequence<K...>)
    -> std::integer_sequence<int, group_reshape(In::dims, Out::dims).out[K]...>;
template <class Out, class In, std::size_t... K>
auto reshape_in_groups(std::index_sequence<K...>)
    -> std::integer_sequence<int, group_reshape(In::dims, Out::dims).in[K]...>;

/// Whether no group (a number >= 0) holds two of the axes listed: every axis on that side
/// of a reshape is a group of its own (reshape_map's only_splits and only_merges).
constexpr bool each_group_once(std::initializer_list<int> groups) {
  for (auto a = groups.begin(); a != groups.end(); ++a)
    for (auto b = a + 1; b != groups.end(); ++b)
      if (*a >= 0 && *a == *b) return false;
  return true;
}
}  // namespace detail

/// A reshape as a coordinate map: out axis k belongs to group OutGroups[k], input axis m
/// to InGroups[m] (-1: extent 1). Groups are numbered in axis order.
template <class OutGroups, class InGroups>
struct reshape_map;
template <int... OG, int... IG>
struct reshape_map<std::integer_sequence<int, OG...>, std::integer_sequence<int, IG...>> : view_op {
  static constexpr std::string_view name = "reshape";
  static constexpr bool is_reshape = true;
  template <std::size_t RO, std::size_t RI>
  LUMINAL_COORDINATE_MAP static extents<RI> to_child(const extents<RO>& c, const extents<RO>& out, const extents<RI>& in) {
    constexpr int og[] = {OG..., -1};
    constexpr int ig[] = {IG..., -1};
    constexpr int groups = [] {
      int g = 0;
      for (int x : {OG..., -1}) g = x + 1 > g ? x + 1 : g;
      return g;
    }();
    index_t value[groups > 0 ? groups : 1] = {};
    for (std::size_t k = 0; k < RO; ++k)
      if (og[k] >= 0) value[og[k]] = value[og[k]] * out[k] + c[k];
    extents<RI> r{};
    for (std::size_t m = RI; m-- > 0;) {
      if (ig[m] < 0) continue;
      bool first_of_group = m == 0 || ig[m - 1] != ig[m];
      if (first_of_group) {
        r[m] = value[ig[m]];
      } else {
        r[m] = value[ig[m]] % in[m];
        value[ig[m]] /= in[m];
      }
    }
    return r;
  }

  /// Whether every output axis is a group of its own: the reshape only splits axes (a
  /// pool's (28, 28) -> (14, 2, 14, 2)), and output coordinates follow from input ones by
  /// multiply-adds alone (from_child).
  static constexpr bool only_splits = detail::each_group_once({OG...});
  /// Whether every input axis is a group of its own: output axes only merge into input
  /// axes (a convolution's (N, C, Ho Wo) GEMM output read as (N, C, Ho, Wo)). The input is
  /// then read at output coordinates by multiply-adds alone (to_child), and a loop over
  /// the input runs in rows as long as several of the output's.
  static constexpr bool only_merges = detail::each_group_once({IG...});
  /// How many input axes output axis k's group holds.
  static constexpr int inputs_of(std::size_t k) {
    constexpr int og[] = {OG..., -1};
    int n = 0;
    for (int g : {IG..., -1}) n += og[k] >= 0 && g == og[k];
    return n;
  }
  /// The output coordinates of input coordinates f (only_splits): each output axis is its
  /// group's input axes in row-major order.
  template <std::size_t RO, std::size_t RI>
  LUMINAL_COORDINATE_MAP static extents<RO> from_child(const extents<RI>& f, const extents<RI>& in) {
    static_assert(only_splits, "luminal: internal error: from_child of a reshape that merges axes");
    constexpr int og[] = {OG..., -1};
    constexpr int ig[] = {IG..., -1};
    extents<RO> r{};
    for (std::size_t k = 0; k < RO; ++k)
      if (og[k] >= 0)
        for (std::size_t m = 0; m < RI; ++m)
          if (ig[m] == og[k]) r[k] = r[k] * in[m] + f[m];
    return r;
  }
};

template <shape_type Target>
struct Reshape : view_op {
  static constexpr std::string_view name = "reshape";
  static constexpr bool is_reshape = true;
  template <class In>
  using shape = Target;
  /// The coordinate map the evaluator runs, once the input's shape is known.
  template <class In>
  using coordinate_map = reshape_map<decltype(detail::reshape_out_groups<Target, In>(std::make_index_sequence<Target::rank>{})),
                                     decltype(detail::reshape_in_groups<Target, In>(std::make_index_sequence<In::rank>{}))>;
};

/// `auto flat = reshape(images, shape<Batch, 784>);` The element count must match,
/// symbolic extents included (Batch*Seq may be split into Batch, Seq and back; (Seq+1, 4)
/// read as (1, Seq+1, 4) or (4*Seq+4)): the products must be equal as polynomials in the
/// symbols (same_element_count).
template <expression X, Dim... D>
  requires(same_element_count(shape_t<X>::dims, Shape<D...>::dims))
constexpr auto reshape(X, Shape<D...> = {}) {
  using In = shape_t<X>;
  using Out = Shape<D...>;
  if constexpr (std::is_same_v<In, Out>) return std::remove_cvref_t<X>{};
  else return typename node_of<Reshape<Out>, std::remove_cvref_t<X>>::type{};
}
/// Chosen when the element counts differ: never defined, its incomplete return type is the
/// error, at the caller's line (errors.hpp).
template <auto A, Dim... D>
error::reshape_must_keep_the_number_of_elements<A, exact_string<Shape<D...>::text>> reshape(const shaped<A>&,
                                                                                           Shape<D...>);

}  // namespace luminal
