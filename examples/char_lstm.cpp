// Trains a 2-layer character LSTM on a text corpus shipped by Debian (the fortunes package,
// /usr/share/games/fortunes) with one compiled training step: Embedding(256, 64) ->
// nn::LSTM(64, 128, 2 layers) -> Linear(128, 256), cross-entropy over every position,
// AdamW with global-norm clipping. The sequence is a scan inside the step (ops/scan.hpp),
// and the batch and context are run-time sizes of that one program. Prints the training and
// validation loss against the corpus's unigram entropy, and samples text.
//
//     char_lstm --steps 2000 --csv curve.csv
//     char_lstm --init torch_start.safetensors --steps 20 --print-losses 20
//
// The parameters carry torch.nn's names (embed.weight, lstm.weight_ih_l0, ..., head.bias),
// so --init reads a state_dict PyTorch wrote, and --checkpoint writes one it reads.
// examples/char_lstm_torch.py compare trains the same torch-initialized model here and in
// PyTorch on the same windows (drawn as draw_below() does, from std::mt19937_64) and
// prints both losses of the first steps.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <luminal/train/train.hpp>
#include <numbers>
#include <random>
#include <string>

#include "example_options.hpp"
#include "text_corpus.hpp"

using namespace luminal;

namespace {
constexpr std::int64_t vocab = 256;  // bytes
constexpr std::int64_t embed_width = 64, hidden = 128;
constexpr Dim Batch{"Batch"};
constexpr Dim Seq{"Seq"};

constexpr nn::Embedding<"embed", vocab, embed_width> embed;
constexpr nn::LSTM<"lstm", embed_width, hidden, 2> lstm;
constexpr nn::Linear<"head", hidden, vocab> head;

/// Logits [Batch, Seq, 256] of the next byte at every position of `tokens` [Batch, Seq].
template <expression Tokens>
constexpr auto logits_of(Tokens tokens) {
  return head(lstm(embed(tokens)));
}

struct options {
  int context = 64, batch = 32;
  long steps = 2000, stop_after = -1;  // stop_after: stop there, as if interrupted
  float lr = 4e-3f, weight_decay = 0.01f;
  int eval_every = 100, eval_batches = 8, print_losses = 0;
  std::uint64_t seed = 1;
  std::string corpus = "/usr/share/games/fortunes";
  std::string init, checkpoint, csv, prompt = "\n";
  int sample = 300;
  double temperature = 0.8;
  bool profile = false;
};

const char* const usage_text =
    "usage: char_lstm [--context T] [--batch B] [--steps N] [--stop-after N] [--lr LR] [--weight-decay WD] [--eval-every N]\n"
    "       [--corpus DIR|FILE] [--init FILE] [--checkpoint FILE] [--csv FILE] [--seed S] [--print-losses N]\n"
    "       [--sample CHARS] [--temperature T] [--prompt TEXT] [--profile]\n\n"
    "  --context        training sequence length, 2 to 4096 (default 64)\n"
    "  --batch          windows per step, 1 to 65536 (default 32)\n"
    "  --steps          optimizer steps, 0 to 1000000000 (default 2000)\n"
    "  --stop-after     stop after step N as if interrupted (the schedule still spans --steps)\n"
    "  --lr             peak AdamW learning rate, cosine-decayed to a tenth over --steps, in (0, 10] (default 4e-3)\n"
    "  --weight-decay   AdamW's decoupled weight decay, in [0, 1] (default 0.01)\n"
    "  --eval-every     steps between validations (and checkpoints), 1 to 1000000000 (default 100)\n"
    "  --seed           initialization, window and sampling seed, 0 to 2^64-1 (default 1)\n"
    "  --corpus         a text file, or a directory whose files are read (default: Debian's fortunes)\n"
    "  --init           start from these parameters (a PyTorch state_dict as safetensors, or a --checkpoint)\n"
    "  --checkpoint     save parameters + optimizer state here at every evaluation (safetensors)\n"
    "  --csv            write the curve: step, seconds, train loss, validation loss\n"
    "  --print-losses   print the loss of each of the first N steps, 1 to 1000000000\n"
    "  --sample         characters of text to sample at the end, 0 to 100000 (0: none; default 300)\n"
    "  --temperature    sampling temperature, in (0, 100] (default 0.8)\n"
    "  --prompt         the text the sample continues (not empty; default a newline)\n"
    "  --profile        time every kernel of the training step and print them at the end\n"
    "Environment: LUMINAL_NUM_THREADS (1 to 4 per hardware thread).\n";

options parse(int argc, char** argv) {
  options o;
  examples::command_line args("char_lstm", argc, argv, usage_text);
  while (args.next()) {
    if (args.is("--help") || args.is("-h")) args.help();
    else if (args.is("--context")) o.context = args.integer(2, 4096);
    else if (args.is("--batch")) o.batch = args.integer(1, 65536);
    else if (args.is("--steps")) o.steps = args.integer(0L, 1000000000L);
    else if (args.is("--stop-after")) o.stop_after = args.integer(1L, 1000000000L);
    else if (args.is("--lr")) o.lr = args.real(0.0f, 10.0f, examples::interval::open_closed);
    else if (args.is("--weight-decay")) o.weight_decay = args.real(0.0f, 1.0f);
    else if (args.is("--eval-every")) o.eval_every = args.integer(1, 1000000000);
    else if (args.is("--seed")) o.seed = args.integer(std::uint64_t(0), std::numeric_limits<std::uint64_t>::max());
    else if (args.is("--corpus")) o.corpus = args.text();
    else if (args.is("--init")) o.init = args.text();
    else if (args.is("--checkpoint")) o.checkpoint = args.text();
    else if (args.is("--csv")) o.csv = args.text();
    else if (args.is("--print-losses")) o.print_losses = args.integer(1, 1000000000);
    else if (args.is("--sample")) o.sample = args.integer(0, 100000);
    else if (args.is("--temperature")) o.temperature = args.real(0.0, 100.0, examples::interval::open_closed);
    else if (args.is("--prompt")) o.prompt = args.text();
    else if (args.is("--profile")) o.profile = true;
    else args.unknown();
  }
  if (o.prompt.empty()) args.fail("--prompt must not be empty");
  return o;
}

/// A draw in [0, n) from rng, unbiased (the first 2^64 mod n values are rejected, as
/// luminal::shuffled_batches does), so that char_lstm_torch.py draws the same windows.
std::uint64_t draw_below(std::mt19937_64& rng, std::uint64_t n) {
  const std::uint64_t threshold = (0 - n) % n;
  for (;;)
    if (const std::uint64_t r = rng(); r >= threshold) return r % n;
}

int run(const options& opt) {
  if (!opt.checkpoint.empty()) examples::prepare_checkpoint(opt.checkpoint);
  if (!opt.csv.empty()) examples::require_writable(opt.csv, "--csv");
  const std::string text = examples::read_corpus(opt.corpus);
  const std::size_t split = text.size() / 10 * 9;
  const std::string_view train_text(text.data(), split), valid_text(text.data() + split, text.size() - split);
  if (valid_text.size() <= std::size_t(opt.context))
    throw std::runtime_error("--context " + std::to_string(opt.context) + " is longer than the validation text");
  const double entropy = examples::unigram_entropy(train_text);

  auto tokens = input<"tokens", i32>(shape<Batch, Seq>);
  auto targets = input<"targets", i32>(shape<Batch, Seq>);
  auto logits = logits_of(tokens);
  auto loss = nn::cross_entropy(logits, targets);
  const auto set_up = std::chrono::steady_clock::now();
  auto step = compile_train_step<host, retention_policy::store_all, gradient_clipping::global_norm>(
      loss, adamw{.lr = opt.lr, .weight_decay = opt.weight_decay});
  step.max_grad_norm = 1.0;
  auto eval = compile(loss, logits);  // the validation loss, and the logits the sampling reads
  if (opt.profile) step.set_profiling(true);

  tensor_store initial;
  embed.initialize(initial, opt.seed);
  lstm.initialize(initial, opt.seed);
  head.initialize(initial, opt.seed);
  std::size_t parameter_count = 0;
  for (const auto& [name, e] : initial) parameter_count += e.element_count();
  step.store().assign(initial);
  if (!opt.init.empty()) step.load_state(load_safetensors(opt.init, step.checkpoint_tensors(), other_tensors::refuse),
                                         "'" + opt.init + "'");
  std::printf("char_lstm: %zu bytes of text from %s (%zu for validation); unigram entropy %.3f nats/char\n",
              text.size(), opt.corpus.c_str(), valid_text.size(), entropy);
  std::printf("model: embedding %lld, 2 LSTM layers of %lld, context %d, batch %d: %.2fM parameters%s (set-up %.1f s)\n",
              (long long)embed_width, (long long)hidden, opt.context, opt.batch, double(parameter_count) / 1e6,
              opt.init.empty() ? "" : (", from " + opt.init).c_str(), examples::seconds_since(set_up));

  std::ofstream csv;
  if (!opt.csv.empty()) {
    csv.open(opt.csv);
    if (!csv) throw std::runtime_error("cannot write " + opt.csv);
    csv << "step,seconds,train_loss,valid_loss,unigram_entropy\n";
  }
  xt::xarray<int> x, y;
  auto validation_loss = [&] {
    std::mt19937_64 valid_rng(12345);  // the same windows every time
    step.store().bind(eval);
    double total = 0;
    for (int i = 0; i < opt.eval_batches; ++i) {
      examples::fill_windows(valid_text, opt.batch, opt.context, [&](std::uint64_t n) { return draw_below(valid_rng, n); }, x, y);
      eval.bind("tokens", x);
      eval.bind("targets", y);
      eval.run();
      total += double(eval.template output<0>()());
    }
    return total / opt.eval_batches;
  };

  const bool tty = isatty(STDERR_FILENO) != 0;
  std::mt19937_64 rng(opt.seed);
  const auto start = std::chrono::steady_clock::now();
  double running = 0, last_valid = -1;
  const long last = opt.stop_after > 0 ? std::min(opt.steps, opt.stop_after) : opt.steps;
  for (long t = 0; t < last; ++t) {
    // Cosine decay to a tenth over the run (char_lstm_torch.py sets the same rates).
    step.optimizer().lr =
        float(opt.lr * (0.1 + 0.45 * (1 + std::cos(std::numbers::pi * double(t) / double(opt.steps)))));
    examples::fill_windows(train_text, opt.batch, opt.context, [&](std::uint64_t n) { return draw_below(rng, n); }, x, y);
    step.bind("tokens", x);
    step.bind("targets", y);
    const double value = step.run();
    if (t < opt.print_losses) std::printf("step %ld loss %.9g\n", t + 1, value);
    running = t == 0 ? value : 0.95 * running + 0.05 * value;
    const double elapsed = examples::seconds_since(start);
    if (tty || (t + 1) % 10 == 0)
      std::fprintf(stderr, "%sstep %ld  loss %.4f  %.1f ms/step  %.0f tokens/s%s", tty ? "\r" : "", t + 1, running,
                   1e3 * elapsed / double(t + 1), double(t + 1) * opt.batch * opt.context / elapsed, tty ? "   " : "\n");
    if ((t + 1) % opt.eval_every == 0 || t + 1 == last) {
      last_valid = validation_loss();
      if (tty) std::fputc('\n', stderr);
      std::printf("step %ld  %.0f s  train %.4f  validation %.4f  (unigram entropy %.3f)\n", t + 1, elapsed, running,
                  last_valid, entropy);
      std::fflush(stdout);
      if (csv) csv << t + 1 << ',' << elapsed << ',' << running << ',' << last_valid << ',' << entropy << '\n' << std::flush;
      if (!opt.checkpoint.empty()) save_safetensors(step.state(), opt.checkpoint);
    }
  }
  if (last > 0) {
    const double seconds = examples::seconds_since(start);
    std::printf("trained %ld steps in %.0f s: %.1f ms/step, %.0f tokens/s\n", last, seconds,
                1e3 * seconds / double(last), double(last) * opt.batch * opt.context / seconds);
    std::printf("final validation loss %.4f nats/char: %s the unigram entropy %.3f\n", last_valid,
                last_valid < entropy ? "below" : "NOT below", entropy);
  }
  if (opt.profile) {
    std::fputs(step.profile().c_str(), stdout);
    std::fputs(step.describe().c_str(), stdout);
  }

  if (opt.sample > 0) {
    step.store().bind(eval);
    std::string generated(opt.prompt);
    std::mt19937_64 sample_rng(opt.seed);
    for (int i = 0; i < opt.sample; ++i) {
      // The model reads the last --context characters from a zero state, as in training.
      const xt::xarray<int> window = examples::last_window(generated, std::size_t(opt.context));
      eval.bind("tokens", window);
      eval.bind("targets", window);  // unused: the loss is not read
      eval.run();
      generated.push_back(examples::sample_byte(eval.template output<1>(), window.shape()[1] - 1, opt.temperature, sample_rng));
    }
    std::printf("---- sample (temperature %.2f) ----\n%s\n----\n", opt.temperature, generated.c_str());
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  examples::check_environment("char_lstm");
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::cerr << "char_lstm: " << e.what() << "\n";
    return 1;
  }
}
