// A first luminal program: a small classifier head written as a typed expression,
// compiled once, run on two batch sizes, with its graph written as Graphviz DOT.
//
//   ./build/examples/quickstart [graph.dot]
#include <fstream>
#include <iostream>
#include <luminal/luminal.hpp>
#include <luminal/backends/host.hpp>
#include <xtensor/xio.hpp>
#include <xtensor/xrandom.hpp>

#include "example_options.hpp"

using namespace luminal;

constexpr Dim Batch{"Batch"};

int main(int argc, char** argv) try {
  if (argc > 2 || (argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h"))) {
    std::cout << "usage: quickstart [graph.dot]\n"
                 "Environment: LUMINAL_NUM_THREADS (1 to 4 per hardware thread).\n";
    return argc > 2 ? 2 : 0;
  }
  examples::check_environment("quickstart");
  // Leaves: names are part of the types (and later the checkpoint keys).
  auto x = input<"x", f32>(shape<Batch, 16>);
  auto w1 = param<"fc1.weight", f32>(shape<16, 32>);
  auto b1 = param<"fc1.bias", f32>(shape<32>);
  auto w2 = param<"fc2.weight", f32>(shape<32, 4>);

  // Nothing is computed here; `probabilities` is a type describing the graph.
  auto hidden = gelu(matmul(x, w1) + b1);
  auto probabilities = softmax<-1>(matmul(hidden, w2));
  auto predicted = argmax<-1>(probabilities);

  auto prog = compile(probabilities, predicted);
  std::cout << "compiled into " << prog.kernel_count() << " kernels\n";

  xt::random::seed(0);
  prog.bind("fc1.weight", xt::eval(xt::random::randn<float>({16, 32}) * 0.25f));
  prog.bind("fc1.bias", xt::zeros<float>({32}));
  prog.bind("fc2.weight", xt::eval(xt::random::randn<float>({32, 4}) * 0.25f));

  for (std::size_t batch : {2u, 5u}) {  // Batch is resolved at run time
    prog.bind("x", xt::eval(xt::random::randn<float>({batch, std::size_t(16)})));
    prog.run();
    std::cout << "batch " << batch << ": probabilities\n"
              << prog.output<0>() << "\npredicted classes " << prog.output<1>() << "\n"
              << "arena: " << prog.arena_bytes() << " bytes\n";
  }

  // Bad input is refused with a message that names the input, the axis and both sizes.
  try {
    prog.bind("x", xt::xarray<float>::from_shape({3, 15}));
  } catch (const input_error& e) {
    std::cout << "as expected: " << e.what() << "\n";
  }

  if (argc > 1) {
    std::ofstream out(argv[1]);
    out << to_dot(probabilities, predicted);
    if (!out.flush()) throw std::runtime_error(std::string("cannot write '") + argv[1] + "'");
    std::cout << "graph written to " << argv[1] << "\n";
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "quickstart: error: " << e.what() << "\n";
  return 1;
}
