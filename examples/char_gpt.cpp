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
// A checkpoint records the run's settings (model size, context, batch, learning rate,
// weight decay, seed, the corpus's length). --resume reads the checkpoint's header first:
// another model (other --layers, --width or tensor names) is refused, and so are other
// settings unless --allow-changes (each change is then a warning), before anything is
// read or written, so a refused resume leaves the checkpoint as it was. Every option is
// range-checked, and a model that would not fit in this machine's memory is refused
// before it is built.
//
// Under mpirun it trains data parallel, unchanged (when built with MPI: luminal::mpi):
// --batch is the global batch, each rank draws its share of the windows from its own
// seeded stream, the gradients' mean over the ranks feeds each update, the validation
// loss is averaged over the ranks, and rank 0 alone prints and writes checkpoints. The
// ranks first check that they run with the same settings and corpus: a difference is one
// error on every rank naming the option and both values.
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
#include "example_options.hpp"
#include "text_corpus.hpp"

using namespace luminal;

namespace {
constexpr std::int64_t vocab = 256;       // bytes
constexpr std::int64_t max_context = 256;  // the position table; --context may be less

constexpr int max_layers = 1000;
constexpr int max_batch = 65536;

struct options {
  int layers = 4, width = 128, heads = 4, context = 64, batch = 16;
  long steps = -1;        // -1: until --minutes run out
  double minutes = 10;
  float lr = 2e-3f, weight_decay = 0.01f;
  int eval_every = 100, eval_batches = 8;
  std::uint64_t seed = 1;
  std::string corpus = "/usr/share/games/fortunes";
  std::string checkpoint, csv, prompt = "\n";
  bool resume = false, recompute = false, allow_changes = false;
  std::string precision = "f32";
  int sample = 300;
  double temperature = 0.8;
};

const char* const usage_text =
    "usage: char_gpt [--layers L] [--width 128|256] [--heads 4] [--context T] [--batch B]\n"
    "       [--steps N | --minutes M] [--lr LR] [--weight-decay WD] [--eval-every N]\n"
    "       [--corpus DIR|FILE] [--checkpoint FILE [--resume [--allow-changes]]] [--csv FILE] [--seed S]\n"
    "       [--sample CHARS] [--temperature T] [--prompt TEXT] [--recompute-layers] [--precision f32|bf16]\n\n"
    "  --layers         transformer blocks, 1 to 1000 (run time, one compiled block; default 4)\n"
    "  --width          model width: 128 or 256 (compiled in), with --heads 4 (heads of width/4)\n"
    "  --context        training sequence length, 2 to 256 (default 64)\n"
    "  --batch          windows per step (the global batch under mpirun), 1 to 65536 (default 16)\n"
    "  --steps          optimizer steps, 0 to 1000000000; default: as many as fit in --minutes\n"
    "  --minutes        training time when --steps is not given, 0 to 525600 (default 10)\n"
    "  --lr             peak AdamW learning rate, warmed up over 100 steps, cosine-decayed, in (0, 10] (default 2e-3)\n"
    "  --weight-decay   AdamW's decoupled weight decay, in [0, 1] (default 0.01)\n"
    "  --eval-every     steps between validations (and checkpoints), 1 to 1000000000 (default 100)\n"
    "  --seed           initialization, window and sampling seed, 0 to 2^64-1 (default 1)\n"
    "  --corpus         a text file, or a directory whose files are read (default: Debian's fortunes)\n"
    "  --checkpoint     save parameters + optimizer state + the run's settings here at every evaluation (atomic)\n"
    "  --resume         continue from --checkpoint (same model and settings)\n"
    "  --allow-changes  resume although settings other than the model's differ (each one is a warning)\n"
    "  --csv            write the curve: step, seconds, tokens, train loss, validation loss\n"
    "  --sample         characters of text to sample at the end, 0 to 100000 (0: none; default 300)\n"
    "  --temperature    sampling temperature, in (0, 100] (default 0.8)\n"
    "  --prompt         the text the sample continues (not empty; default a newline)\n"
    "  --recompute-layers  keep only each layer's input on the tape and run its forward again in\n"
    "                   the backward (tape::checkpoint): less memory, one more forward per step\n"
    "  --precision      f32 (default), or bf16: every matmul in bf16 with f32 parameters and AdamW state,\n"
    "                   as torch.autocast (autocast<bf16>, docs/guide.md \"Mixed precision\")\n"
    "Environment: LUMINAL_NUM_THREADS (1 to 4 per hardware thread); under mpirun LUMINAL_MPI_TIMEOUT\n"
    "(seconds a collective waits for the other ranks, 1 to 604800, default 300).\n";

options parse(int argc, char** argv) {
  options o;
  examples::command_line args("char_gpt", argc, argv, usage_text);
  while (args.next()) {
    if (args.is("--help") || args.is("-h")) args.help();
    else if (args.is("--layers")) o.layers = args.integer(1, max_layers);
    else if (args.is("--width")) o.width = args.integer(1, 1 << 20);
    else if (args.is("--heads")) o.heads = args.integer(1, 1 << 20);
    else if (args.is("--context")) o.context = args.integer(2, int(max_context));
    else if (args.is("--batch")) o.batch = args.integer(1, max_batch);
    else if (args.is("--steps")) o.steps = args.integer(0L, 1000000000L);
    else if (args.is("--minutes")) o.minutes = args.real(0.0, 525600.0);
    else if (args.is("--lr")) o.lr = args.real(0.0f, 10.0f, examples::interval::open_closed);
    else if (args.is("--weight-decay")) o.weight_decay = args.real(0.0f, 1.0f);
    else if (args.is("--eval-every")) o.eval_every = args.integer(1, 1000000000);
    else if (args.is("--seed")) o.seed = args.integer(std::uint64_t(0), std::numeric_limits<std::uint64_t>::max());
    else if (args.is("--corpus")) o.corpus = args.text();
    else if (args.is("--checkpoint")) o.checkpoint = args.text();
    else if (args.is("--resume")) o.resume = true;
    else if (args.is("--allow-changes")) o.allow_changes = true;
    else if (args.is("--recompute-layers")) o.recompute = true;
    else if (args.is("--csv")) o.csv = args.text();
    else if (args.is("--sample")) o.sample = args.integer(0, 100000);
    else if (args.is("--temperature")) o.temperature = args.real(0.0, 100.0, examples::interval::open_closed);
    else if (args.is("--prompt")) o.prompt = args.text();
    else if (args.is("--precision")) o.precision = args.text();
    else args.unknown();
  }
  if (o.heads != 4) args.fail("--heads: this build has 4 heads compiled in, not " + std::to_string(o.heads));
  if (o.width != 128 && o.width != 256)
    args.fail("--width: this build has widths 128 and 256 compiled in, not " + std::to_string(o.width));
  if (o.precision != "f32" && o.precision != "bf16")
    args.fail("--precision must be f32 or bf16, not " + examples::in_quotes(o.precision));
  if (o.resume && o.checkpoint.empty()) args.fail("--resume needs --checkpoint");
  if (o.allow_changes && !o.resume) args.fail("--allow-changes needs --resume");
  if (o.prompt.empty()) args.fail("--prompt must not be empty");
  return o;
}

/// Parameters of the model: embeddings, `layers` blocks (layer norms, attention's four
/// projections, a 4x MLP), the final norm and the head.
std::uint64_t parameter_count(const options& o) {
  const std::uint64_t w = std::uint64_t(o.width), v = std::uint64_t(vocab), t = std::uint64_t(max_context);
  const std::uint64_t per_layer = 12 * w * w + 13 * w;
  return v * w + t * w + std::uint64_t(o.layers) * per_layer + 2 * w + w * v + v;
}

/// The memory a training run needs, roughly: each parameter four times (value, gradient,
/// AdamW's two moments) and three more while a checkpoint is written, and the tape's
/// values, per layer and token (measured with width 128: about 10 floats per unit of
/// width and one per head and position of the context, with some headroom here), fewer
/// with --recompute-layers.
std::uint64_t estimated_bytes(const options& o, int ranks) {
  const std::uint64_t tokens = std::uint64_t(o.batch / std::max(ranks, 1)) * std::uint64_t(o.context);
  const std::uint64_t w = std::uint64_t(o.width), t = std::uint64_t(o.context), h = std::uint64_t(o.heads);
  const std::uint64_t per_token_layer = o.recompute ? 4 * w : 4 * (11 * w + 2 * h * t);
  const std::uint64_t head = 4 * (2 * w + 2 * std::uint64_t(vocab));
  return 4 * 7 * parameter_count(o) + tokens * (std::uint64_t(o.layers) * per_token_layer + head);
}

/// `batch` random windows of text (examples::fill_windows), their starts uniform.
void sample_batch(std::string_view text, int batch, int context, std::mt19937_64& rng, xt::xarray<int>& tokens,
                  xt::xarray<int>& targets) {
  std::uniform_int_distribution<std::size_t> start(0, text.size() - std::size_t(context) - 1);
  examples::fill_windows(text, batch, context, [&](std::size_t) { return start(rng); }, tokens, targets);
}

/// Trains on comm's ranks (a local_communicator: this process alone); rank 0 prints and
/// writes the checkpoint and the CSV.
template <std::int64_t Width, std::int64_t Heads, class Autocast>
int run(const options& opt, communicator& comm) {
  const bool lead = comm.rank() == 0;
  const int ranks = comm.size();
  // Where results go is checked first, so that a bad path is not noticed at the first
  // evaluation (and debris of a killed save is removed, whether or not a resume succeeds).
  examples::on_every_rank(comm, [&] {
    if (lead && !opt.checkpoint.empty()) examples::prepare_checkpoint(opt.checkpoint);
    if (lead && !opt.csv.empty()) examples::require_writable(opt.csv, "--csv");
  });
  run_settings run("--");  // what defines the run: recorded in checkpoints, compared on resume
  run.set("layers", opt.layers);
  run.set("width", opt.width);
  run.set("heads", opt.heads);
  run.set("context", opt.context);
  run.set("batch", opt.batch);
  run.set("lr", opt.lr);
  run.set("weight-decay", opt.weight_decay);
  run.set("seed", opt.seed);
  run.set("precision", opt.precision);
  if (ranks > 1) {  // every rank runs the same settings, before anything that takes long
    run_settings agreement = run;
    agreement.set("steps", opt.steps);
    agreement.set("minutes", opt.minutes);
    agreement.set("eval-every", opt.eval_every);
    agreement.set("resume", opt.resume);
    agreement.set("allow-changes", opt.allow_changes);
    agreement.set("recompute-layers", opt.recompute);
    check_same_settings(agreement, comm);
  }
  if (opt.batch % ranks != 0)
    throw std::runtime_error("--batch " + std::to_string(opt.batch) + " (the global batch) does not split evenly over " +
                             std::to_string(ranks) + " ranks");
  const int local_batch = opt.batch / ranks;
  const std::string text = examples::read_corpus(opt.corpus);
  run.set("corpus bytes", text.size(), run_settings::kind::other);  // the data's length
  if (ranks > 1) check_same_settings(run, comm);
  const std::size_t split = text.size() / 10 * 9;
  const std::string_view train_text(text.data(), split), valid_text(text.data() + split, text.size() - split);
  const double entropy = examples::unigram_entropy(train_text);

  nn::GPT<vocab, Width, Heads, max_context, host, Autocast> gpt(opt.layers);
  gpt.recompute_layers(opt.recompute);
  tensor_store params = gpt.initial_parameters(opt.seed);
  std::size_t parameter_count = 0;
  for (const auto& [name, e] : params) parameter_count += e.element_count();
  parameter_optimizer<adamw> optimizer({.lr = opt.lr, .weight_decay = opt.weight_decay});
  optimizer.max_grad_norm = 1.0;
  if (opt.resume) {
    // The header first: another model (more or fewer layers, another width, other names)
    // or other settings are refused before any tensor is read and before anything is
    // written, so the checkpoint stays as it was.
    const safetensors_header header = read_safetensors_header(opt.checkpoint);
    examples::check_resumed_settings("char_gpt", run, header.metadata, opt.checkpoint, {"layers", "width", "heads"},
                                     opt.allow_changes, lead);
    std::vector<tensor_spec> expected;
    for (const auto& [name, e] : params) {
      expected.push_back({name, e.dtype, e.shape, true});
      for (const char* state : {"optimizer.exp_avg.", "optimizer.exp_avg_sq."})  // AdamW's, when saved
        expected.push_back({state + name, e.dtype, e.shape, false});
    }
    tensor_store saved = load_safetensors(opt.checkpoint, expected, other_tensors::refuse);
    for (const auto& name : params.names()) params.insert(name, saved.at(name));
    optimizer.load_state(saved);
    if (ranks > 1) {  // every rank resumed at the same step
      run_settings resumed("--");
      resumed.set("the checkpoint's step", optimizer.step_count(), run_settings::kind::other);
      check_same_settings(resumed, comm);
    }
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
    const double done = double(step - first), elapsed_so_far = examples::seconds_since(start);
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
    const double elapsed = examples::seconds_since(start);
    if (lead && (tty || (step + 1) % 10 == 0))
      std::fprintf(stderr, "%sstep %ld  loss %.4f  %.0f tokens/s  %.0f s%s", tty ? "\r" : "", step + 1, running,
                   tokens_seen / elapsed, elapsed, tty ? "   " : "\n");
    finished = planned >= 0 ? step + 1 >= planned : examples::seconds_since(start) >= budget;
    if (ranks > 1) comm.broadcast(&finished, sizeof finished, 0);  // rank 0's clock ends every rank's run
    if ((step + 1) % opt.eval_every == 0 || finished) {
      const double valid = last_valid = validation_loss();
      if (!lead) continue;
      if (tty) std::fputc('\n', stderr);
      std::printf("step %ld  %.0f s  train %.4f  validation %.4f  (unigram entropy %.3f)\n", step + 1, elapsed, running,
                  valid, entropy);
      std::fflush(stdout);
      if (csv) csv << step + 1 << ',' << elapsed << ',' << tokens_seen << ',' << running << ',' << valid << ',' << entropy << '\n' << std::flush;
      if (!opt.checkpoint.empty()) {
        tensor_store state = optimizer.checkpoint(params);
        run.record(state);  // "run.layers", "run.seed", ...: what a resume compares
        save_safetensors(state, opt.checkpoint);
      }
    }
  }
  if (!lead) return 0;
  if (optimizer.step_count() > first) {
    const double elapsed = examples::seconds_since(start);
    std::printf("trained %ld steps in %.0f s: %.0f tokens/s\n", optimizer.step_count() - first, elapsed,
                tokens_seen / elapsed);
    std::printf("final validation loss %.4f nats/char: %s the unigram entropy %.3f\n", last_valid,
                last_valid < entropy ? "below" : "NOT below", entropy);
  }

  if (opt.sample > 0) {
    std::string generated(opt.prompt);
    std::mt19937_64 sample_rng(opt.seed);
    for (int i = 0; i < opt.sample; ++i) {
      const xt::xarray<int> window = examples::last_window(generated, std::size_t(opt.context));
      tape<> sampling(params);
      const xt::xarray<float> logits = gpt.logits(sampling, window);
      generated.push_back(examples::sample_byte(logits, window.shape()[1] - 1, opt.temperature, sample_rng));
    }
    std::printf("---- sample (temperature %.2f) ----\n%s\n----\n", opt.temperature, generated.c_str());
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  examples::check_environment("char_gpt");
  const int ranks = std::max(1, mpirun_ranks());
  if (const std::uint64_t memory = examples::physical_memory_bytes(); memory != 0) {
    // Refused before anything is built: a model that cannot fit would grow for minutes
    // before the allocation fails.
    const std::uint64_t needed = estimated_bytes(opt, ranks);  // each rank's
    if (needed > memory / 10 * 9)
      examples::usage_failure("char_gpt", "--layers " + std::to_string(opt.layers) + " --width " +
                                              std::to_string(opt.width) + " --batch " + std::to_string(opt.batch) +
                                              " --context " + std::to_string(opt.context) + " need about " +
                                              allocation_error::describe_bytes(needed) + ", more than 90% of this "
                                              "machine's memory (" + allocation_error::describe_bytes(memory) +
                                              "): use fewer layers, a smaller batch or context, or --recompute-layers");
  }
  auto train = [&](communicator& comm) {
    if (opt.precision == "bf16") return opt.width == 128 ? run<128, 4, bf16>(opt, comm) : run<256, 4, bf16>(opt, comm);
    return opt.width == 128 ? run<128, 4, f32>(opt, comm) : run<256, 4, f32>(opt, comm);
  };
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
