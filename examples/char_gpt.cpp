// Trains a character-level GPT on a text corpus shipped by Debian (the fortunes package,
// /usr/share/games/fortunes) with a tape: the number of layers and the context length are
// run-time options, and each block is compiled once whatever they are. Prints the training
// loss and tokens/s, the validation loss against the corpus's unigram entropy, saves
// checkpoints (parameters + AdamW state, safetensors) and samples text.
//
//     char_gpt --layers 4 --width 128 --context 64 --minutes 10 --csv curve.csv
//     char_gpt --layers 4 --checkpoint gpt.safetensors --resume --steps 2000
//     char_gpt --layers 4 --checkpoint gpt.safetensors --resume --steps 0 --sample 400
//
// Under mpirun it trains data parallel, unchanged (when built with MPI: luminal::mpi):
// --batch is the global batch, each rank draws its share of the windows from its own
// seeded stream, the gradients' mean over the ranks feeds each update, the validation
// loss is averaged over the ranks, and rank 0 alone prints and writes checkpoints:
//
//     mpirun -np 2 char_gpt --layers 4 --batch 16 --steps 2000
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <luminal/distributed/data_parallel.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/nn/gpt.hpp>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#ifdef LUMINAL_EXAMPLE_MPI
#include <luminal/distributed/mpi.hpp>
#endif

using namespace luminal;
namespace fs = std::filesystem;

namespace {
constexpr std::int64_t vocab = 256;       // bytes
constexpr std::int64_t max_context = 256;  // the position table; --context may be less

struct options {
  int layers = 4, width = 128, heads = 4, context = 64, batch = 16;
  long steps = -1;        // -1: until --minutes run out
  double minutes = 10;
  float lr = 2e-3f, weight_decay = 0.01f;
  int eval_every = 100, eval_batches = 8;
  std::uint64_t seed = 1;
  std::string corpus = "/usr/share/games/fortunes";
  std::string checkpoint, csv, prompt = "\n";
  bool resume = false, recompute = false;
  int sample = 300;
  double temperature = 0.8;
};

[[noreturn]] void usage(const char* argv0, const std::string& problem = "") {
  if (!problem.empty()) std::cerr << "char_gpt: " << problem << "\n\n";
  std::cerr << "usage: " << argv0
            << " [--layers L] [--width 128|256] [--heads 4] [--context T] [--batch B]\n"
               "       [--steps N | --minutes M] [--lr LR] [--weight-decay WD] [--eval-every N]\n"
               "       [--corpus DIR|FILE] [--checkpoint FILE [--resume]] [--csv FILE] [--seed S]\n"
               "       [--sample CHARS] [--temperature T] [--prompt TEXT] [--recompute-layers]\n\n"
               "  --layers       transformer blocks (any number: run time, one compiled block)\n"
               "  --width        model width: 128 or 256 (compiled in), with --heads 4 (heads of width/4)\n"
               "  --context      training sequence length, at most 256 (default 64)\n"
               "  --steps        optimizer steps; default: as many as fit in --minutes (default 10)\n"
               "  --lr           peak AdamW learning rate, warmed up over 100 steps, cosine-decayed (default 2e-3)\n"
               "  --corpus       a text file, or a directory whose files are read (default: Debian's fortunes)\n"
               "  --checkpoint   save parameters + optimizer state here at every evaluation (atomic)\n"
               "  --resume       continue from --checkpoint\n"
               "  --csv          write the curve: step, seconds, tokens, train loss, validation loss\n"
               "  --sample       characters of text to sample at the end (0: none)\n"
               "  --recompute-layers  keep only each layer's input on the tape and run its forward again in\n"
               "                 the backward (tape::checkpoint): less memory, one more forward per step\n";
  std::exit(problem.empty() ? 0 : 2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0], a + " needs a value");
      return argv[++i];
    };
    auto number = [&](auto& out) {
      std::string v = value();
      std::istringstream in(v);
      if (!(in >> out) || !in.eof()) usage(argv[0], a + ": '" + v + "' is not a number");
    };
    if (a == "--help" || a == "-h") usage(argv[0]);
    else if (a == "--layers") number(o.layers);
    else if (a == "--width") number(o.width);
    else if (a == "--heads") number(o.heads);
    else if (a == "--context") number(o.context);
    else if (a == "--batch") number(o.batch);
    else if (a == "--steps") number(o.steps);
    else if (a == "--minutes") number(o.minutes);
    else if (a == "--lr") number(o.lr);
    else if (a == "--weight-decay") number(o.weight_decay);
    else if (a == "--eval-every") number(o.eval_every);
    else if (a == "--seed") number(o.seed);
    else if (a == "--corpus") o.corpus = value();
    else if (a == "--checkpoint") o.checkpoint = value();
    else if (a == "--resume") o.resume = true;
    else if (a == "--recompute-layers") o.recompute = true;
    else if (a == "--csv") o.csv = value();
    else if (a == "--sample") number(o.sample);
    else if (a == "--temperature") number(o.temperature);
    else if (a == "--prompt") o.prompt = value();
    else usage(argv[0], "unknown option " + a);
  }
  if (o.layers < 1) usage(argv[0], "--layers must be at least 1");
  if (o.context < 2 || o.context > max_context) usage(argv[0], "--context must be in [2, 256]");
  if (o.batch < 1) usage(argv[0], "--batch must be at least 1");
  if (o.eval_every < 1) usage(argv[0], "--eval-every must be at least 1");
  if (o.resume && o.checkpoint.empty()) usage(argv[0], "--resume needs --checkpoint");
  if (o.prompt.empty()) usage(argv[0], "--prompt must not be empty");
  return o;
}

/// The corpus's bytes: a file, or every regular file of a directory (sorted, skipping
/// the fortune index files *.dat and symbolic links).
std::string read_corpus(const std::string& where) {
  std::vector<fs::path> files;
  if (fs::is_directory(where)) {
    for (const auto& e : fs::directory_iterator(where))
      if (e.is_regular_file() && !e.is_symlink() && e.path().extension() != ".dat") files.push_back(e.path());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(where)) {
    files.push_back(where);
  }
  if (files.empty())
    throw std::runtime_error("no text at '" + where + "': install the corpus with 'apt-get install fortunes' or pass --corpus");
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + f.string());
    text.append(std::istreambuf_iterator<char>(in), {});
  }
  if (text.size() < 10000) throw std::runtime_error("the corpus at '" + where + "' has only " + std::to_string(text.size()) + " bytes");
  return text;
}

/// Entropy (nats) of the byte frequencies of `text`: the loss of a model without context.
double unigram_entropy(std::string_view text) {
  std::array<double, 256> count{};
  for (unsigned char ch : text) count[ch] += 1;
  double h = 0;
  for (double n : count)
    if (n > 0) h -= n / double(text.size()) * std::log(n / double(text.size()));
  return h;
}

/// `batch` random windows of text: tokens [batch, context] and the next bytes as targets.
void sample_batch(std::string_view text, int batch, int context, std::mt19937_64& rng, xt::xarray<int>& tokens,
                  xt::xarray<int>& targets) {
  tokens = xt::xarray<int>::from_shape({std::size_t(batch), std::size_t(context)});
  targets = tokens;
  std::uniform_int_distribution<std::size_t> start(0, text.size() - std::size_t(context) - 1);
  for (int b = 0; b < batch; ++b) {
    std::size_t s = start(rng);
    for (int t = 0; t < context; ++t) {
      tokens(b, t) = static_cast<unsigned char>(text[s + t]);
      targets(b, t) = static_cast<unsigned char>(text[s + t + 1]);
    }
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Trains on comm's ranks (a local_communicator: this process alone); rank 0 prints and
/// writes the checkpoint and the CSV.
template <std::int64_t Width, std::int64_t Heads>
int run(const options& opt, communicator& comm) {
  const bool lead = comm.rank() == 0;
  const int ranks = comm.size();
  if (opt.batch % ranks != 0)
    throw std::runtime_error("--batch " + std::to_string(opt.batch) + " (the global batch) does not split evenly over " +
                             std::to_string(ranks) + " ranks");
  const int local_batch = opt.batch / ranks;
  const std::string text = read_corpus(opt.corpus);
  const std::size_t split = text.size() / 10 * 9;
  const std::string_view train_text(text.data(), split), valid_text(text.data() + split, text.size() - split);
  const double entropy = unigram_entropy(train_text);

  nn::GPT<vocab, Width, Heads, max_context> gpt(opt.layers);
  gpt.recompute_layers(opt.recompute);
  tensor_store params = gpt.initial_parameters(opt.seed);
  std::size_t parameter_count = 0;
  for (const auto& [name, e] : params) parameter_count += e.element_count();
  parameter_optimizer<adamw> optimizer({.lr = opt.lr, .weight_decay = opt.weight_decay});
  optimizer.max_grad_norm = 1.0;
  if (opt.resume) {
    tensor_store saved = load_safetensors(opt.checkpoint);
    for (const auto& name : params.names()) {
      if (!saved.contains(name)) throw checkpoint_error("'" + opt.checkpoint + "' has no '" + name + "': other --layers or --width?");
      const auto& e = saved.at(name);
      if (e.shape != params.at(name).shape || e.dtype != dtype_tag::f32)
        throw checkpoint_error("'" + opt.checkpoint + "' holds '" + name + "' in another shape: other --width?");
      params.insert(name, e);
    }
    optimizer.load_state(saved);
  }
  broadcast_parameters(params, comm);  // rank 0's (and a check that every rank built the same model)
  if (lead) std::printf("char_gpt: %zu bytes of text from %s (%zu for validation); unigram entropy %.3f nats/char\n",
              text.size(), opt.corpus.c_str(), valid_text.size(), entropy);
  if (lead) std::printf("model: %d layers, width %lld, %lld heads, context %d, batch %d: %.2fM parameters%s\n", opt.layers,
              (long long)Width, (long long)Heads, opt.context, opt.batch, double(parameter_count) / 1e6,
              opt.resume ? (", resumed at step " + std::to_string(optimizer.step_count())).c_str() : "");

  std::ofstream csv;
  if (lead && !opt.csv.empty()) {
    csv.open(opt.csv);
    if (!csv) throw std::runtime_error("cannot write " + opt.csv);
    csv << "step,seconds,tokens,train_loss,valid_loss,unigram_entropy\n";
  }
  // Each rank its own stream of windows, reproducible from the seed, the step and the rank.
  std::mt19937_64 rng(opt.seed * 7919 + std::uint64_t(optimizer.step_count()) + 0x9e3779b97f4a7c15ull * std::uint64_t(comm.rank()));
  xt::xarray<int> tokens, targets;
  auto validation_loss = [&] {
    std::mt19937_64 valid_rng(12345);  // the same windows every time
    double total = 0;
    for (int i = 0; i < opt.eval_batches; ++i) {
      sample_batch(valid_text, opt.batch, opt.context, valid_rng, tokens, targets);
      if (i % ranks != comm.rank()) continue;  // each rank its share of the batches
      tape<> t(params);
      total += t.item<float>(gpt.loss(t, tokens, targets));
    }
    return sum_over_ranks(comm, total) / opt.eval_batches;
  };

  const bool tty = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  const double budget = opt.minutes * 60;
  const long first = optimizer.step_count();
  const long planned = opt.steps >= 0 ? first + opt.steps : -1;
  double running = 0, tokens_seen = 0, last_valid = -1;
  tape<> t(params);
  overlapped_gradient_mean exchange(comm);
  bool finished = planned >= 0 ? first >= planned : budget <= 0;
  for (long step = first; !finished; ++step) {
    // Warm-up, then cosine decay to a tenth over the planned steps, or over as many as
    // the time budget allows at the speed so far.
    const double done = double(step - first), elapsed_so_far = seconds_since(start);
    double horizon = planned >= 0 ? double(planned)
                           : done < 20  ? double(first + 1000)
                                        : double(first) + done * budget / std::max(elapsed_so_far, 1e-3);
    if (ranks > 1) comm.broadcast(&horizon, sizeof horizon, 0);  // one schedule for every rank
    const double warm = std::min(1.0, double(step + 1) / 100.0);
    optimizer.options().lr =
        float(opt.lr * warm * (0.1 + 0.45 * (1 + std::cos(std::numbers::pi * std::min(1.0, double(step) / horizon)))));
    sample_batch(train_text, local_batch, opt.context, rng, tokens, targets);
    t.clear();
    auto loss = gpt.loss(t, tokens, targets);
    if (lead && step == first)  // what the recording holds for the backward (--recompute-layers)
      std::printf("the tape holds %.1f MB of values for the backward%s\n", double(t.held_bytes()) / 1e6,
                  opt.recompute ? " (layers recomputed)" : "");
    if (ranks > 1) {  // each gradient's sum starts as soon as the backward has finished it
      t.backward(loss, &exchange);
      exchange.finish();
    } else {
      t.backward(loss);
    }
    optimizer.step(params, t.gradients());
    const double value = t.item<float>(loss);
    running = step == first ? value : 0.95 * running + 0.05 * value;
    tokens_seen += double(opt.batch) * opt.context;
    const double elapsed = seconds_since(start);
    if (lead && (tty || (step + 1) % 10 == 0))
      std::fprintf(stderr, "%sstep %ld  loss %.4f  %.0f tokens/s  %.0f s%s", tty ? "\r" : "", step + 1, running,
                   tokens_seen / elapsed, elapsed, tty ? "   " : "\n");
    finished = planned >= 0 ? step + 1 >= planned : seconds_since(start) >= budget;
    if (ranks > 1) comm.broadcast(&finished, sizeof finished, 0);  // rank 0's clock ends every rank's run
    if ((step + 1) % opt.eval_every == 0 || finished) {
      const double valid = last_valid = validation_loss();
      if (!lead) continue;
      if (tty) std::fputc('\n', stderr);
      std::printf("step %ld  %.0f s  train %.4f  validation %.4f  (unigram entropy %.3f)\n", step + 1, elapsed, running,
                  valid, entropy);
      std::fflush(stdout);
      if (csv) csv << step + 1 << ',' << elapsed << ',' << tokens_seen << ',' << running << ',' << valid << ',' << entropy << '\n' << std::flush;
      if (!opt.checkpoint.empty()) save_safetensors(optimizer.checkpoint(params), opt.checkpoint);
    }
  }
  if (!lead) return 0;
  if (optimizer.step_count() > first) {
    std::printf("trained %ld steps in %.0f s: %.0f tokens/s\n", optimizer.step_count() - first, seconds_since(start),
                tokens_seen / seconds_since(start));
    std::printf("final validation loss %.4f nats/char: %s the unigram entropy %.3f\n", last_valid,
                last_valid < entropy ? "below" : "NOT below", entropy);
  }

  if (opt.sample > 0) {
    std::string generated(opt.prompt);
    std::mt19937_64 sample_rng(opt.seed);
    for (int i = 0; i < opt.sample; ++i) {
      const std::size_t n = std::min(generated.size(), std::size_t(opt.context));
      xt::xarray<int> window = xt::xarray<int>::from_shape({1, n});
      for (std::size_t k = 0; k < n; ++k) window(0, k) = static_cast<unsigned char>(generated[generated.size() - n + k]);
      tape<> sampling(params);
      xt::xarray<float> logits = gpt.logits(sampling, window);
      std::vector<double> weights(vocab);
      double top = -1e30;
      for (std::int64_t v = 0; v < vocab; ++v) top = std::max(top, double(logits(0, n - 1, v)));
      for (std::int64_t v = 0; v < vocab; ++v) weights[v] = std::exp((logits(0, n - 1, v) - top) / opt.temperature);
      generated.push_back(char(std::discrete_distribution<int>(weights.begin(), weights.end())(sample_rng)));
    }
    std::printf("---- sample (temperature %.2f) ----\n%s\n----\n", opt.temperature, generated.c_str());
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  if (opt.heads != 4) usage(argv[0], "--heads: this build has 4 heads compiled in");
  if (opt.width != 128 && opt.width != 256) usage(argv[0], "--width: this build has widths 128 and 256 compiled in");
  auto train = [&](communicator& comm) { return opt.width == 128 ? run<128, 4>(opt, comm) : run<256, 4>(opt, comm); };
#ifdef LUMINAL_EXAMPLE_MPI
  if (mpirun_ranks() > 0) return run_on_mpi_world(argc, argv, "char_gpt", train);
#endif
  try {
    refuse_mpirun_without_mpi("char_gpt");
    local_communicator comm;
    return train(comm);
  } catch (const std::exception& e) {
    std::cerr << "char_gpt: " << e.what() << "\n";
    return 1;
  }
}
