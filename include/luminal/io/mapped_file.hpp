// A whole file, read-only, as one span of bytes: memory-mapped where the system has
// POSIX mmap, so that a multi-gigabyte model costs page cache rather than heap and its
// weights are never copied; read into memory where mapping is unavailable (no mmap, or
// a file system that refuses it).
//
//     luminal::mapped_file file = luminal::mapped_file::open("model.gguf");
//     std::span<const std::byte> bytes = file.bytes();   // valid while `file` lives
//
// The span stays valid when the mapped_file is moved. A mapped file that another process
// truncates while it is mapped makes reads past the new end fault (SIGBUS): the same
// contract as every mmap-based model loader (llama.cpp's included).
#pragma once
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define LUMINAL_HAVE_MMAP 1
#else
#define LUMINAL_HAVE_MMAP 0
#endif

namespace luminal {

/// A file could not be opened or read. The message names the file and the reason.
class mapped_file_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class mapped_file {
 public:
  /// Maps `path` read-only (or reads it, where it cannot be mapped). Throws
  /// mapped_file_error naming the file when it is missing, not a regular file, or
  /// unreadable.
  static mapped_file open(const std::string& path) {
    mapped_file out;
#if LUMINAL_HAVE_MMAP
    out.open_posix(path);
#else
    out.read_whole(path);
#endif
    return out;
  }

  mapped_file() = default;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  mapped_file(mapped_file&& other) noexcept { swap(other); }
  mapped_file& operator=(mapped_file&& other) noexcept {
    if (this != &other) {
      mapped_file gone(std::move(*this));  // releases what this held
      swap(other);
    }
    return *this;
  }
  ~mapped_file() { release(); }

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }
  /// True when the bytes are a memory map, false when they were read into memory.
  bool is_mapped() const { return mapped_; }

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool mapped_ = false;
  std::vector<std::byte> copy_;  // the fallback's bytes

  void swap(mapped_file& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(mapped_, other.mapped_);
    copy_.swap(other.copy_);  // a vector's buffer does not move when the vector does
  }

  void release() noexcept {
#if LUMINAL_HAVE_MMAP
    if (mapped_ && size_) ::munmap(const_cast<std::byte*>(data_), size_);
#endif
    data_ = nullptr;
    size_ = 0;
    mapped_ = false;
    copy_.clear();
  }

  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw mapped_file_error("luminal: " + path + ": " + what);
  }
  static std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

#if LUMINAL_HAVE_MMAP
  struct fd_closer {
    int fd;
    ~fd_closer() {
      if (fd >= 0) ::close(fd);
    }
  };

  void open_posix(const std::string& path) {
    int fd;
    do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      const int err = errno;
      fail(path, err == ENOENT ? "file does not exist" : "cannot be opened: " + errno_text(err));
    }
    fd_closer closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail(path, "cannot be looked up: " + errno_text(errno));
    if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a file");
    if (!S_ISREG(st.st_mode)) fail(path, "is not a regular file");
    if (st.st_size < 0 || std::uint64_t(st.st_size) > std::numeric_limits<std::size_t>::max())
      fail(path, "is too large to map (" + std::to_string(st.st_size) + " bytes)");
    const auto size = std::size_t(st.st_size);
    if (size == 0) return;  // mmap refuses an empty range; an empty span says it all
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {  // some file systems (and special files) cannot be mapped
      read_fd(path, fd, size);
      return;
    }
    data_ = static_cast<const std::byte*>(p);
    size_ = size;
    mapped_ = true;
  }

  void read_fd(const std::string& path, int fd, std::size_t size) {
    copy_.resize(size);
    std::size_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd, copy_.data() + done, size - done, off_t(done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail(path, "cannot be read: " + errno_text(errno));
      if (got == 0) fail(path, "became shorter while it was read (" + std::to_string(done) + " of " + std::to_string(size) + " bytes)");
      done += std::size_t(got);
    }
    data_ = copy_.data();
    size_ = size;
  }
#else
  void read_whole(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail(path, "cannot be opened: " + errno_text(errno));
    std::vector<std::byte> bytes;
    std::byte chunk[1 << 16];
    for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, f)) > 0;) bytes.insert(bytes.end(), chunk, chunk + got);
    const bool failed = std::ferror(f);
    std::fclose(f);
    if (failed) fail(path, "cannot be read");
    copy_ = std::move(bytes);
    data_ = copy_.data();
    size_ = copy_.size();
  }
#endif
};

}  // namespace luminal
