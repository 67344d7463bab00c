// Data sets on disk: the IDX format (MNIST, Fashion-MNIST), plain or gzip-compressed,
// Fashion-MNIST loading, and seeded shuffled mini-batches.
//
// IDX layout: two zero bytes, a type byte, a rank byte, one big-endian u32 per dimension,
// then the elements, row-major and big-endian.
#pragma once
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>
#include <xtensor/xarray.hpp>

#include "../core/dtype.hpp"
#include "idx_source.hpp"

namespace luminal {

/// IDX element types (the type byte of the header).
enum class idx_type : std::uint8_t { u8 = 0x08, i8 = 0x09, i16 = 0x0B, i32 = 0x0C, f32 = 0x0D, f64 = 0x0E };

constexpr std::size_t idx_type_size(idx_type t) {
  switch (t) {
    case idx_type::u8:
    case idx_type::i8: return 1;
    case idx_type::i16: return 2;
    case idx_type::i32:
    case idx_type::f32: return 4;
    default: return 8;
  }
}

constexpr std::string_view idx_type_name(idx_type t) {
  switch (t) {
    case idx_type::u8: return "u8";
    case idx_type::i8: return "i8";
    case idx_type::i16: return "i16";
    case idx_type::i32: return "i32";
    case idx_type::f32: return "f32";
    default: return "f64";
  }
}

/// The C++ element type of each IDX type.
template <class T>
constexpr bool idx_type_matches(idx_type t) {
  if constexpr (std::is_same_v<T, std::uint8_t>) return t == idx_type::u8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return t == idx_type::i8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return t == idx_type::i16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return t == idx_type::i32;
  else if constexpr (std::is_same_v<T, float>) return t == idx_type::f32;
  else if constexpr (std::is_same_v<T, double>) return t == idx_type::f64;
  else return false;
}

/// The contents of an IDX file: its element type, its dimensions, and its elements as
/// native-endian bytes (row-major). values<T>() views them as T (T must match the type:
/// std::uint8_t for u8, std::int8_t, std::int16_t, std::int32_t, float, double);
/// to_xarray<T>() converts them to any arithmetic T.
///
///     luminal::idx_array labels = luminal::read_idx("train-labels-idx1-ubyte.gz");
///     std::span<const std::uint8_t> y = labels.values<std::uint8_t>();   // dims {60000}
///     xt::xarray<float> x = luminal::read_idx("train-images-idx3-ubyte.gz").to_xarray<float>();
struct idx_array {
  idx_type type = idx_type::u8;
  std::vector<std::size_t> dims;
  std::vector<std::byte> bytes;

  /// Number of elements (the product of dims).
  std::size_t size() const { return bytes.size() / idx_type_size(type); }

  template <class T>
  std::span<const T> values() const {
    if (!idx_type_matches<T>(type))
      throw data_error("luminal: idx_array::values<T>(): T does not match the array's element type " +
                       std::string(idx_type_name(type)));
    return {reinterpret_cast<const T*>(bytes.data()), size()};
  }

  /// The elements converted to T, shaped by dims. Throws data_error when dims do not
  /// describe the bytes held (an idx_array filled by hand), or when their product
  /// overflows the index type of xtensor's strides, even for an empty array.
  template <class T>
  xt::xarray<T> to_xarray() const {
    std::size_t nonzero = 1;  // the largest stride xtensor computes
    bool empty = false;
    for (std::size_t d : dims) {
      if (d == 0) {
        empty = true;
        continue;
      }
      if (nonzero > std::size_t(std::numeric_limits<std::ptrdiff_t>::max()) / d)
        throw data_error("luminal: idx_array::to_xarray(): dimensions " + dims_text() + " overflow");
      nonzero *= d;
    }
    if ((empty ? 0 : nonzero) != size() || bytes.size() % idx_type_size(type) != 0)
      throw data_error("luminal: idx_array::to_xarray(): dimensions " + dims_text() + " do not describe the " +
                       std::to_string(bytes.size()) + " bytes of " + std::string(idx_type_name(type)) + " held");
    xt::xarray<T> out = xt::xarray<T>::from_shape(dims);
    auto convert = [&](auto tag) {
      using S = decltype(tag);
      const S* in = reinterpret_cast<const S*>(bytes.data());
      T* o = out.data();
      for (std::size_t i = 0, n = size(); i < n; ++i) o[i] = static_cast<T>(in[i]);
    };
    switch (type) {
      case idx_type::u8: convert(std::uint8_t{}); break;
      case idx_type::i8: convert(std::int8_t{}); break;
      case idx_type::i16: convert(std::int16_t{}); break;
      case idx_type::i32: convert(std::int32_t{}); break;
      case idx_type::f32: convert(float{}); break;
      case idx_type::f64: convert(double{}); break;
    }
    return out;
  }

  /// "60000 x 28 x 28"
  std::string dims_text() const {
    std::string text;
    for (std::size_t k = 0; k < dims.size(); ++k) text += (k ? " x " : "") + std::to_string(dims[k]);
    return text;
  }
};

/// The default limit on the number of elements read_idx accepts (2^32, 4 GiB of bytes).
inline constexpr std::uint64_t idx_default_max_elements = std::uint64_t(1) << 32;

/// Reads an IDX file, plain or gzip-compressed (detected from the content, not the name).
/// Throws data_error naming the file when it is missing, has a bad magic number, an
/// unsupported type byte, zero dimensions, or dimensions whose product (of the non-zero
/// ones, so that the strides of an empty array cannot overflow either) exceeds
/// `max_elements`; when its data is truncated or followed by extra bytes; and when it is
/// not valid gzip, or holds more than one gzip member or anything after it.
/// A corrupt header costs no memory: a plain file's size must match the header before
/// anything is allocated, a gzip file's data must fit what its compressed size can
/// expand to (deflate's 1032:1 at most), memory grows only with data actually
/// decompressed, and trailing data is decompressed no further than 1 MiB.
inline idx_array read_idx(const std::filesystem::path& path, std::uint64_t max_elements = idx_default_max_elements) {
  namespace fs = std::filesystem;
  using detail::idx::fail;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) fail(path, "file does not exist");
  if (!fs::is_regular_file(status)) fail(path, "is not a regular file");

  detail::idx::byte_source in(path);
  unsigned char magic[4];
  std::size_t got = in.read(magic, 4);
  if (got < 4) fail(path, "is too short for the 4-byte IDX magic number (" + std::to_string(got) + " bytes)");
  if (magic[0] != 0 || magic[1] != 0)
    fail(path, "bad magic number (the first two bytes must be 0; this is not an IDX file)");
  const unsigned type_byte = magic[2];
  if (type_byte != 0x08 && type_byte != 0x09 && type_byte != 0x0B && type_byte != 0x0C && type_byte != 0x0D &&
      type_byte != 0x0E) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", type_byte);
    fail(path, std::string("unsupported element type ") + hex +
                   " (supported: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64)");
  }
  idx_array out;
  out.type = static_cast<idx_type>(type_byte);
  const unsigned rank = magic[3];
  if (rank == 0) fail(path, "has 0 dimensions");

  std::uint64_t nonzero = 1;  // the product of the non-zero dimensions
  bool has_zero = false, too_many = false;
  for (unsigned k = 0; k < rank; ++k) {
    unsigned char b[4];
    if (in.read(b, 4) < 4)
      fail(path, "is truncated: it ends inside the header (dimension " + std::to_string(k) + " of " +
                     std::to_string(rank) + ")");
    const std::uint64_t d = (std::uint64_t(b[0]) << 24) | (std::uint64_t(b[1]) << 16) | (std::uint64_t(b[2]) << 8) | b[3];
    out.dims.push_back(std::size_t(d));
    if (d == 0) has_zero = true;
    else if (nonzero > max_elements / d) too_many = true;  // checked before multiplying: no overflow
    else nonzero *= d;
  }
  const std::string dims_text = out.dims_text();
  const std::size_t element = idx_type_size(out.type);
  if (too_many || nonzero > std::numeric_limits<std::size_t>::max() / element)
    fail(path, "dimensions " + dims_text + " hold more elements than the limit of " + std::to_string(max_elements) +
                   (has_zero ? " (not counting the zero extent)" : ""));
  const std::uint64_t expected = has_zero ? 0 : nonzero * element;
  const std::uint64_t header_bytes = 4 + 4 * std::uint64_t(rank);
  const std::string need = "dimensions " + dims_text + " need " + std::to_string(expected) + " bytes of " +
                           std::string(idx_type_name(out.type)) + " data";
  if (!in.gzip() && in.file_size() < header_bytes + expected)
    fail(path, "is truncated: " + need + ", the file holds " + std::to_string(in.file_size() - header_bytes));
  if (in.gzip() && expected > detail::idx::most_inflated_bytes(in.file_size()))
    fail(path, "is truncated: " + need + ", more than its " + std::to_string(in.file_size()) +
                   " bytes of gzip data can expand to");

  // Grow with the data actually read: at most 64 MiB ahead of it.
  std::size_t filled = 0;
  while (filled < expected) {
    const std::size_t want = std::min<std::size_t>(std::size_t(expected) - filled, std::size_t(64) << 20);
    out.bytes.resize(filled + want);
    const std::size_t n = in.read(out.bytes.data() + filled, want);
    filled += n;
    if (n < want) fail(path, "is truncated: " + need + ", the file holds " + std::to_string(filled));
  }
  in.require_end("the " + std::to_string(expected) + " bytes that dimensions " + dims_text + " describe");

  // Big-endian elements to native order.
  if (element > 1 && std::endian::native == std::endian::little) {
    for (std::size_t i = 0; i < expected; i += element) std::reverse(out.bytes.begin() + i, out.bytes.begin() + i + element);
  }
  return out;
}

// ---- Fashion-MNIST -----------------------------------------------------------------------

/// Where Debian's dataset-fashion-mnist package installs the files.
inline constexpr std::string_view fashion_mnist_default_dir = "/usr/share/datasets/fashion-mnist";

/// Mean and standard deviation of the training images' pixels scaled to [0, 1].
inline constexpr float fashion_mnist_mean = 0.28604060f;
inline constexpr float fashion_mnist_std = 0.35302424f;

enum class dataset_split { train, test };

struct fashion_mnist_data {
  xt::xarray<float> images;         // [N, 784], pixels scaled to [0, 1]
  xt::xarray<std::int32_t> labels;  // [N], classes 0..9
};

/// Loads the Fashion-MNIST training (60000) or test (10000) split from `dir`, which holds
/// train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
/// t10k-labels-idx1-ubyte.gz (or the same names without .gz). Checks that the images are
/// 28 x 28 u8, that the counts of images and labels agree, and that labels are in 0..9.
///
///     auto train = luminal::load_fashion_mnist();      // Debian: dataset-fashion-mnist
///     auto test = luminal::load_fashion_mnist(luminal::fashion_mnist_default_dir, luminal::dataset_split::test);
///     luminal::normalize(train.images, luminal::fashion_mnist_mean, luminal::fashion_mnist_std);
inline fashion_mnist_data load_fashion_mnist(const std::filesystem::path& dir = std::filesystem::path(fashion_mnist_default_dir),
                                             dataset_split split = dataset_split::train) {
  namespace fs = std::filesystem;
  const std::string prefix = split == dataset_split::train ? "train" : "t10k";
  auto find = [&](const std::string& stem) {
    const fs::path gz = dir / (stem + ".gz");
    const fs::path plain = dir / stem;
    std::error_code ec;
    if (fs::exists(gz, ec)) return gz;
    if (fs::exists(plain, ec)) return plain;
    throw data_error("luminal: Fashion-MNIST file '" + gz.string() + "' not found (install the Debian package " +
                     "dataset-fashion-mnist, or pass the directory holding the IDX files)");
  };
  const fs::path image_path = find(prefix + "-images-idx3-ubyte");
  const fs::path label_path = find(prefix + "-labels-idx1-ubyte");
  const idx_array images = read_idx(image_path);
  const idx_array labels = read_idx(label_path);

  if (images.type != idx_type::u8 || images.dims.size() != 3 || images.dims[1] != 28 || images.dims[2] != 28)
    detail::idx::fail(image_path, "expected u8 images of 28 x 28");
  if (labels.type != idx_type::u8 || labels.dims.size() != 1) detail::idx::fail(label_path, "expected a list of u8 labels");
  const std::size_t n = images.dims[0];
  if (labels.dims[0] != n)
    detail::idx::fail(label_path, "holds " + std::to_string(labels.dims[0]) + " labels, but '" + image_path.string() +
                                      "' holds " + std::to_string(n) + " images");

  fashion_mnist_data out;
  out.images = xt::xarray<float>::from_shape({n, std::size_t(784)});
  const auto pixels = images.values<std::uint8_t>();
  float* o = out.images.data();
  for (std::size_t i = 0; i < pixels.size(); ++i) o[i] = float(pixels[i]) / 255.0f;
  out.labels = xt::xarray<std::int32_t>::from_shape({n});
  const auto classes = labels.values<std::uint8_t>();
  for (std::size_t i = 0; i < n; ++i) {
    if (classes[i] > 9)
      detail::idx::fail(label_path, "label " + std::to_string(i) + " is " + std::to_string(int(classes[i])) +
                                        "; Fashion-MNIST labels are 0..9");
    out.labels.data()[i] = classes[i];
  }
  return out;
}

/// (x - mean) / std for every element, in place.
inline void normalize(xt::xarray<float>& images, float mean, float std) {
  if (!(std > 0.0f)) throw data_error("luminal: normalize(): std must be positive, got " + std::to_string(std));
  const float scale = 1.0f / std;
  for (float& v : images) v = (v - mean) * scale;
}

// ---- mini-batches ------------------------------------------------------------------------

/// A permutation of 0..n-1 split into consecutive batches; batch b is a span of indices.
///
///     auto batches = luminal::shuffled_batches(60000, 128, /*seed=*/epoch, /*drop_last=*/true);
///     for (std::span<const luminal::index_t> rows : batches) {
///       luminal::gather_rows(train.images, rows, x_batch);  // x_batch: [128, 784], reused
///       luminal::gather_rows(train.labels, rows, y_batch);  // y_batch: [128]
///     }
class batch_list {
 public:
  batch_list() = default;
  batch_list(std::vector<index_t> permutation, std::size_t batch_size, std::size_t count)
      : permutation_(std::move(permutation)), batch_size_(batch_size), count_(count) {}

  /// Number of batches.
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }

  /// The indices of batch b (the last one may be shorter unless drop_last was set).
  std::span<const index_t> operator[](std::size_t b) const {
    const std::size_t begin = b * batch_size_;
    const std::size_t end = std::min(begin + batch_size_, permutation_.size());
    return {permutation_.data() + begin, end - begin};
  }

  /// The whole permutation of 0..n-1 (including rows dropped by drop_last).
  const std::vector<index_t>& permutation() const { return permutation_; }

  class iterator {
   public:
    using value_type = std::span<const index_t>;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const batch_list* list, std::size_t b) : list_(list), b_(b) {}
    value_type operator*() const { return (*list_)[b_]; }
    iterator& operator++() { ++b_; return *this; }
    iterator operator++(int) { iterator t = *this; ++b_; return t; }
    bool operator==(const iterator& o) const { return b_ == o.b_; }

   private:
    const batch_list* list_ = nullptr;
    std::size_t b_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, count_}; }

 private:
  std::vector<index_t> permutation_;
  std::size_t batch_size_ = 1;
  std::size_t count_ = 0;
};

namespace detail {
/// Uniform integer in [0, bound) from raw mt19937_64 output, by rejection: the same on
/// every platform (std::uniform_int_distribution is implementation-defined).
inline std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const std::uint64_t r = rng();
    if (r >= threshold) return r % bound;
  }
}
}  // namespace detail

/// A seeded random permutation of 0..n-1 (std::mt19937_64 and Fisher-Yates with unbiased
/// rejection sampling, so the same on every platform and standard library), split into
/// batches of `batch_size`. With drop_last, a final batch shorter than batch_size is left
/// out; otherwise it is the last batch.
inline batch_list shuffled_batches(std::size_t n, std::size_t batch_size, std::uint64_t seed, bool drop_last = false) {
  if (batch_size == 0) throw data_error("luminal: shuffled_batches(): batch_size must be positive");
  std::vector<index_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = index_t(i);
  std::mt19937_64 rng(seed);
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = std::size_t(detail::uniform_below(rng, i));
    std::swap(p[i - 1], p[j]);
  }
  const std::size_t count = drop_last ? n / batch_size : (n + batch_size - 1) / batch_size;
  return batch_list(std::move(p), batch_size, count);
}

/// Copies rows `rows` of `source` (rows are along its first axis) into `batch`, whose
/// shape must be [rows.size(), source's other extents...]. Allocates nothing, so a batch
/// array can be reused every step. Throws data_error for a wrong batch shape or a row
/// index out of range (nothing is copied then).
template <class T>
void gather_rows(const xt::xarray<T>& source, std::span<const index_t> rows, xt::xarray<T>& batch) {
  const auto& s = source.shape();
  const auto& b = batch.shape();
  bool ok = source.dimension() >= 1 && batch.dimension() == source.dimension() && b[0] == rows.size();
  for (std::size_t k = 1; ok && k < s.size(); ++k) ok = s[k] == b[k];
  if (!ok) {
    auto text = [](const auto& shape) {
      std::string t = "(";
      for (std::size_t k = 0; k < shape.size(); ++k) t += (k ? ", " : "") + std::to_string(shape[k]);
      return t + ")";
    };
    throw data_error("luminal: gather_rows(): batch shape " + text(b) + " does not fit " + std::to_string(rows.size()) +
                     " rows of source shape " + text(s));
  }
  const std::size_t n = s[0];
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i] < 0 || std::size_t(rows[i]) >= n)
      throw data_error("luminal: gather_rows(): row index " + std::to_string(rows[i]) + " out of range for " +
                       std::to_string(n) + " rows");
  const std::size_t row = n ? source.size() / n : 0;
  const T* in = source.data();
  T* out = batch.data();
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::copy_n(in + std::size_t(rows[i]) * row, row, out + i * row);
}

}  // namespace luminal
