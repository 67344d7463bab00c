// Short names for long types. A computed node's type would otherwise spell its whole
// subgraph, and the compiler writes that spelling into the mangled name of every function
// instantiated with it (each op's builder, each gradient rule, each kernel): a gradient
// graph's names grow with the square of its depth, and mangling them came to half of a
// transformer step's compile time. An error inside a user's helper prints the same
// spelling, kilobytes of it. So a node is the class `named_node<H>` whose base is its
// definition: H hashes its op's spelling and its children's hashes (a child is again a
// short name, or a leaf or constant, hashed by its spelling), so every node's spelling is
// one level deep:
//
//     auto y = x * w + b;   // luminal::{anonymous}::named_node<1234...>
//
// A name finds its definition through a friend function that only the name's binding
// defines (name_tag declares it, name_binding<T, ...> gives its body, returning T), as
// exec/flat.hpp names its kernels. In an unnamed namespace: two types that print alike but
// are not the same (types of one name in the unnamed namespaces of two files) cannot meet
// under one name across files; within one file they would be a compile error (a binding
// defined twice), never a silent mix-up. nvcc compiles each file twice, and its two
// front ends print types differently, so the names would differ between host and device:
// there, and on compilers without __PRETTY_FUNCTION__, a node is its definition.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#if defined(__CUDACC__) || !(defined(__GNUC__) || defined(__clang__))
#define LUMINAL_SHORT_NAMES 0
#else
#define LUMINAL_SHORT_NAMES 1
#endif

namespace luminal {

#if LUMINAL_SHORT_NAMES
namespace {
namespace naming {
/// A hash of the compiler's spelling of T: FNV-1a's steps from `basis` with multiplier
/// `prime` (two such hashes make a kernel's key, exec/flat.hpp).
template <class T>
constexpr std::uint64_t spelling_hash(std::uint64_t basis, std::uint64_t prime) {
  // Its length from the array's size: string_view's own count is one constexpr loop over
  // the whole spelling, which may be longer than that limit.
  const std::string_view name(__PRETTY_FUNCTION__, sizeof(__PRETTY_FUNCTION__) - 1);
  std::uint64_t h = basis;
  // In blocks: one constexpr loop may run at most 262144 times (-fconstexpr-loop-limit),
  // and a large spelling (a whole flat graph, exec/flat.hpp) is longer.
  constexpr std::size_t block = 1 << 16;
  for (std::size_t start = 0; start < name.size(); start += block)
    for (std::size_t i = start; i < name.size() && i < start + block; ++i)
      h = (h ^ std::uint64_t(static_cast<unsigned char>(name[i]))) * prime;
  return h;
}
template <class T>
inline constexpr std::uint64_t first_hash = spelling_hash<T>(0xcbf29ce484222325ull, 0x100000001b3ull);
template <class T>
inline constexpr std::uint64_t second_hash = spelling_hash<T>(0x6a09e667f3bcc909ull, 0x9e3779b97f4a7c15ull);

#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning, and warns of the unknown group
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-template-friend"
#endif
template <std::uint64_t H1, std::uint64_t H2>
struct name_tag {
  friend constexpr auto named_type(name_tag);
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
template <class T, std::uint64_t H1, std::uint64_t H2>
struct name_binding {
  friend constexpr auto named_type(name_tag<H1, H2>) { return std::type_identity<T>{}; }
};
/// The type bound to the name (H1, H2).
template <std::uint64_t H1, std::uint64_t H2>
using named_type_t = typename decltype(named_type(name_tag<H1, H2>{}))::type;
}  // namespace naming

/// A computed node by its name: all of its definition's members, a short spelling.
template <std::uint64_t H>
struct named_node : naming::named_type_t<H, 0> {};

namespace naming {
/// A node's hash: a named child's is its name; any other type's (an op, a leaf, a
/// constant) hashes its spelling, once per type.
template <class T>
inline constexpr std::uint64_t hash_of = first_hash<T>;
template <std::uint64_t H>
inline constexpr std::uint64_t hash_of<named_node<H>> = H;
/// splitmix64's finalizer: each child's hash changes every bit of the node's.
constexpr std::uint64_t mix(std::uint64_t h) {
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}
/// A sequence's hash from its members' hashes, each step mixed: two folds with other
/// seeds and steps make a list's two hashes (list_hashes, flat::keyed). Folding hashes
/// already known, not a spelling of the whole list, keeps the work to one step a member.
constexpr std::uint64_t fold_hashes(const std::uint64_t* hashes, std::size_t count, std::uint64_t h,
                                    std::uint64_t step) {
  for (std::size_t i = 0; i < count; ++i) h = mix((h ^ hashes[i]) + step);
  return h;
}
/// The op's hash, then each child's, in order: what makes a definition (its shape and
/// element type follow from them). 64 bits: two definitions of one file under one name
/// would be a compile error, so a collision could not pass unseen.
template <class Op, class... Children>
constexpr std::uint64_t definition_hash() {
  std::uint64_t h = mix(hash_of<Op>);
  ((h = mix(h ^ hash_of<Children>)), ...);
  return h;
}
template <class Definition, std::uint64_t H, std::size_t = sizeof(name_binding<Definition, H, 0>)>
auto node_named() -> named_node<H>;
}  // namespace naming
}  // namespace

/// The type a node of op Op over Children with this definition is: its short name.
template <class Definition, class Op, class... Children>
using node_name = decltype(naming::node_named<Definition, naming::definition_hash<Op, Children...>()>());

namespace {
/// A list by its name: `type` is the list bound to (H1, H2), hashes of its spelling.
template <std::uint64_t H1, std::uint64_t H2>
struct named_list {
  using type = naming::named_type_t<H1, H2>;
};
namespace naming {
/// A list's two hashes, from its members' (hash_of), not from its spelling: spelled, a
/// program's node list is every node's spelling in one string, and hashing it a character
/// at a time passed GCC's constexpr operation limit.
template <class L>
struct list_hashes;
template <template <class...> class List, class... T>
struct list_hashes<List<T...>> {
  static constexpr std::uint64_t members[] = {hash_of<T>..., 0};
  static constexpr std::uint64_t first = fold_hashes(members, sizeof...(T), first_hash<List<>>, 0);
  static constexpr std::uint64_t second = fold_hashes(members, sizeof...(T), second_hash<List<>>, 0x9e3779b97f4a7c15ull);
};
template <class L, std::uint64_t H1 = list_hashes<L>::first, std::uint64_t H2 = list_hashes<L>::second,
          std::size_t = sizeof(name_binding<L, H1, H2>)>
auto list_named() -> named_list<H1, H2>;
}  // namespace naming
}  // namespace
/// A class, so that the name is worked out once per list.
template <class L>
struct list_name_of {
  using type = decltype(naming::list_named<L>());
};
#else
template <class L>
struct list_name_of {
  using type = std::type_identity<L>;
};
#endif

/// A list of nodes (a program's, its inputs') by a short name: `typename list_name<L>::type`
/// is L. A program's tables are members of class templates over its node list, and each
/// kernel reads them, so their names appear at every use; spelled out, a name holds every
/// node of the program.
template <class L>
using list_name = typename list_name_of<L>::type;

}  // namespace luminal
