// exchange: the mean of gradients over the ranks of a communicator, as nodes of the
// program, so that forward, backward, exchange and update stay one program.
//
// Gradients are grouped into buckets of about BucketBytes, in the order the backward
// produces them (the last layers' first). Per gradient, a start node copies it into its
// bucket's staging memory; the bucket's last start sends the bucket's sum on its way. Per
// gradient, a finish node waits for its bucket and writes the gradient's mean over the
// ranks. A finish also reads the last start of the next bucket (a value it ignores), so
// that the plan, which runs kernels in dependency order, computes the next bucket's
// gradients while this bucket travels:
//
//     auto averaged = all_reduce_mean<(1 << 20)>(std::tuple{dw2, db2, dw1, db1});
//
// The kernels are run by the program's communicator (program::set_communicator). On a GPU
// backend the staging memory is the device's and the communicator (NCCL) orders each sum
// on the program's stream, so the host never waits and a CUDA Graph captures it all.
#pragma once
#include <array>
#include <cstring>
#include <tuple>

#include "../core/communicator.hpp"
#include "../core/node.hpp"

namespace luminal {

namespace detail {
template <class T>
struct scaled_copy_body {
  T* out;
  const T* in;
  T factor;
  LUMINAL_HD void operator()(index_t begin, index_t end) const {
    for (index_t i = begin; i < end; ++i) out[i] = in[i] * factor;
  }
};
}  // namespace detail

/// Copies its gradient (child 0) into bucket Bucket's staging memory at element Offset; the
/// bucket's last member (Closes) starts the bucket's sum. Child 1, the bucket's previous
/// start, orders the members. Its value is a token (a scalar 0) that finishes read.
template <int Bucket, std::size_t Offset, std::size_t BucketElements, bool Closes>
struct ExchangeStart {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr bool needs_communicator = true;
  static constexpr std::string_view name = Closes ? "exchange start (sends the bucket)" : "exchange start";
  template <class T, class... Previous>
  using value_type = T;
  template <class S, class... Previous>
  using shape = Shape<>;

  template <class N, class Runner>
  static void execute(Runner& runner, typename N::value_type* token) {
    using T = typename N::value_type;
    using G = boost::mp11::mp_first<typename N::children>;
    detail::exchange_state& ex = *runner.exchange;
    const index_t count = runner.template count_of<G>();
    if constexpr (std::remove_cvref_t<decltype(runner.backend)>::host_accessible) {
      std::byte* stage = ex.bucket(Bucket, BucketElements * sizeof(T));
      std::memcpy(stage + Offset * sizeof(T), runner.template data_of<G>(), std::size_t(count) * sizeof(T));
      if constexpr (Closes) ex.start(Bucket, BucketElements, dtype_of<T>());
      *token = T(0);
    } else {  // a GPU: staging, copy and sum stay in device memory, in the stream's order
      static_assert(requires { runner.backend.stream(); },
                    "luminal: data_parallel on a device backend needs its stream (the CUDA backend has one)");
      T* stage = static_cast<T*>(ex.device_bucket(Bucket, BucketElements * sizeof(T), runner.backend)) + Offset;
      runner.backend.parallel_for(count, detail::scaled_copy_body<T>{stage, runner.template data_of<G>(), T(1)});
      if constexpr (Closes) ex.start_on_device(Bucket, BucketElements, dtype_of<T>(), runner.backend.stream());
      // The token is never read as a value (finishes only order themselves after it).
    }
  }
};

/// Waits for bucket Bucket's sum and writes the mean over the ranks of the gradient at
/// element Offset of the bucket, of shape S. Child 0 is the bucket's closing start; child
/// 1, if any, the next bucket's (read only to be computed first).
template <int Bucket, std::size_t Offset, class S>
struct ExchangeFinish {
  static constexpr op_kind kind = op_kind::opaque;
  static constexpr bool needs_communicator = true;
  static constexpr std::string_view name = "exchange finish (mean over ranks)";
  template <class T, class... Next>
  using value_type = T;
  template <class Token, class... Next>
  using shape = S;

  template <class N, class Runner>
  static void execute(Runner& runner, typename N::value_type* out) {
    using T = typename N::value_type;
    detail::exchange_state& ex = *runner.exchange;
    const T* sum;
    if constexpr (std::remove_cvref_t<decltype(runner.backend)>::host_accessible) {
      ex.finish(Bucket);
      sum = reinterpret_cast<const T*>(ex.staging[std::size_t(Bucket)].data()) + Offset;
    } else {
      ex.finish_on_device(Bucket, runner.backend.stream());
      sum = static_cast<const T*>(ex.device_staging[std::size_t(Bucket)].get()) + Offset;
    }
    runner.backend.parallel_for(runner.template count_of<N>(),
                                detail::scaled_copy_body<T>{out, sum, T(1) / T(ex.comm->size())});
  }
};

namespace detail {
template <class S>
constexpr std::size_t static_element_count() {
  std::size_t n = 1;
  for (const Dim& d : S::dims) n *= d.is_static() ? std::size_t(d.offset) : 0;
  return n;
}

/// Where each of Count gradients of `bytes` goes: its bucket, its element offset in it,
/// and whether it opens or closes the bucket. A bucket closes once it holds BucketBytes.
template <std::size_t BucketBytes, std::size_t Count>
struct bucket_layout {
  std::array<int, Count> bucket{};
  std::array<std::size_t, Count> offset{};
  std::array<bool, Count> opens{}, closes{};
  std::array<std::size_t, Count> bucket_elements{};
  std::array<int, Count> last_of_bucket{};
  int bucket_count = 0;
};
template <std::size_t BucketBytes, std::size_t Count>
constexpr auto make_bucket_layout(const std::array<std::size_t, Count>& elements, std::size_t element_bytes) {
  bucket_layout<BucketBytes, Count> out;
  std::size_t filled = 0;
  for (std::size_t j = 0; j < Count; ++j) {
    const int b = out.bucket_count;
    out.bucket[j] = b;
    out.offset[j] = filled;
    out.opens[j] = filled == 0;
    filled += elements[j];
    if (filled * element_bytes >= BucketBytes || j + 1 == Count) {
      out.closes[j] = true;
      out.bucket_elements[std::size_t(b)] = filled;
      out.last_of_bucket[std::size_t(b)] = int(j);
      ++out.bucket_count;
      filled = 0;
    }
  }
  return out;
}

template <auto Layout, std::size_t J, class Grads, class... Starts>
constexpr auto exchange_starts(std::tuple<Starts...> done) {
  if constexpr (J == std::tuple_size_v<Grads>) {
    return done;
  } else {
    using G = std::tuple_element_t<J, Grads>;
    using Op = ExchangeStart<Layout.bucket[J], Layout.offset[J], Layout.bucket_elements[std::size_t(Layout.bucket[J])],
                             Layout.closes[J]>;
    if constexpr (Layout.opens[J]) {
      return exchange_starts<Layout, J + 1, Grads>(std::tuple_cat(done, std::tuple{typename node_of<Op, G>::type{}}));
    } else {
      using Previous = std::tuple_element_t<J - 1, std::tuple<Starts...>>;
      return exchange_starts<Layout, J + 1, Grads>(
          std::tuple_cat(done, std::tuple{typename node_of<Op, G, Previous>::type{}}));
    }
  }
}

template <auto Layout, std::size_t J, class Grads, class Starts>
constexpr auto exchange_finish() {
  constexpr int b = Layout.bucket[J];
  using G = std::tuple_element_t<J, Grads>;
  using Op = ExchangeFinish<b, Layout.offset[J], typename G::shape>;
  using Closing = std::tuple_element_t<std::size_t(Layout.last_of_bucket[std::size_t(b)]), Starts>;
  if constexpr (b + 1 < Layout.bucket_count) {
    using NextClosing = std::tuple_element_t<std::size_t(Layout.last_of_bucket[std::size_t(b + 1)]), Starts>;
    return typename node_of<Op, Closing, NextClosing>::type{};
  } else {
    return typename node_of<Op, Closing>::type{};
  }
}
}  // namespace detail

/// The mean over the ranks of each gradient, in buckets of about BucketBytes, in the order
/// given (the order the backward produces them in). Every gradient needs a static shape
/// and one element type.
template <std::size_t BucketBytes, expression... G>
constexpr auto all_reduce_mean(std::tuple<G...>) {
  static_assert(sizeof...(G) > 0, "luminal: all_reduce_mean needs at least one gradient");
  using T = typename std::tuple_element_t<0, std::tuple<G...>>::value_type;
  static_assert((std::is_same_v<typename G::value_type, T> && ...),
                "luminal: all_reduce_mean: every gradient must have one element type");
  static_assert(((detail::static_element_count<typename G::shape>() > 0) && ...),
                "luminal: all_reduce_mean: every gradient needs a static, non-empty shape");
  constexpr auto layout = detail::make_bucket_layout<BucketBytes, sizeof...(G)>(
      std::array<std::size_t, sizeof...(G)>{detail::static_element_count<typename G::shape>()...}, sizeof(T));
  using grads = std::tuple<G...>;
  using starts = decltype(detail::exchange_starts<layout, 0, grads>(std::tuple<>{}));
  return [&]<std::size_t... J>(std::index_sequence<J...>) {
    return std::tuple{detail::exchange_finish<layout, J, grads, starts>()...};
  }(std::index_sequence_for<G...>{});
}

}  // namespace luminal
