// Hostile IDX files (issue 18): the reproducers that fuzzing found in read_idx, each a
// test: extents whose product overflows beside a zero extent (UB in to_xarray once), gzip
// with trailing data or a second member, and a gzip bomb of trailing data (decompressed
// to 1 GiB once, only to count it). Safetensors: io_hostile_test.cpp.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <ctime>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <luminal/data/idx.hpp>
#include <string>

#include "io_test_support.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using test::idx_bytes;
using test::temp_dir;
using test::write_bytes;

namespace {

/// The processor time `f` takes, in seconds: CPU time, not wall time, so that the bounds
/// hold on a machine busy with other work.
template <class F>
double seconds_of(F&& f) {
  const std::clock_t start = std::clock();
  f();
  return double(std::clock() - start) / CLOCKS_PER_SEC;
}

std::string idx_refusal(const fs::path& p) {
  try {
    (void)luminal::read_idx(p);
  } catch (const luminal::data_error& e) {
    return e.what();
  }
  FAIL("'" << p.string() << "' was read, but it should have been refused");
  return {};
}

void require_idx_refused(const fs::path& p, const std::string& why) {
  const std::string msg = idx_refusal(p);
  INFO("message: " << msg);
  CHECK_THAT(msg, Contains(p.string()));
  CHECK_THAT(msg, Contains(why));
}

/// gzip-compresses `bytes` as one member (level 9).
std::string gzip(const std::string& bytes) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, uLong(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = uInt(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

TEST_CASE("idx hostile: extents whose product overflows beside a zero extent", "[io][data][hostile]") {
  temp_dir dir;
  const fs::path p = dir / "overflow-idx";
  // The fuzzer's 16 bytes: u8, rank 3, extents 0 x 4294967295 x 4294967295. read_idx took
  // them as an empty array, and to_xarray then overflowed xtensor's stride computation.
  write_bytes(p, std::string("\x00\x00\x08\x03\x00\x00\x00\x00\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF", 16));
  require_idx_refused(p, "more elements than the limit");
  require_idx_refused(p, "not counting the zero extent");

  // Zero extents beside sizes that fit still give an empty array that converts.
  write_bytes(p, idx_bytes(0x08, {0, 65536, 65536}, ""));
  const auto empty = luminal::read_idx(p);
  CHECK(empty.size() == 0);
  CHECK(empty.to_xarray<float>().size() == 0);

  // An idx_array filled by hand is checked by to_xarray itself.
  luminal::idx_array a;
  a.dims = {0, 0xFFFFFFFFFFull, 0xFFFFFFFFFFull};
  CHECK_THROWS_WITH(a.to_xarray<float>(), Contains("overflow"));
  a.dims = {2, 3};
  a.bytes.resize(5);
  CHECK_THROWS_WITH(a.to_xarray<float>(), Contains("do not describe the 5 bytes"));
}

TEST_CASE("idx hostile: gzip with trailing data, a second member, or a bomb", "[io][data][hostile]") {
  temp_dir dir;
  const fs::path p = dir / "x-idx.gz";
  const std::string valid = idx_bytes(0x08, {2, 3}, std::string(6, '\x05'));
  write_bytes(p, gzip(valid));
  CHECK(luminal::read_idx(p).size() == 6);

  write_bytes(p, gzip(valid) + "garbage");
  require_idx_refused(p, "data after the end of its gzip stream");
  write_bytes(p, gzip(valid) + gzip(valid));
  require_idx_refused(p, "a second gzip member");
  write_bytes(p, gzip(valid) + std::string(100, '\0'));
  require_idx_refused(p, "data after the end of its gzip stream");

  // 1 GiB of zeros after the IDX data, in one member of about 1 MB: refused after
  // decompressing at most 1 MiB of it (it was all decompressed, to count it, before).
  {
    z_stream z{};
    REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
    std::string out, chunk(1 << 20, '\0'), buffer(1 << 16, '\0');
    auto pump = [&](const char* in, std::size_t n, int flush) {
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
      z.avail_in = uInt(n);
      do {
        z.next_out = reinterpret_cast<Bytef*>(buffer.data());
        z.avail_out = uInt(buffer.size());
        deflate(&z, flush);
        out.append(buffer.data(), buffer.size() - z.avail_out);
      } while (z.avail_out == 0);
    };
    pump(valid.data(), valid.size(), Z_NO_FLUSH);
    for (int i = 0; i < 1024; ++i) pump(chunk.data(), chunk.size(), i == 1023 ? Z_FINISH : Z_NO_FLUSH);
    deflateEnd(&z);
    write_bytes(p, out);
    std::string msg;
    const double seconds = seconds_of([&] { msg = idx_refusal(p); });
    std::cout << "io_hostile: " << out.size() << "-byte gzip of 1 GiB trailing data refused in " << seconds * 1e3
              << " ms of CPU time\n";
    CHECK_THAT(msg, Contains("more than 1048576 bytes of trailing data"));
    CHECK(seconds < 1.0);
  }
  // A header claiming more than its compressed bytes can expand to is refused before
  // anything is decompressed or allocated.
  write_bytes(p, gzip(idx_bytes(0x0E, {65536, 65536}, "")));
  require_idx_refused(p, "bytes of gzip data can expand to");
}
