// GPU-only tests of luminal::nn ([cuda]): the modules whose kernels the op-by-op tests do
// not reach as a whole (Conv2d's unfold + GEMM and its gradients, padded max and average
// pooling, Dropout's in-kernel hash RNG), each against the host backend on the same data.
// Run by luminal_cuda_tests, which skips (exit 77) without a GPU.
#include "test_support.hpp"

#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"};

/// Runs the same outputs on the GPU and the host over the same inputs and store, and
/// compares every output.
template <class... Outputs>
void require_gpu_matches_host(const tensor_store& store, const std::vector<std::pair<std::string, xt::xarray<float>>>& data,
                              double rtol, double atol, Outputs... outputs) {
  auto gpu = compile<cuda>(outputs...);
  auto cpu = compile<host>(outputs...);
  for (const auto& [name, entry] : store) {
    gpu.bind(name, store.get<f32>(name));
    cpu.bind(name, store.get<f32>(name));
  }
  for (const auto& [name, value] : data) {
    gpu.bind(name, value);
    cpu.bind(name, value);
  }
  gpu.run();
  cpu.run();
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<sizeof...(Outputs)>>([&](auto K) {
    INFO("output " << K());
    test::require_close(gpu.template output<K()>(), cpu.template output<K()>(), rtol, atol);
  });
}
}  // namespace

TEST_CASE("cuda: Conv2d and pooling, and a convolution's gradients, match the host", "[cuda]") {
  // Gradients of one layer only: nvcc's compile time grows steeply with the depth of a
  // gradient graph (README, "GPU (CUDA)"); a conv-pool-pool-conv gradient took cicc
  // minutes. The pools' gradients are reductions and pads, which the op tests cover.
  nn::Conv2d<"ca", 3, 4, 3, 1, 1> conv_a;  // stride 1, padding 1
  nn::Conv2d<"cb", 4, 2, 3, 2> conv_b;     // stride 2, no padding
  auto x = input<"x", f32>(shape<Batch, 3, 9, 8>);
  auto r = input<"r", f32>(shape<Batch, 4, 9, 8>);
  auto y = conv_b(nn::AvgPool2d<3, 1, 1>{}(nn::MaxPool2d<3, 2, 1>{}(relu(conv_a(x)))));
  auto [loss, dx, dw, db] = value_and_grad(sum(conv_a(x) * r), x, conv_a.weight, conv_a.bias);
  tensor_store store;
  conv_a.initialize(store, 3);
  conv_b.initialize(store, 3);
  for (std::size_t n : {1, 5}) {
    INFO("Batch = " << n);
    require_gpu_matches_host(store,
                             {{"x", test::random_array<float>({n, 3, 9, 8}, 41)},
                              {"r", test::random_array<float>({n, 4, 9, 8}, 42)}},
                             1e-4, 1e-5, y, loss, dx, dw, db);
  }
}

TEST_CASE("cuda: Dropout draws the host's masks from the same seed", "[cuda]") {
  // The mask is a hash of the flat index and the seed (sin in f64), computed in the
  // kernel. The GPU's sin and its fused multiply-adds may differ from the host's in the
  // last bits, which can flip an element lying within about 1e-6 of the threshold: allow
  // one in a thousand, and require every element both keep to be scaled identically.
  nn::Dropout<0.3, 1> drop;
  auto x = input<"x", f32>(shape<Batch, 64, 32>);
  auto r = input<"r", f32>(shape<Batch, 64, 32>);
  auto y = drop.train(x);
  auto gpu = compile<cuda>(y, grad(sum(y * r), x));
  auto cpu = compile<host>(y, grad(sum(y * r), x));
  auto xv = test::random_array<float>({3, 64, 32}, 43, 0.5, 1.5);
  auto rv = test::random_array<float>({3, 64, 32}, 44);
  gpu.bind("x", xv); gpu.bind("r", rv);
  cpu.bind("x", xv); cpu.bind("r", rv);
  for (float seed : {1.0f, 17.0f}) {
    INFO("seed " << seed);
    gpu.bind("rng.seed", xt::xarray<float>(seed));
    cpu.bind("rng.seed", xt::xarray<float>(seed));
    gpu.run();
    cpu.run();
    xt::xarray<float> yg = gpu.output<0>(), yc = cpu.output<0>(), gg = gpu.output<1>(), gc = cpu.output<1>();
    std::size_t differing = 0, kept = 0;
    for (std::size_t i = 0; i < yg.size(); ++i) {
      bool kept_g = yg.data()[i] != 0.0f, kept_c = yc.data()[i] != 0.0f;
      kept += kept_c;
      if (kept_g != kept_c) {
        ++differing;
      } else if (kept_c) {
        REQUIRE(yg.data()[i] == yc.data()[i]);
        REQUIRE(gg.data()[i] == gc.data()[i]);
      }
    }
    INFO(differing << " of " << yg.size() << " elements kept on one side only; the host kept " << kept);
    REQUIRE(differing * 1000 <= yg.size());
    REQUIRE(kept > yg.size() / 2);
  }
}
