// The bytes of a data file for read_idx (data/idx.hpp): a plain file, or the single gzip
// member a .gz file holds, decompressed by zlib's inflate in an own loop. gzread would
// join further members and skip trailing garbage; here anything after the first member
// is an error, and how much may still be decompressed is bounded by the caller.
//
//     luminal::detail::idx::byte_source in("train-images-idx3-ubyte.gz");
//     unsigned char magic[4];
//     std::size_t got = in.read(magic, 4);   // fewer than 4: the data ended
#pragma once
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace luminal {

/// A data file is missing or not what it should be. The message names the file.
class data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail::idx {

[[noreturn]] inline void fail(const std::filesystem::path& path, const std::string& what) {
  throw data_error("luminal: IDX file '" + path.string() + "': " + what);
}

/// deflate's largest expansion: one compressed byte holds at most 1032 output bytes
/// (zlib's technical details), plus room for the gzip header and trailer.
inline std::uint64_t most_inflated_bytes(std::uint64_t compressed) { return compressed * 1032 + 1024; }

class byte_source {
 public:
  explicit byte_source(const std::filesystem::path& path) : path_(path) {
    std::error_code ec;
    file_size_ = std::filesystem::file_size(path, ec);
    if (ec) fail(path, "cannot read its size: " + ec.message());
    file_ = std::fopen(path.string().c_str(), "rb");
    if (!file_) fail(path, "cannot be opened");
    // gzip is detected from the content: an IDX file starts with two zero bytes.
    in_size_ = std::fread(in_, 1, 2, file_);
    gzip_ = in_size_ == 2 && in_[0] == 0x1F && in_[1] == 0x8B;
    if (gzip_) {
      stream_.next_in = in_;
      stream_.avail_in = uInt(in_size_);
      if (inflateInit2(&stream_, 16 + MAX_WBITS) != Z_OK) fail(path, "zlib could not be initialized");
      inflating_ = true;
    }
  }
  byte_source(const byte_source&) = delete;
  byte_source& operator=(const byte_source&) = delete;
  ~byte_source() {
    if (inflating_) inflateEnd(&stream_);
    if (file_) std::fclose(file_);
  }

  bool gzip() const { return gzip_; }
  /// The size of the file on disk (compressed, for gzip).
  std::uint64_t file_size() const { return file_size_; }
  /// Bytes read (decompressed, for gzip) so far.
  std::uint64_t position() const { return position_; }

  /// Reads up to `bytes` bytes; fewer means the data ended. Fails on a read error and on
  /// gzip data that is corrupt or truncated.
  std::size_t read(void* out, std::size_t bytes) {
    auto* p = static_cast<unsigned char*>(out);
    std::size_t done = 0;
    if (!gzip_) {
      const std::size_t reused = std::min(bytes, in_size_ - in_used_);  // the two sniffed bytes
      std::copy_n(in_ + in_used_, reused, p);
      in_used_ += reused;
      done = reused;
      if (done < bytes) done += std::fread(p + done, 1, bytes - done, file_);
      if (done < bytes && std::ferror(file_)) fail(path_, "read error");
      position_ += done;
      return done;
    }
    while (done < bytes && !stream_end_) {
      if (stream_.avail_in == 0) refill();
      stream_.next_out = p + done;
      stream_.avail_out = uInt(std::min<std::size_t>(bytes - done, UINT_MAX));
      const uInt before = stream_.avail_out;
      const int rc = inflate(&stream_, Z_NO_FLUSH);
      done += before - stream_.avail_out;
      if (rc == Z_STREAM_END) stream_end_ = true;
      else if (rc != Z_OK && rc != Z_BUF_ERROR)
        fail(path_, std::string("corrupt gzip data: ") + (stream_.msg ? stream_.msg : "inflate error " + std::to_string(rc)));
    }
    position_ += done;
    return done;
  }

  /// After the data that was expected: fails if the file holds anything more (for gzip:
  /// more decompressed bytes, counted up to `count_limit`, or bytes after the member).
  void require_end(const std::string& what_came_before, std::size_t count_limit = std::size_t(1) << 20) {
    unsigned char scratch[65536];
    std::uint64_t extra = 0;
    if (!gzip_) {
      extra = file_size_ > position_ ? file_size_ - position_ : 0;
      if (extra == 0 && read(scratch, 1) == 1) extra = 1;  // the file grew while reading
    } else {
      while (extra <= count_limit) {
        const std::size_t n = read(scratch, sizeof scratch);
        if (n == 0) break;
        extra += n;
      }
    }
    if (extra > count_limit)
      fail(path_, "has more than " + std::to_string(count_limit) + " bytes of trailing data after " + what_came_before);
    if (extra > 0) fail(path_, "has " + std::to_string(extra) + " bytes of trailing data after " + what_came_before);
    if (gzip_ && (stream_.avail_in > 0 || std::fread(scratch, 1, 1, file_) == 1))
      fail(path_, "has data after the end of its gzip stream (trailing garbage or a second gzip member)");
  }

 private:
  void refill() {
    in_size_ = std::fread(in_, 1, sizeof in_, file_);
    if (in_size_ == 0) {
      if (std::ferror(file_)) fail(path_, "read error");
      fail(path_, "is truncated: the gzip stream ends before its end marker");
    }
    stream_.next_in = in_;
    stream_.avail_in = uInt(in_size_);
  }

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::uint64_t file_size_ = 0, position_ = 0;
  bool gzip_ = false, inflating_ = false, stream_end_ = false;
  z_stream stream_{};
  unsigned char in_[65536];
  std::size_t in_size_ = 0, in_used_ = 0;  // plain files: the sniffed bytes not yet returned
};

}  // namespace detail::idx
}  // namespace luminal
