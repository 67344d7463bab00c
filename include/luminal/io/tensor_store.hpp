// tensor_store: named tensors (parameters, optimizer state) held as dtype + shape + raw
// little-endian bytes, the in-memory side of a checkpoint (see io/safetensors.hpp).
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <boost/mp11/algorithm.hpp>
#include <xtensor/xarray.hpp>

#include "../core/dtype.hpp"
#include "../core/node.hpp"
#include "allocation_error.hpp"

namespace luminal {

/// A tensor_store lookup failed: no entry of that name, or it holds another element type.
class store_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Renames by prefix from a program's names to a store's (tensor_store::bind): each pair is
/// (the program's prefix, the store's prefix), and the first pair whose first prefix a name
/// starts with applies. {{"", "model."}} looks the program's "fc.weight" up as
/// "model.fc.weight"; {{"encoder.", "model.encoder."}} renames only the encoder's names.
using prefix_map = std::vector<std::pair<std::string, std::string>>;

/// The store's name for the program's `name` under `names` (see prefix_map).
inline std::string mapped_name(std::string_view name, const prefix_map& names) {
  for (const auto& [from, to] : names)
    if (name.starts_with(from)) return to + std::string(name.substr(from.size()));
  return std::string(name);
}

/// What tensor_store::bind matched, as PyTorch's load_state_dict reports missing_keys and
/// unexpected_keys: `bound`, the program's leaves it bound (the program's names); `missing`,
/// the program's parameters and optimizer state it had no entry for (the program's names;
/// data inputs are not expected in a store); `unused`, its entries that matched no leaf (the
/// store's names). Converts to the number bound, so `store.bind(prog) == 4` reads as before.
///     bind_report r = store.bind(prog);
///     if (!r.complete()) std::cerr << r.mismatch_message() << "\n";
struct bind_report {
  std::vector<std::string> bound, missing, unused;
  operator std::size_t() const { return bound.size(); }
  bool complete() const { return missing.empty() && unused.empty(); }

  /// One message naming what did not match, with the prefix map that explains it when one
  /// does ("the store's names start with 'model.' where the program's do not").
  std::string mismatch_message() const {
    auto list = [](const std::vector<std::string>& names) {
      std::string text;
      for (std::size_t i = 0; i < names.size() && i < 8; ++i) text += (i ? ", '" : "'") + names[i] + "'";
      if (names.size() > 8) text += " and " + std::to_string(names.size() - 8) + " more";
      return text;
    };
    std::string message = "luminal: tensor_store::bind: " + std::to_string(bound.size()) + " bound";
    if (!missing.empty()) message += "; the program's parameters without an entry: " + list(missing);
    if (!unused.empty()) message += "; entries that match no input: " + list(unused);
    const prefix_map map = suggested_prefix_map();
    if (map.empty()) return message;
    const auto& [from, to] = map.back();  // the renaming pair; any before it keep bound names as they are
    if (from.empty() && to.empty())       // only under a prefix map: without one, these names would have matched
      return message + ". The store's names are the program's own: bind without that prefix map";
    if (from.empty()) message += ". The store's names start with '" + to + "' where the program's do not";
    else if (to.empty()) message += ". The program's names start with '" + from + "' where the store's do not";
    else message += ". The store's names start with '" + to + "' where the program's start with '" + from + "'";
    message += ": bind with a prefix map, {";
    for (std::size_t i = 0; i < map.size(); ++i)
      message += (i ? ", {\"" : "{\"") + map[i].first + "\", \"" + map[i].second + "\"}";
    message += "}";
    const std::size_t explained = renamed_by(map);
    if (explained < missing.size())
      message += " (it explains " + std::to_string(explained) + " of the " + std::to_string(missing.size()) +
                 " missing)";
    return message;
  }

  /// A prefix map that renames `missing` names to `unused` ones (empty: none found): the
  /// one prefix difference that explains the most of them, after pairs that keep as they
  /// are the bound names it would rename ({{"lm_head.", "lm_head."}, {"", "model."}}).
  /// Candidates pair a few missing names with every unused one at their longest common end
  /// that starts a name part (after '.', '_' or '/'), at most 16 of them counted over all.
  prefix_map suggested_prefix_map() const {
    if (missing.empty() || unused.empty()) return {};
    auto starts_part = [](std::string_view s, std::size_t at) {
      return at == 0 || s[at - 1] == '.' || s[at - 1] == '_' || s[at - 1] == '/';
    };
    std::map<std::pair<std::string, std::string>, std::size_t> votes;
    for (std::size_t k = 0; k < missing.size() && k < 4; ++k) {
      const std::string_view m = missing[k];
      std::set<std::pair<std::string, std::string>> from_this;
      for (const std::string& u : unused) {
        std::size_t common = 0;
        while (common < m.size() && common < u.size() && m[m.size() - 1 - common] == u[u.size() - 1 - common])
          ++common;
        for (std::size_t len = common; len > 0; --len) {
          if (!starts_part(m, m.size() - len) || !starts_part(u, u.size() - len)) continue;
          from_this.emplace(std::string(m.substr(0, m.size() - len)), u.substr(0, u.size() - len));
          break;
        }
      }
      for (const auto& candidate : from_this) ++votes[candidate];
    }
    std::vector<std::pair<std::size_t, std::pair<std::string, std::string>>> ranked;
    for (const auto& [candidate, count] : votes) ranked.emplace_back(count, candidate);
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    prefix_map best;
    std::size_t best_count = 0;
    for (std::size_t r = 0; r < ranked.size() && r < 16; ++r) {
      prefix_map map{ranked[r].second};
      const std::size_t count = renamed_by(map);
      const auto length = [](const prefix_map& p) { return p.front().first.size() + p.front().second.size(); };
      if (count > best_count || (count == best_count && count && length(map) < length(best)))
        best = std::move(map), best_count = count;
    }
    if (best.empty()) return {};
    // Bound names the renaming pair would take away from what they matched keep theirs:
    // by their first part when that renames no missing name, else whole.
    const std::string from = best.front().first;
    prefix_map kept;
    for (const std::string& b : bound) {
      if (!b.starts_with(from) || (from.empty() && best.front().second.empty())) continue;
      std::string part = b;
      const std::size_t dot = b.find('.', from.size());
      if (dot != std::string::npos) {
        part = b.substr(0, dot + 1);
        for (const std::string& m : missing)
          if (m.starts_with(part)) part = b;
      }
      bool covered = false;
      for (const auto& pair : kept) covered = covered || b.starts_with(pair.first);
      if (!covered) kept.emplace_back(part, part);
    }
    kept.insert(kept.end(), best.begin(), best.end());
    return kept;
  }

  /// How many `missing` names `map` renames to `unused` ones.
  std::size_t renamed_by(const prefix_map& map) const {
    const std::set<std::string_view> targets(unused.begin(), unused.end());
    std::size_t count = 0;
    for (const std::string& m : missing) count += targets.contains(mapped_name(m, map));
    return count;
  }
};

/// Bytes per element of a dtype as stored (bool: one byte, 0 or 1).
constexpr std::size_t dtype_size(dtype_tag tag) {
  switch (tag) {
    case dtype_tag::f32: return 4;
    case dtype_tag::f64: return 8;
    case dtype_tag::i32: return 4;
    case dtype_tag::bf16: return 2;
    case dtype_tag::f16: return 2;
    default: return 1;
  }
}

namespace detail {

/// Copies `count` elements of T from native to little-endian bytes (or back: the same
/// operation). bool is stored as one byte, 0 or 1.
template <element_type T>
inline void copy_little_endian(std::byte* out, const T* in, std::size_t count) {
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < count; ++i) out[i] = std::byte(in[i] ? 1 : 0);
  } else if constexpr (std::endian::native == std::endian::little) {
    if (count) std::memcpy(out, in, count * sizeof(T));
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      unsigned char b[sizeof(T)];
      std::memcpy(b, in + i, sizeof(T));
      for (std::size_t k = 0; k < sizeof(T); ++k) out[i * sizeof(T) + k] = std::byte(b[sizeof(T) - 1 - k]);
    }
  }
}

/// The inverse of copy_little_endian: little-endian bytes to native elements. A bool
/// byte other than 0 reads as true.
template <element_type T>
inline void copy_from_little_endian(T* out, const std::byte* in, std::size_t count) {
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < count; ++i) out[i] = in[i] != std::byte{0};
  } else if constexpr (std::endian::native == std::endian::little) {
    if (count) std::memcpy(out, in, count * sizeof(T));
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      unsigned char b[sizeof(T)];
      for (std::size_t k = 0; k < sizeof(T); ++k) b[k] = static_cast<unsigned char>(in[i * sizeof(T) + sizeof(T) - 1 - k]);
      std::memcpy(out + i, b, sizeof(T));
    }
  }
}

/// Whether an entry of dtype `stored` binds a leaf of dtype `leaf` by conversion: both
/// floating, one of them bf16 or f16 (PyTorch's load_state_dict copies into each
/// parameter's dtype: a f32 checkpoint loads into a bf16 model, and back).
constexpr bool converts_on_binding(dtype_tag stored, dtype_tag leaf) {
  auto floating = [](dtype_tag t) {
    return t == dtype_tag::f32 || t == dtype_tag::f64 || t == dtype_tag::bf16 || t == dtype_tag::f16;
  };
  auto half = [](dtype_tag t) { return t == dtype_tag::bf16 || t == dtype_tag::f16; };
  return stored != leaf && floating(stored) && floating(leaf) && (half(stored) || half(leaf));
}

/// The elements of little-endian floating `bytes` of dtype `stored` converted to T: exact
/// where T holds them, rounded to nearest even otherwise (through f32 from f64, as
/// PyTorch's copy_ rounds a double into bf16).
template <floating_element T>
std::vector<T> converted_elements(dtype_tag stored, std::span<const std::byte> bytes) {
  const std::size_t count = bytes.size() / dtype_size(stored);
  std::vector<T> out(count);
  auto convert = [&]<class From>(From) {
    std::vector<From> in(count);
    copy_from_little_endian(in.data(), bytes.data(), count);
    for (std::size_t i = 0; i < count; ++i) {
      using Wide = std::conditional_t<std::is_same_v<From, f64> || std::is_same_v<T, f64>, f64, f32>;
      const Wide value = static_cast<Wide>(static_cast<arithmetic_t<From>>(in[i]));
      if constexpr (is_half_float<T>) out[i] = T(static_cast<float>(value));
      else out[i] = static_cast<T>(value);
    }
  };
  switch (stored) {
    case dtype_tag::f32: convert(f32{}); break;
    case dtype_tag::f64: convert(f64{}); break;
    case dtype_tag::bf16: convert(bf16{}); break;
    case dtype_tag::f16: convert(f16{}); break;
    default: break;
  }
  return out;
}

}  // namespace detail

/// Named tensors, each an element type, a shape and its row-major little-endian bytes.
/// Names and metadata are kept sorted (std::map), so saving is deterministic.
///
///     luminal::tensor_store store;
///     store.set("fc1.weight", xt::xarray<float>{{1, 2}, {3, 4}});
///     store.metadata["epoch"] = "3";
///     xt::xarray<float> w = store.get<float>("fc1.weight");   // store_error if absent
///     save_safetensors(store, "model.safetensors");           // io/safetensors.hpp
///     store.bind(prog);           // every leaf of a compile()d program that it names
///     store.bind_strict(prog, {{"", "model."}});   // all or nothing, "fc1.weight" as "model.fc1.weight"
///
/// set() on an existing name reuses that entry's buffer when it is large enough, so
/// writing the same parameters every step allocates nothing after the first time.
class tensor_store {
 public:
  struct entry {
    dtype_tag dtype = dtype_tag::f32;
    std::vector<index_t> shape;  // empty: a 0-d tensor (one element)
    std::vector<std::byte> data; // row-major, little-endian, element_count() * dtype_size(dtype)

    /// Product of the shape (1 for a 0-d tensor).
    std::size_t element_count() const {
      std::size_t n = 1;
      for (index_t e : shape) n *= static_cast<std::size_t>(e);
      return n;
    }
    std::size_t byte_size() const { return data.size(); }
  };

  /// Free-form string metadata, saved as safetensors' "__metadata__".
  std::map<std::string, std::string, std::less<>> metadata;

  /// Stores (copies) `value` under `name`, replacing any entry of that name.
  /// Throws allocation_error naming the entry when its memory cannot be allocated (the
  /// store is then as it was, but for an entry of that name that held other values).
  template <element_type T>
  void set(std::string name, const xt::xarray<T>& value) {
    entry& e = sized_slot(std::move(name), value.size() * dtype_size(dtype_of<T>()));
    e.dtype = dtype_of<T>();
    e.shape.assign(value.shape().begin(), value.shape().end());
    if constexpr (!std::is_same_v<T, bool>) {
      detail::copy_little_endian(e.data.data(), value.data(), value.size());
    } else {
      std::size_t i = 0;
      for (bool b : value) e.data[i++] = std::byte(b ? 1 : 0);
    }
  }

  /// Stores raw little-endian bytes; their size must be the shape's element count times
  /// the dtype's size. Throws store_error naming the key otherwise.
  void set_raw(std::string name, dtype_tag dtype, std::span<const index_t> shape, std::span<const std::byte> bytes) {
    std::size_t n = 1;
    for (index_t extent : shape) {
      if (extent < 0) throw store_error("luminal: tensor_store::set_raw('" + name + "'): negative extent " + std::to_string(extent));
      n *= static_cast<std::size_t>(extent);
    }
    if (n * dtype_size(dtype) != bytes.size())
      throw store_error("luminal: tensor_store::set_raw('" + name + "'): " + std::to_string(bytes.size()) +
                        " bytes given, but " + std::to_string(n) + " elements of " + std::string(dtype_name(dtype)) +
                        " need " + std::to_string(n * dtype_size(dtype)));
    entry& e = sized_slot(std::move(name), bytes.size());
    e.dtype = dtype;
    e.shape.assign(shape.begin(), shape.end());
    if (!bytes.empty()) std::memcpy(e.data.data(), bytes.data(), bytes.size());
  }

  /// Stores a prepared entry (moved in); its byte size must match its shape and dtype.
  void insert(std::string name, entry value) {
    std::size_t n = 1;
    for (index_t extent : value.shape) {
      if (extent < 0) throw store_error("luminal: tensor_store::insert('" + name + "'): negative extent " + std::to_string(extent));
      n *= static_cast<std::size_t>(extent);
    }
    if (n * dtype_size(value.dtype) != value.data.size())
      throw store_error("luminal: tensor_store::insert('" + name + "'): " + std::to_string(value.data.size()) +
                        " bytes, but " + std::to_string(n) + " elements of " + std::string(dtype_name(value.dtype)) +
                        " need " + std::to_string(n * dtype_size(value.dtype)));
    slot(std::move(name)).first->second = std::move(value);
  }

  /// The entry as an xtensor array of T. Throws store_error if there is no entry of that
  /// name, or if it holds another element type (the message names both).
  template <element_type T>
  xt::xarray<T> get(std::string_view name) const {
    const entry& e = at(name);
    if (e.dtype != dtype_of<T>())
      throw store_error("luminal: tensor_store entry '" + std::string(name) + "' holds " +
                        std::string(dtype_name(e.dtype)) + ", not the requested " + std::string(dtype_name<T>()));
    // xtensor's strides are products of the extents after each axis, in a signed type:
    // an empty tensor of shape [0, 2^40, 2^40] (a valid safetensors entry) would overflow
    // them. Refused here, where they are computed, rather than at loading.
    std::size_t stride = 1;
    for (index_t extent : e.shape) {
      if (extent == 0) continue;
      if (stride > std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) / std::size_t(extent))
        throw store_error("luminal: tensor_store entry '" + std::string(name) +
                          "' has extents whose product overflows an array index, although it is empty");
      stride *= std::size_t(extent);
    }
    std::vector<std::size_t> shape(e.shape.begin(), e.shape.end());
    xt::xarray<T> out = xt::xarray<T>::from_shape(shape);
    if constexpr (!std::is_same_v<T, bool>) {
      detail::copy_from_little_endian(out.data(), e.data.data(), out.size());
    } else {
      std::size_t i = 0;
      for (auto& b : out) b = e.data[i++] != std::byte{0};
    }
    return out;
  }

  /// Binds (copies) into `prog`, any compile()d program, every leaf whose name this store
  /// has an entry for, and reports what matched (bind_report: it converts to the number
  /// bound, and names the program's parameters the store lacked and the entries that
  /// matched nothing). Leaves it has no entry for are left as they are: bind them yourself
  /// (run() names any left unbound). An entry of another element type throws store_error
  /// naming both, before anything is bound; a wrong shape throws the program's input_error.
  /// Floating entries and leaves where one of the two is bf16 or f16 are converted as
  /// PyTorch's load_state_dict converts: an F32 file binds a bf16 parameter rounded to
  /// nearest even, a BF16 file an f32 one exactly.
  ///     auto eval = compile(argmax<1>(fc2(relu(fc1(x)))));
  ///     store.bind(eval);  eval.bind("x", images);
  ///     store.bind(eval, {{"", "model."}});   // the file's names are "model.fc1.weight", ...
  /// `names` renames the program's names to the store's by prefix (prefix_map), as a tape's
  /// call() renames a block's parameters.
  template <class Program>
  bind_report bind(Program& prog, const prefix_map& names = {}) const {
    return bind_matched(prog, names, false);
  }

  /// bind() when every parameter of the program has an entry and every entry binds a leaf
  /// (PyTorch's load_state_dict with strict=True); otherwise throws store_error, with
  /// nothing bound, naming what did not match and the prefix map that explains it when
  /// one does:
  ///     store.bind_strict(eval);
  ///     // store_error: ... the program's parameters without an entry: 'fc1.weight', ...;
  ///     // entries that match no input: 'model.fc1.weight', ... The store's names start
  ///     // with 'model.' where the program's do not: bind with a prefix map, {{"", "model."}}
  template <class Program>
  bind_report bind_strict(Program& prog, const prefix_map& names = {}) const {
    return bind_matched(prog, names, true);
  }

  /// What bind(prog, names) would bind and leave unmatched, binding nothing. Throws
  /// store_error as bind() does for an entry of another element type.
  template <class Program>
  bind_report match(const Program&, const prefix_map& names = {}) const {
    bind_report report;
    std::set<std::string_view> matched;
    boost::mp11::mp_for_each<typename Program::leaves>([&](auto leaf) {
      using L = decltype(leaf);
      using T = typename L::value_type;
      const std::string_view name = L::name.view();
      const std::string stored = mapped_name(name, names);
      auto it = entries_.find(stored);
      if (it == entries_.end()) {
        if (L::role != leaf_role::input) report.missing.emplace_back(name);
        return;
      }
      if constexpr (!element_type<T>) {
        throw store_error("luminal: tensor_store entry '" + stored + "' cannot bind the program's input '" +
                          std::string(name) + "', which holds quantized blocks (program::bind_quantized)");
      } else {
        if (it->second.dtype != dtype_of<T>() && !detail::converts_on_binding(it->second.dtype, dtype_of<T>()))
          throw store_error("luminal: tensor_store entry '" + stored + "' holds " +
                            std::string(dtype_name(it->second.dtype)) + ", but the program's input '" +
                            std::string(name) + "' is " + std::string(dtype_name<T>()));
      }
      matched.insert(it->first);
      report.bound.emplace_back(name);
    });
    for (const auto& [name, e] : entries_)
      if (!matched.contains(name)) report.unused.push_back(name);
    return report;
  }

  bool contains(std::string_view name) const { return entries_.find(name) != entries_.end(); }

  /// The entry of that name; throws store_error naming the key if there is none.
  const entry& at(std::string_view name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      std::string msg = "luminal: tensor_store has no entry '" + std::string(name) + "'";
      if (entries_.empty()) msg += " (the store is empty)";
      else msg += " (it has " + std::to_string(entries_.size()) + " entries, e.g. '" + entries_.begin()->first + "')";
      throw store_error(msg);
    }
    return it->second;
  }

  /// The entry of that name, to change its values in place (its byte size must stay).
  entry& at(std::string_view name) { return const_cast<entry&>(std::as_const(*this).at(name)); }

  /// All names, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    out.reserve(entries_.size());
    for (const auto& kv : entries_) out.push_back(kv.first);
    return out;
  }

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  /// Removes the entry of that name; returns whether there was one.
  bool erase(std::string_view name) {
    auto it = entries_.find(name);
    if (it == entries_.end()) return false;
    entries_.erase(it);
    return true;
  }

  void clear() {
    entries_.clear();
    metadata.clear();
  }

  /// Iteration over (name, entry) pairs in name order.
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  using map_type = std::map<std::string, entry, std::less<>>;
  /// The entry of that name, and whether it was created.
  std::pair<map_type::iterator, bool> slot(std::string&& name) {
    // Names arriving in order (load_safetensors inserts them sorted) go in at the end in
    // constant time, without a search.
    if (entries_.empty() || entries_.rbegin()->first < name)
      return {entries_.emplace_hint(entries_.end(), std::move(name), entry{}), true};
    auto it = entries_.find(name);
    if (it != entries_.end()) return {it, false};
    return entries_.emplace(std::move(name), entry{});
  }
  /// slot(name) with `bytes` bytes of data (kept when they are there already). A failed
  /// allocation removes an entry it created and throws allocation_error naming it.
  entry& sized_slot(std::string&& name, std::size_t bytes) {
    auto [it, created] = slot(std::move(name));
    try {
      it->second.data.resize(bytes);
    } catch (const std::bad_alloc&) {
      const std::string what = "tensor '" + it->first.substr(0, 200) + "' of a tensor_store";
      if (created) entries_.erase(it);
      throw allocation_error(bytes, what);
    }
    return it->second;
  }

  /// match(), then (unless `strict` and something did not match) binds what matched.
  template <class Program>
  bind_report bind_matched(Program& prog, const prefix_map& names, bool strict) const {
    bind_report report = match(prog, names);
    if (strict && !report.complete()) throw store_error(report.mismatch_message());
    boost::mp11::mp_for_each<typename Program::leaves>([&](auto leaf) {
      using L = decltype(leaf);
      using T = typename L::value_type;
      if constexpr (element_type<T>) {
        const std::string stored = mapped_name(L::name.view(), names);
        auto it = entries_.find(stored);
        if (it == entries_.end()) return;
        const std::span<const index_t> shape(it->second.shape);
        if constexpr (floating_element<T>) {
          if (it->second.dtype != dtype_of<T>()) {  // converts_on_binding (match checked it)
            const std::vector<T> values = detail::converted_elements<T>(it->second.dtype, it->second.data);
            prog.bind(L::name.view(), values.data(), shape);
            return;
          }
        }
        if constexpr (std::endian::native == std::endian::little && !std::is_same_v<T, bool>) {
          prog.bind(L::name.view(), reinterpret_cast<const T*>(it->second.data.data()), shape);
        } else {  // bytes that are not T's representation here: convert them first
          xt::xarray<T> values = get<T>(stored);
          prog.bind(L::name.view(), values.data(), shape);
        }
      }
    });
    return report;
  }

  map_type entries_;
};

}  // namespace luminal
