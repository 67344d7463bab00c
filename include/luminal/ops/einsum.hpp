// einsum<"pattern">(a, b) and einsum<"pattern">(a), as torch.einsum, for the forms that map
// onto existing ops: a contraction of two operands is one (batched) matmul with its
// operands permuted and reshaped into [batch..., M, K] x [batch..., K, N], so BLAS reads
// transposed operands in place; with nothing contracted it is a broadcast product. An
// index that only one operand has and the output lacks is summed first; one operand is a
// sum and a permute.
//
//     auto y = einsum<"ij,jk->ik">(a, b);             // matmul(a, b)
//     auto s = einsum<"bhqd,bhkd->bhqk">(q, k);       // attention scores, k read transposed
//     auto t = einsum<"ij->ji">(a);                   // transpose
//     auto r = einsum<"ijk->j">(x);                   // sum over axes 0 and 2
//     auto d = einsum<"i,i">(u, v);                   // implicit output: the dot product
//
// Indices are letters (a-z, A-Z); without "->" the output holds the indices seen exactly
// once, in alphabetical order (uppercase first), as torch. Refused at compile time, with
// the pattern and the reason in the message: an ellipsis, more than two operands, an index
// repeated within one operand (diagonals, traces), an output index no operand has, and an
// index whose extents differ between the operands.
#pragma once
#include <initializer_list>
#include <string_view>

#include "../core/errors.hpp"
#include "composite.hpp"
#include "matmul.hpp"
#include "permute.hpp"
#include "reduce.hpp"
#include "reshape.hpp"

namespace luminal {

namespace error {
template <auto Pattern, auto Reason>
struct einsum_cannot_do_this_pattern {
  static_assert(always_false<Pattern, Reason>,
                "luminal: einsum cannot do this pattern (see the pattern and the reason above)");
};
template <auto Pattern, auto First, auto Second>
struct einsum_index_has_different_extents_in_the_operands {
  static_assert(always_false<Pattern, First, Second>,
                "luminal: an einsum index names axes of different extents in the two operands "
                "(see the pattern and both shapes above)");
};
}  // namespace error

namespace detail::einsum {

inline constexpr int max_rank = 16;  // a permutation is coded in 4 bits per axis

/// A list of index letters.
struct letters {
  char c[max_rank]{};
  int n = 0;
  constexpr void add(char x) { c[n++] = x; }
  constexpr int find(char x) const {
    for (int k = 0; k < n; ++k)
      if (c[k] == x) return k;
    return -1;
  }
  constexpr bool has(char x) const { return find(x) >= 0; }
};

/// A parsed pattern: the letters of operand 0, operand 1 and the output (part 2).
struct spec {
  int operands = 1;
  letters part[3]{};
  text<112> problem{};  // empty when the pattern can be done
};

constexpr bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

constexpr spec parse(std::string_view p, int given) {
  spec s{};
  int part = 0;
  bool arrow = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == ' ') continue;
    if (c == '.') { s.problem.append("an ellipsis (...) is not supported: name every axis"); return s; }
    if (c == ',') {
      if (arrow || part == 1) { s.problem.append("at most two operands"); return s; }
      part = 1, s.operands = 2;
      continue;
    }
    if (c == '-' && i + 1 < p.size() && p[i + 1] == '>' && !arrow) { arrow = true, part = 2, ++i; continue; }
    if (!is_letter(c)) { s.problem.append("indices are letters a-z and A-Z, operands split by ',' and '->'"); return s; }
    if (s.part[part].n == max_rank) { s.problem.append("at most 16 indices per operand"); return s; }
    s.part[part].add(c);
  }
  if (s.operands != given) { s.problem.append("the pattern has another number of operands than the call"); return s; }
  for (int k = 0; k < s.operands; ++k)
    for (int i = 0; i < s.part[k].n; ++i)
      if (s.part[k].find(s.part[k].c[i]) != i) {
        s.problem.append("an index repeated within one operand (a diagonal or trace) is not supported");
        return s;
      }
  auto seen = [&](char x) { return int(s.part[0].has(x)) + int(s.operands == 2 && s.part[1].has(x)); };
  if (!arrow) {  // torch's implicit output: the indices seen once, in ASCII order
    for (char x = 'A'; x <= 'z'; ++x)
      if (is_letter(x) && seen(x) == 1) s.part[2].add(x);
    return s;
  }
  for (int i = 0; i < s.part[2].n; ++i) {
    if (s.part[2].find(s.part[2].c[i]) != i) { s.problem.append("an index repeated in the output"); return s; }
    if (seen(s.part[2].c[i]) == 0) { s.problem.append("an output index that no operand has"); return s; }
  }
  return s;
}

/// Operand k's letters that survive its first step: those the other operand or the output
/// has; the others are summed away.
constexpr letters kept(const spec& s, int k) {
  letters out;
  for (int i = 0; i < s.part[k].n; ++i) {
    const char x = s.part[k].c[i];
    if (s.part[2].has(x) || (s.operands == 2 && s.part[1 - k].has(x))) out.add(x);
  }
  return out;
}
constexpr unsigned long long summed_mask(const spec& s, int k) {
  unsigned long long mask = 0;
  const letters keep = kept(s, k);
  for (int i = 0; i < s.part[k].n; ++i)
    if (!keep.has(s.part[k].c[i])) mask |= 1ull << i;
  return mask;
}
/// The letters of `from` that `in` has (or lacks), those the output has (or lacks).
constexpr letters pick(const letters& from, const letters& in, bool in_wanted, const letters& out, int out_wanted) {
  letters picked;
  for (int i = 0; i < from.n; ++i) {
    const char x = from.c[i];
    if (in.has(x) == in_wanted && (out_wanted < 0 || out.has(x) == bool(out_wanted))) picked.add(x);
  }
  return picked;
}
constexpr letters joined(const letters& a, const letters& b, const letters& c = {}) {
  letters out = a;
  for (int i = 0; i < b.n; ++i) out.add(b.c[i]);
  for (int i = 0; i < c.n; ++i) out.add(c.c[i]);
  return out;
}
/// Where each letter of `to` sits in `from`, coded 4 bits per axis.
constexpr unsigned long long order_code(const letters& from, const letters& to) {
  unsigned long long code = 0;
  for (int i = 0; i < to.n; ++i) code |= static_cast<unsigned long long>(from.find(to.c[i])) << (4 * i);
  return code;
}

/// x permuted so that axis k of the result is axis (Code >> 4k) & 15 of x.
template <unsigned long long Code, expression X>
constexpr auto permuted_by(X x) {
  constexpr std::size_t R = shape_t<X>::rank;
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    if constexpr (((((Code >> (4 * K)) & 15ull) == K) && ...)) return x;
    else return permute<int((Code >> (4 * K)) & 15ull)...>(x);
  }(std::make_index_sequence<R>{});
}

/// The extents of x's axes named `want`, given x's axis letters `have`.
template <class S, std::size_t N>
constexpr dims_t<N> dims_of(const letters& have, const letters& want) {
  dims_t<N> out{};
  for (int i = 0; i < want.n; ++i) out[i] = S::dims[have.find(want.c[i])];
  return out;
}
template <class S>
constexpr Dim product_of(const letters& have, const letters& want) {
  Dim p{1};
  for (int i = 0; i < want.n; ++i) p = p * S::dims[have.find(want.c[i])];
  return p;
}
template <std::size_t B>
constexpr dims_t<B + 2> batch_and(const dims_t<B>& batch, Dim rows, Dim columns) {
  dims_t<B + 2> out{};
  for (std::size_t k = 0; k < B; ++k) out[k] = batch[k];
  out[B] = rows, out[B + 1] = columns;
  return out;
}
/// The extents of the letters `want`: 1 for those in `unit`, else SA's (axis letters ha)
/// where SA has the letter, else SB's (axis letters hb).
template <class SA, class SB, std::size_t N>
constexpr dims_t<N> dims_from(const letters& ha, const letters& hb, const letters& want, const letters& unit) {
  dims_t<N> out{};
  for (int i = 0; i < want.n; ++i) {
    const char x = want.c[i];
    out[i] = unit.has(x) ? Dim{1} : ha.has(x) ? SA::dims[ha.find(x)] : SB::dims[hb.find(x)];
  }
  return out;
}
constexpr bool ranks_match(const spec& s, std::initializer_list<int> ranks) {
  int k = 0;
  for (int r : ranks)
    if (s.part[k++].n != r) return false;
  return true;
}

/// Whether every letter the operands share has equal extents in both.
template <class SA, class SB>
constexpr bool shared_extents_agree(const spec& s) {
  for (int i = 0; i < s.part[0].n; ++i) {
    const int j = s.part[1].find(s.part[0].c[i]);
    if (j >= 0 && !(SA::dims[i] == SB::dims[j])) return false;
  }
  return true;
}

/// Operand K with the axes only it names (and the output lacks) summed away.
// The functions below take the pattern, not its parsed spec, as their template argument:
// nvcc spells a fixed_string argument in its host code correctly, a nested struct not always.
template <auto Pattern, int Operands, int K, expression X>
constexpr auto summed(X x) {
  constexpr unsigned long long mask = summed_mask(parse(Pattern.view(), Operands), K);
  using In = shape_t<X>;
  if constexpr (mask == 0) return x;
  else return reshape(reduce_kept<fn::SumReduce, mask>(x), shape_from<dropped_dims<In, mask>()>{});
}

template <auto Pattern, expression A>
constexpr auto one_operand(A a) {
  constexpr spec S = parse(Pattern.view(), 1);
  auto kept_a = summed<Pattern, 1, 0>(a);
  return permuted_by<order_code(kept(S, 0), S.part[2])>(kept_a);
}

template <auto Pattern, expression A, expression B>
constexpr auto two_operands(A a, B b) {
  constexpr spec S = parse(Pattern.view(), 2);
  constexpr letters la = kept(S, 0), lb = kept(S, 1), out = S.part[2];
  constexpr letters batch = pick(la, lb, true, out, 1), contracted = pick(la, lb, true, out, 0);
  constexpr letters free_a = pick(la, lb, false, out, -1), free_b = pick(lb, la, false, out, -1);
  auto a1 = permuted_by<order_code(la, joined(batch, free_a, contracted))>(summed<Pattern, 2, 0>(a));
  auto b1 = permuted_by<order_code(lb, joined(batch, contracted, free_b))>(summed<Pattern, 2, 1>(b));
  using SA = shape_t<decltype(a1)>;
  using SB = shape_t<decltype(b1)>;
  constexpr letters a_axes = joined(batch, free_a, contracted), b_axes = joined(batch, contracted, free_b);
  constexpr auto batch_dims = dims_of<SA, std::size_t(batch.n)>(a_axes, batch);
  constexpr letters product_axes = joined(batch, free_a, free_b);
  if constexpr (contracted.n == 0) {  // a broadcast product: [batch, free_a, 1..] * [batch, 1.., free_b]
    constexpr std::size_t R = std::size_t(product_axes.n);
    using AllA = shape_from<dims_from<SA, SA, R>(a_axes, a_axes, product_axes, free_b)>;
    using AllB = shape_from<dims_from<SB, SB, R>(b_axes, b_axes, product_axes, free_a)>;
    auto product = reshape(a1, AllA{}) * reshape(b1, AllB{});
    return permuted_by<order_code(product_axes, out)>(product);
  } else {
    constexpr Dim M = product_of<SA>(a_axes, free_a), K = product_of<SA>(a_axes, contracted);
    constexpr Dim N = product_of<SB>(b_axes, free_b);
    auto a2 = reshape(a1, shape_from<batch_and(batch_dims, M, K)>{});
    auto b2 = reshape(b1, shape_from<batch_and(batch_dims, K, N)>{});
    using Product = shape_from<dims_from<SA, SB, std::size_t(product_axes.n)>(a_axes, b_axes, product_axes, letters{})>;
    auto product = reshape(matmul(a2, b2), Product{});
    return permuted_by<order_code(product_axes, out)>(product);
  }
}

template <auto Pattern, expression A, expression B>
constexpr auto checked_two_operands(A a, B b) {
  constexpr spec S = parse(Pattern.view(), 2);
  using SA = shape_t<A>;
  using SB = shape_t<B>;
  if constexpr (!shared_extents_agree<SA, SB>(S)) {
    (void)error::einsum_index_has_different_extents_in_the_operands<Pattern, SA::text, SB::text>{};
    return a;
  } else {
    return two_operands<Pattern>(a, b);
  }
}

}  // namespace detail::einsum

/// torch.einsum(Pattern, a, ...) for one or two operands (see the top of this file for
/// the forms it does and those it refuses at compile time).
template <fixed_string Pattern, expression... X>
  requires(sizeof...(X) == 1 || sizeof...(X) == 2)
constexpr auto einsum(X... x) {
  constexpr detail::einsum::spec s = detail::einsum::parse(Pattern.view(), int(sizeof...(X)));
  constexpr bool ranks_fit = detail::einsum::ranks_match(s, {int(shape_t<X>::rank)...});
  using First = boost::mp11::mp_first<boost::mp11::mp_list<std::remove_cvref_t<X>...>>;
  if constexpr (s.problem.length > 0) {
    (void)error::einsum_cannot_do_this_pattern<Pattern, exact_string<s.problem>>{};
    return First{};
  } else if constexpr (!ranks_fit) {
    constexpr text<112> why = [] { text<112> t; t.append("an operand's rank differs from its number of indices"); return t; }();
    (void)error::einsum_cannot_do_this_pattern<Pattern, exact_string<why>>{};
    return First{};
  } else if constexpr (sizeof...(X) == 1) {
    return detail::einsum::one_operand<Pattern>(x...);
  } else {
    return detail::einsum::checked_two_operands<Pattern>(x...);
  }
}

}  // namespace luminal
