// Trains an MLP, a small CNN or a small ResNet (BasicBlocks with BatchNorm, strided and
// depthwise convolutions, a global average pool) on Fashion-MNIST with one compiled
// training step (forward + backward + Adam update, and BatchNorm's running statistics),
// evaluates on the test set after every epoch, and saves checkpoints that PyTorch can
// read (safetensors).
//
//     fashion_mnist --model mlp --epochs 10                   # ~0.89 test accuracy
//     fashion_mnist --model cnn --epochs 6 --checkpoint cnn.safetensors --stop-after 4
//     fashion_mnist --model cnn --epochs 6 --checkpoint cnn.safetensors --resume
//     fashion_mnist --model cnn --precision bf16             # matmuls in bf16, f32 master weights
//     fashion_mnist --model resnet                            # BatchNorm, depthwise conv; f32 only
//
// The ResNet is compiled in only with LUMINAL_EXAMPLE_RESNET (CMake: -DLUMINAL_EXAMPLE_RESNET=ON):
// its training step, some 1,300 nodes, takes GCC about 8 CPU-minutes and 2.7 GB (issue 64's
// compile time), more than CI's budget allows for one example.
//
// A checkpoint records the run's settings (model, epochs, batch size, learning rate,
// weight decay, seed, --limit and the number of images); --resume refuses other
// settings, naming each, unless --allow-changes (then each change is a warning), and
// always refuses another model, before anything is written.
//
// Under mpirun it trains data parallel, unchanged (when built with MPI: luminal::mpi):
// each rank takes its share of every global batch of the same seeded shuffle, the
// gradients' mean over the ranks feeds each update, the test accuracy is counted over all
// ranks, and rank 0 alone writes checkpoints and the CSV (every rank resumes from them).
// The ranks first check that they run with the same settings and data: a difference is
// one error on every rank naming the option and both values.
//
//     mpirun -np 2 fashion_mnist --model mlp --epochs 12      # --batch-size is the global batch
//
// The data is the Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <luminal/data/idx.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <luminal/distributed/data_parallel.hpp>
#include <luminal/train/train.hpp>
#ifdef LUMINAL_EXAMPLE_MPI
#include <luminal/distributed/mpi.hpp>
#endif
#include "example_options.hpp"
#include "fashion_models.hpp"
#include <limits>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>

using namespace luminal;
using namespace fashion;

namespace {

struct options {
  std::string model = "mlp";
  int epochs = 0;  // 0: the model's default
  int batch_size = 128;
  float lr = 0;  // 0: the model's default
  float weight_decay = 0.0f;
  std::uint64_t seed = 1;
  std::string data_dir{fashion_mnist_default_dir};
  std::string checkpoint, csv;
  bool resume = false;
  bool profile = false;  // print per-kernel times of the training step at the end
  long long limit = 0;  // use only the first N training images (quick runs); 0: all
  int stop_after = 0;   // stop after this epoch, as if interrupted (to test --resume); 0: never
  bool allow_changes = false;  // --resume under other settings than the checkpoint's
  int print_losses = 0;  // print the loss of each of the first N steps (to compare with PyTorch's)
  std::string precision = "f32";  // or bf16: matmuls (and convolutions' GEMMs) in bf16, f32 parameters
};

// Every number is range-checked as it is read: a value out of range is an error that
// names the option, never a conversion with undefined or surprising results
// (int(1e300), or --seed -1 as 2^64 - 1).
constexpr long long max_epochs = 100000;
constexpr long long max_batch_size = 60000;  // the training set
constexpr double max_lr = 10.0;

const char* const usage_text =
    "usage: fashion_mnist [--model mlp|cnn|resnet] [--epochs N] [--batch-size B] [--lr LR] [--weight-decay WD]\n"
    "       [--seed S] [--data DIR] [--checkpoint FILE [--resume [--allow-changes]]] [--csv FILE]\n"
    "       [--limit N] [--profile] [--stop-after EPOCH] [--print-losses N] [--precision f32|bf16]\n\n"
    "  --model          mlp (784-512-256-10, dropout 0.2), cnn (2 conv 3x3 + max-pool, 2 linear) or resnet\n"
    "                   (a stem and 2 BasicBlocks of 16-32-64 channels with BatchNorm, a depthwise conv, global pool)\n"
    "  --epochs         passes over the 60000 training images, 1 to 100000 (default: mlp 12, cnn 6, resnet 10)\n"
    "  --batch-size     images per step, 1 to 60000 (default 128)\n"
    "  --lr             peak AdamW learning rate, cosine-decayed to 0 over the run, in (0, 10] (default 1e-3,\n"
    "                   resnet 2e-3)\n"
    "  --weight-decay   AdamW's decoupled weight decay, in [0, 1] (default 0)\n"
    "  --seed           initialization, shuffling and dropout seed, 0 to 2^64-1 (default 1)\n"
    "  --checkpoint     save parameters + optimizer state + the run's settings here after every epoch (atomic)\n"
    "  --resume         continue from --checkpoint: same settings, same trajectory\n"
    "  --allow-changes  resume although settings differ from the checkpoint's (each one is a warning)\n"
    "  --csv            write per-epoch metrics (epoch, loss, test accuracy, seconds, images/s)\n"
    "  --limit          train on the first N images only (a quick run), 1 to 2147483647\n"
    "  --profile        time every kernel of the training step and print the slowest\n"
    "  --stop-after     stop after this epoch as if interrupted (the schedule still spans --epochs)\n"
    "  --print-losses   print the loss of each of the first N steps, 1 to 2147483647 (fashion_mnist_torch.py\n"
    "                   compare trains PyTorch's twin beside it)\n"
    "  --precision      f32 (default), or bf16: every matmul and convolution GEMM in bf16 with f32\n"
    "                   parameters and AdamW state, as torch.autocast (docs/guide.md \"Mixed precision\");\n"
    "                   resnet: f32 only\n"
    "Environment: LUMINAL_NUM_THREADS (1 to 4 per hardware thread); under mpirun LUMINAL_MPI_TIMEOUT\n"
    "(seconds a collective waits for the other ranks, 1 to 604800, default 300).\n";

options parse(int argc, char** argv) {
  options o;
  examples::command_line args("fashion_mnist", argc, argv, usage_text);
  while (args.next()) {
    if (args.is("-h") || args.is("--help")) args.help();
    else if (args.is("--model")) o.model = args.text();
    else if (args.is("--epochs")) o.epochs = int(args.integer(1LL, max_epochs));
    else if (args.is("--batch-size")) o.batch_size = int(args.integer(1LL, max_batch_size));
    else if (args.is("--lr")) o.lr = args.real(0.0f, float(max_lr), examples::interval::open_closed);
    else if (args.is("--weight-decay")) o.weight_decay = args.real(0.0f, 1.0f);
    else if (args.is("--seed")) o.seed = args.integer(std::uint64_t(0), std::numeric_limits<std::uint64_t>::max());
    else if (args.is("--data")) o.data_dir = args.text();
    else if (args.is("--checkpoint")) o.checkpoint = args.text();
    else if (args.is("--csv")) o.csv = args.text();
    else if (args.is("--resume")) o.resume = true;
    else if (args.is("--allow-changes")) o.allow_changes = true;
    else if (args.is("--profile")) o.profile = true;
    else if (args.is("--limit")) o.limit = args.integer(1LL, (long long)std::numeric_limits<int>::max());
    else if (args.is("--stop-after")) o.stop_after = int(args.integer(1LL, max_epochs));
    else if (args.is("--precision")) o.precision = args.text();
    else if (args.is("--print-losses")) o.print_losses = int(args.integer(1LL, (long long)std::numeric_limits<int>::max()));
    else args.unknown();
  }
  if (o.model != "mlp" && o.model != "cnn" && o.model != "resnet")
    args.fail("--model must be mlp, cnn or resnet, not " + examples::in_quotes(o.model));
  if (o.precision != "f32" && o.precision != "bf16")
    args.fail("--precision must be f32 or bf16, not " + examples::in_quotes(o.precision));
#ifndef LUMINAL_EXAMPLE_RESNET
  if (o.model == "resnet")
    args.fail("--model resnet is not compiled into this build: configure with -DLUMINAL_EXAMPLE_RESNET=ON (its "
              "training step takes the compiler about 8 CPU-minutes and 2.7 GB)");
#endif
  if (o.model == "resnet" && o.precision != "f32")
    args.fail("--model resnet trains in f32 only: its bf16 training step is not compiled into this example (a "
              "second ResNet step would add minutes to every build of it)");
  if (o.epochs == 0) o.epochs = o.model == "mlp" ? 12 : o.model == "cnn" ? 6 : 10;
  if (o.lr == 0) o.lr = o.model == "resnet" ? 2e-3f : 1e-3f;
  if (o.stop_after > o.epochs)
    args.fail("--stop-after " + std::to_string(o.stop_after) + " is after the last epoch (--epochs " +
              std::to_string(o.epochs) + ")");
  if (o.resume && o.checkpoint.empty()) args.fail("--resume needs --checkpoint FILE");
  if (o.allow_changes && !o.resume) args.fail("--allow-changes needs --resume");
  if (o.data_dir.empty()) args.fail("--data needs a directory");
  return o;
}

/// The settings that define a run: recorded in every checkpoint, compared on --resume,
/// and checked to be the same on every rank.
run_settings run_settings_of(const options& o) {
  run_settings run("--");
  run.set("model", o.model);
  run.set("epochs", o.epochs);
  run.set("batch-size", o.batch_size);
  run.set("lr", o.lr);
  run.set("weight-decay", o.weight_decay);
  run.set("seed", o.seed);
  run.set("limit", o.limit);
  run.set("precision", o.precision);
  return run;
}

/// The value of metadata `key` of checkpoint `file` as an integer in [low, high]; fails
/// naming the file, the key, the value and the range.
long long checkpoint_integer(const tensor_store& saved, const std::string& file, const std::string& key,
                             long long low, long long high, const std::string& why) {
  auto it = saved.metadata.find(key);
  long long v = 0;
  if (it == saved.metadata.end() || !examples::parse_integer(std::string_view(it->second), low, high, v))
    throw std::runtime_error("checkpoint '" + file + "': key '" + key + "' is " +
                             (it == saved.metadata.end() ? std::string("missing")
                                                         : "'" + it->second.substr(0, 40) + "'") +
                             ", not an integer from " + std::to_string(low) + " to " + std::to_string(high) + " (" +
                             why + ")");
  return v;
}

/// The epochs that checkpoint `saved` completed, after the checks that load_state cannot
/// make: the metadata this program writes, and values that would make the first step
/// NaN. Each failure names the file and the key or tensor.
int resumed_epochs(const tensor_store& saved, const options& opt, std::size_t steps_per_epoch) {
  const std::string& file = opt.checkpoint;
  if (auto it = saved.metadata.find("model"); it != saved.metadata.end() && it->second != opt.model)
    throw std::runtime_error("checkpoint '" + file + "': key 'model' is '" + it->second.substr(0, 40) +
                             "', but --model is " + opt.model);
  if (auto it = saved.metadata.find("luminal.optimizer"); it != saved.metadata.end() && it->second != adamw::name)
    throw std::runtime_error("checkpoint '" + file + "': key 'luminal.optimizer' is '" + it->second.substr(0, 40) +
                             "', but this program trains with " + std::string(adamw::name));
  // A file without "epoch" holds parameters alone (written by PyTorch, say): epoch 0.
  const int done = saved.metadata.contains("epoch")
                       ? int(checkpoint_integer(saved, file, "epoch", 0, opt.epochs - 1,
                                                "the epochs it completed, fewer than --epochs " +
                                                    std::to_string(opt.epochs) + " to leave one to train"))
                       : 0;
  if (opt.stop_after != 0 && opt.stop_after <= done)
    throw std::runtime_error("--stop-after " + std::to_string(opt.stop_after) + " is not after epoch " +
                             std::to_string(done) + ", where checkpoint '" + file + "' ends");
  if (saved.metadata.contains("luminal.step")) {
    const long long expected = (long long)(done) * (long long)(steps_per_epoch);
    const long long steps = checkpoint_integer(saved, file, "luminal.step", 0, std::numeric_limits<long long>::max(),
                                               "the optimizer's step count");
    if (steps != expected)
      throw std::runtime_error("checkpoint '" + file + "': key 'luminal.step' is " + std::to_string(steps) +
                               ", but epoch " + std::to_string(done) + " ends at step " + std::to_string(expected) +
                               " with " + std::to_string(steps_per_epoch) +
                               " steps per epoch (resume with the --batch-size and --limit it was trained with)");
  }
  for (const auto& [name, entry] : saved) {
    if (entry.dtype != dtype_tag::f32) continue;
    const bool non_negative = name.starts_with("optimizer.exp_avg_sq.");
    const std::size_t count = entry.data.size() / sizeof(float);
    for (std::size_t i = 0; i < count; ++i) {
      float v;
      std::memcpy(&v, entry.data.data() + i * sizeof(float), sizeof v);
      if (!std::isfinite(v) || (non_negative && v < 0))
        throw std::runtime_error("checkpoint '" + file + "': tensor '" + name + "' holds " + std::to_string(v) +
                                 " at element " + std::to_string(i) +
                                 (non_negative ? " (it must be finite and non-negative)" : " (it must be finite)"));
    }
  }
  return done;
}

// ---- progress ----------------------------------------------------------------------------

class progress_bar {
 public:
  progress_bar(int epoch, int epochs, std::size_t steps)
      : epoch_(epoch), epochs_(epochs), steps_(steps), tty_(isatty(STDERR_FILENO) != 0),
        start_(std::chrono::steady_clock::now()) {}
  void update(std::size_t done, double loss, std::size_t images) {
    double seconds = elapsed();
    // On a terminal: redraw in place; in a log: a line every ~10% of the epoch.
    if (!tty_ && done != steps_ && done % std::max<std::size_t>(1, steps_ / 10) != 0) return;
    const int width = 30;
    int filled = int(double(done) / double(steps_) * width);
    std::fprintf(stderr, "%sepoch %d/%d [%s%s] %zu/%zu  loss %.4f  %.0f img/s%s", tty_ ? "\r" : "", epoch_, epochs_,
                 std::string(std::size_t(filled), '=').c_str(), std::string(std::size_t(width - filled), ' ').c_str(),
                 done, steps_, loss, double(images) / std::max(seconds, 1e-9), tty_ ? "  " : "\n");
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fputc('\n', stderr);
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  int epoch_, epochs_;
  std::size_t steps_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

/// Accuracy of the evaluation program on the test set, in batches of 1000: each rank
/// counts its share of the images, and the counts are summed over the ranks.
template <class Eval, class Store>
double test_accuracy(Eval& eval, const Store& store, const fashion_mnist_data& test, communicator& comm) {
  store.bind(eval);
  const std::size_t n = test.labels.size(), chunk = 1000;
  const std::size_t first = n * std::size_t(comm.rank()) / std::size_t(comm.size());
  const std::size_t last = n * std::size_t(comm.rank() + 1) / std::size_t(comm.size());
  std::size_t correct = 0;
  std::vector<std::int32_t> predicted(chunk);
  for (std::size_t begin = first; begin < last; begin += chunk) {
    const std::size_t rows = std::min(chunk, last - begin);
    eval.bind_view("images", test.images.data() + begin * 784, {index_t(rows), 784});
    eval.run();
    eval.template read_output<0>(std::span<std::int32_t>(predicted.data(), rows));
    for (std::size_t i = 0; i < rows; ++i) correct += predicted[i] == test.labels.data()[begin + i];
  }
  return sum_over_ranks(comm, double(correct)) / double(n);
}

/// Trains on comm's ranks: data parallel when Parallel (each rank takes its share of every
/// global batch), else on this process alone (comm is then a local_communicator).
template <bool Parallel, class Autocast, class ModelFn, class Modules>
int train(const options& opt, ModelFn model, Modules modules, communicator& comm) {
  const bool lead = comm.rank() == 0;  // prints, and writes the checkpoint and the CSV
  const std::size_t ranks = std::size_t(comm.size());
  // Where results go is checked first, so that a bad path is not noticed after an epoch
  // (and debris of a killed save is removed, whether or not the resume succeeds).
  examples::on_every_rank(comm, [&] {
    if (lead && !opt.checkpoint.empty()) examples::prepare_checkpoint(opt.checkpoint);
    if (lead && !opt.csv.empty()) examples::require_writable(opt.csv, "--csv");
  });
  run_settings run = run_settings_of(opt);
  if (ranks > 1) {  // before anything that takes long: every rank runs the same settings
    run_settings agreement = run;
    agreement.set("stop-after", opt.stop_after);
    agreement.set("resume", opt.resume);
    agreement.set("allow-changes", opt.allow_changes);
    check_same_settings(agreement, comm);
  }
  if (std::size_t(opt.batch_size) % ranks != 0)
    throw std::runtime_error("--batch-size " + std::to_string(opt.batch_size) + " (the global batch) does not split "
                             "evenly over " + std::to_string(ranks) + " ranks");
  if (lead) std::cerr << "loading Fashion-MNIST from " << opt.data_dir << "\n";
  fashion_mnist_data train_set = load_fashion_mnist(opt.data_dir, dataset_split::train);
  fashion_mnist_data test_set = load_fashion_mnist(opt.data_dir, dataset_split::test);
  normalize(train_set.images, fashion_mnist_mean, fashion_mnist_std);
  normalize(test_set.images, fashion_mnist_mean, fashion_mnist_std);
  const std::size_t n = opt.limit > 0 ? std::min<std::size_t>(std::size_t(opt.limit), train_set.labels.size())
                                      : train_set.labels.size();
  run.set("training images", n, run_settings::kind::other);  // the data's length
  run.set("test images", test_set.labels.size(), run_settings::kind::other);
  if (ranks > 1) check_same_settings(run, comm);  // the same data on every rank
  const std::size_t bs = std::size_t(opt.batch_size);
  const std::size_t steps_per_epoch = n / bs;
  if (steps_per_epoch == 0)
    throw std::runtime_error("--batch-size " + std::to_string(bs) + " is larger than the " + std::to_string(n) +
                             " training images" + (opt.limit > 0 ? " (--limit " + std::to_string(opt.limit) + ")" : "") +
                             ": an epoch would train no step");

  auto labels = input<"labels", i32>(shape<Batch>);
  auto loss = autocast<Autocast>(nn::cross_entropy(model(nn::train), labels));
  auto t0 = std::chrono::steady_clock::now();
  const adamw optimizer{.lr = opt.lr, .weight_decay = opt.weight_decay};
  auto step = [&] {
    if constexpr (Parallel) return compile_train_step(loss, optimizer, data_parallel{comm});
    else return compile_train_step(loss, optimizer);
  }();
  auto eval = compile(argmax<1>(autocast<Autocast>(model(nn::eval))));
  step.seed = opt.seed ^ (0x9e3779b97f4a7c15ull * std::uint64_t(comm.rank()));  // each rank its own dropout
  if (opt.profile) step.set_profiling(true);

  tensor_store initial;
  std::apply([&](const auto&... m) { (m.initialize(initial, opt.seed), ...); }, modules);
  step.store().assign(initial);
  int first_epoch = 1;
  if (opt.resume) {
    // The header first: another run's settings, or another model's tensors, are refused
    // before any tensor is read, and before anything is written.
    const safetensors_header header = read_safetensors_header(opt.checkpoint);
    examples::check_resumed_settings("fashion_mnist", run, header.metadata, opt.checkpoint, {"model"},
                                     opt.allow_changes, lead);
    tensor_store saved = load_safetensors(opt.checkpoint, step.checkpoint_tensors(), other_tensors::refuse);
    const int done = resumed_epochs(saved, opt, steps_per_epoch);
    step.load_state(saved, "'" + opt.checkpoint + "'");
    first_epoch = done + 1;
    if (ranks > 1) {  // every rank resumed from the same point
      run_settings resumed("--");
      resumed.set("epochs done in the checkpoint", done, run_settings::kind::other);
      check_same_settings(resumed, comm);
    }
    if (lead)
      std::cerr << "resumed from " << opt.checkpoint << " after epoch " << done << " (step " << step.step_count()
                << ")\n";
  }
  if (lead)
    std::cerr << "model " << opt.model << ": " << decltype(step)::slot_count << " parameter and state tensors, "
              << step.kernel_count() << " kernels per step (set-up "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s)"
              << (ranks > 1 ? ", data parallel over " + std::to_string(ranks) + " ranks" : std::string()) << "\n";

  std::ofstream csv;
  if (lead && !opt.csv.empty()) {
    csv.open(opt.csv, opt.resume ? std::ios::app : std::ios::trunc);
    if (!csv) throw std::runtime_error("fashion_mnist: cannot write '" + opt.csv + "'");
    if (!opt.resume) csv << "epoch,step,train_loss,test_accuracy,seconds,images_per_second\n";
  }

  const double total_steps = double(steps_per_epoch) * opt.epochs;
  const std::size_t local = bs / ranks;  // this rank's share of each global batch
  xt::xarray<float> x_batch = xt::xarray<float>::from_shape({local, std::size_t(784)});
  xt::xarray<std::int32_t> y_batch = xt::xarray<std::int32_t>::from_shape({local});
  double accuracy = 0;
  for (int epoch = first_epoch; epoch <= opt.epochs; ++epoch) {
    batch_list batches = shuffled_batches(n, bs, opt.seed * 1000003u + std::uint64_t(epoch), /*drop_last=*/true);
    progress_bar bar(epoch, opt.epochs, batches.size());
    double loss_sum = 0;
    std::size_t done = 0;
    for (std::span<const index_t> global_rows : batches) {
      const auto rows = global_rows.subspan(std::size_t(comm.rank()) * local, local);
      // Cosine decay of the learning rate over the whole run: a runtime scalar.
      double progress = double(step.step_count()) / total_steps;
      step.optimizer().lr = float(0.5 * opt.lr * (1.0 + std::cos(std::numbers::pi * std::min(progress, 1.0))));
      gather_rows(train_set.images, rows, x_batch);  // rows < n: --limit uses the first n images
      gather_rows(train_set.labels, rows, y_batch);
      step.bind("images", x_batch);
      step.bind("labels", y_batch);
      const double batch_loss = step.run();
      loss_sum += batch_loss;
      ++done;
      if (lead && step.step_count() <= opt.print_losses)
        std::printf("step %lld loss %.9g\n", (long long)step.step_count(), batch_loss);
      if (lead) bar.update(done, loss_sum / double(done), done * bs);
    }
    if (lead) bar.finish();
    double seconds = bar.elapsed();
    loss_sum = sum_over_ranks(comm, loss_sum) / double(ranks);  // the mean over the global batches
    accuracy = test_accuracy(eval, step.store(), test_set, comm);
    if (lead)
      std::printf("epoch %d: train loss %.4f, test accuracy %.4f, %.1f s, %.0f images/s, %.1f ms/step\n", epoch,
                  loss_sum / double(std::max<std::size_t>(done, 1)), accuracy, seconds, double(done * bs) / seconds,
                  1e3 * seconds / double(std::max<std::size_t>(done, 1)));
    std::fflush(stdout);
    if (csv) {
      csv << epoch << ',' << step.step_count() << ',' << loss_sum / double(std::max<std::size_t>(done, 1)) << ','
          << accuracy << ',' << seconds << ',' << double(done * bs) / seconds << '\n';
      csv.flush();
    }
    if (lead && !opt.checkpoint.empty()) {
      tensor_store state = step.state();
      state.metadata["epoch"] = std::to_string(epoch);
      state.metadata["model"] = opt.model;
      run.record(state);  // "run.seed", "run.lr", ...: what a resume compares
      save_safetensors(state, opt.checkpoint);
    }
    if (epoch == opt.stop_after) {
      if (lead) std::printf("stopped after epoch %d (--stop-after)\n", epoch);
      return 0;
    }
  }
  if (lead) std::printf("final test accuracy %.4f\n", accuracy);
  if (lead && opt.profile) {
    std::fputs(step.profile().c_str(), stdout);
    std::fputs(step.describe().c_str(), stdout);
  }
  return 0;
}

template <bool Parallel, class Autocast>
int train_model(const options& opt, communicator& comm) {
  if (opt.model == "mlp")
    return train<Parallel, Autocast>(opt, [](auto mode) { return mlp(mode); }, std::tuple{mlp_fc1, mlp_fc2, mlp_fc3},
                                     comm);
  if (opt.model == "cnn")
    return train<Parallel, Autocast>(opt, [](auto mode) { return cnn(mode); },
                                     std::tuple{cnn_conv1, cnn_conv2, cnn_fc1, cnn_fc2}, comm);
#ifdef LUMINAL_EXAMPLE_RESNET
  if constexpr (std::is_same_v<Autocast, f32>)  // f32 only: parse() refuses --precision bf16
    return train<Parallel, Autocast>(
        opt, [](auto mode) { return resnet(mode); },
        std::tuple{rn_stem, rn_stem_bn, rn_layer1, rn_layer2, rn_depthwise, rn_depthwise_bn, rn_fc}, comm);
  else
    throw std::logic_error("--model resnet is compiled for --precision f32 only");
#else
  throw std::logic_error("--model resnet is not compiled into this build (LUMINAL_EXAMPLE_RESNET)");
#endif
}
template <bool Parallel>
int train_model(const options& opt, communicator& comm) {
  return opt.precision == "bf16" ? train_model<Parallel, bf16>(opt, comm) : train_model<Parallel, f32>(opt, comm);
}

}  // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  examples::check_environment("fashion_mnist");
#ifdef LUMINAL_EXAMPLE_MPI
  // Built with MPI, the example compiles one training step, the data-parallel one: a
  // second step type would double the example's compile time. Alone (no mpirun) it runs
  // over a one-rank local_communicator, where the exchange is a copy of each gradient.
  if (mpirun_ranks() > 0)
    return run_on_mpi_world(argc, argv, "fashion_mnist", [&](communicator& comm) { return train_model<true>(opt, comm); });
  constexpr bool data_parallel_step = true;
#else
  constexpr bool data_parallel_step = false;
#endif
  try {
    refuse_mpirun_without_mpi("fashion_mnist");
    local_communicator comm;
    return train_model<data_parallel_step>(opt, comm);
  } catch (const std::exception& e) {
    std::cerr << "\nfashion_mnist: error: " << e.what() << "\n";
    return 1;
  }
}
