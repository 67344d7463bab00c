// The tape over a parameter_store on a backend whose memory the host cannot read: the
// values, gradients and optimizer state stay in that memory, so a training step moves no
// parameter across (PCIe on a GPU), and the numbers are those of the tape over a host
// tensor_store. Without a GPU the device is simulated: host memory behind a backend that
// declares it unreadable (so every path a GPU takes runs) and counts what is copied.
// luminal_cuda_tests runs the same cases on luminal::cuda and luminal::cuda_graph.
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <luminal/tape/tape.hpp>

#include "tape_support.hpp"

using namespace luminal;

namespace test {
/// Host memory that luminal must treat as device memory, with the bytes copied to and from
/// it counted.
struct counting_device : host {
  static constexpr bool host_accessible = false;
  static constexpr const char* name = "counting_device";
  static inline std::size_t bytes_to_device = 0, bytes_to_host = 0;
  void to_device(void* dst, const void* src, std::size_t bytes) {
    bytes_to_device += bytes;
    host::to_device(dst, src, bytes);
  }
  void to_host(void* dst, const void* src, std::size_t bytes) {
    bytes_to_host += bytes;
    host::to_host(dst, src, bytes);
  }
};
static_assert(backend<counting_device>);
}  // namespace test

#if defined(LUMINAL_TEST_CUDA)
// cuda_graph too: each block program's run is a graph replayed once its buffers repeat.
using device_test_backends = std::tuple<luminal::cuda, luminal::cuda_graph>;
#elif defined(LUMINAL_TEST_KOKKOS_DEVICE)
using device_test_backends = std::tuple<luminal::kokkos<Kokkos::DefaultExecutionSpace>>;
#else
using device_test_backends = std::tuple<test::counting_device>;
#endif

namespace {
constexpr Dim Batch{"Batch"};
constexpr std::int64_t width = 256;

template <fixed_string P>
auto wide_layer(auto x) { return x + tanh(nn::Linear<P + ".fc", width, width>{}(x)); }

tensor_store wide_parameters() {
  tensor_store params;
  nn::Linear<"h.0.fc", width, width>{}.initialize(params, 1);
  nn::Linear<"h.1.fc", width, width>{}.initialize(params, 2);
  nn::Linear<"head", width, 3>{}.initialize(params, 3);
  return params;
}

std::size_t byte_count(const tensor_store& store) {
  std::size_t bytes = 0;
  for (const auto& [name, entry] : store) bytes += entry.data.size();
  return bytes;
}

/// The residual layer and the cross-entropy head these tests record, compiled for B.
template <class B = host>
auto wide_blocks() {
  auto x = input<"x", f32>(shape<Batch, width>);
  auto labels = input<"labels", i32>(shape<Batch>);
  struct blocks {
    decltype(compile_block<"layer", B>(wide_layer<"layer">(x), x)) layer;
    decltype(compile_block<"head", B>(nn::cross_entropy(nn::Linear<"head", width, 3>{}(x), labels), x)) head;
  };
  return blocks{compile_block<"layer", B>(wide_layer<"layer">(x), x),
                compile_block<"head", B>(nn::cross_entropy(nn::Linear<"head", width, 3>{}(x), labels), x)};
}

/// One recording of h.0 -> h.1 -> h.0 -> head (h.0 used twice) and its backward.
template <class Tape, class Layer, class Head>
float record_step(Tape& t, Layer& layer, Head& head, const xt::xarray<float>& data, const xt::xarray<int>& classes) {
  t.clear();
  auto h = t.call(layer, "h.0", {{"x", t.constant(data)}});
  h = t.call(layer, "h.1", {{"x", h}});
  h = t.call(layer, "h.0", {{"x", h}});
  auto loss = t.call(head, "", {{"x", h}, {"labels", t.constant(classes)}});
  t.backward(loss);
  return t.template item<float>(loss);
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("tape over a parameter_store: AdamW steps match the host store's and move no parameter",
                        "[tape][optimizer]", device_test_backends) {
  auto [layer, head] = wide_blocks<TestType>();
  auto [host_layer, host_head] = wide_blocks();
  auto data = test::random_array<float>({4, width}, 7);
  xt::xarray<int> classes = {0, 1, 2, 1};

  tensor_store host_params = wide_parameters();
  const std::size_t parameter_bytes = byte_count(host_params);
  parameter_store<TestType> device_params;
  REQUIRE(device_params.add_all(host_params) == host_params.size());

  // A small clipping bound, so that the clipping scale is exercised too.
  constexpr float lr = 1e-4f;
  parameter_optimizer<adamw> host_optimizer({.lr = lr});
  parameter_optimizer<adamw, f32, TestType> device_optimizer({.lr = lr});
  host_optimizer.max_grad_norm = device_optimizer.max_grad_norm = 1.0;
  tape<> host_tape(host_params);
  tape<TestType> device_tape(device_params);
  for (int k = 0; k < 3; ++k) {
    INFO("step " << k);
    if constexpr (requires { TestType::bytes_to_device; }) TestType::bytes_to_device = TestType::bytes_to_host = 0;
    const float loss = record_step(device_tape, *layer, *head, data, classes);
    const double norm = device_optimizer.step(device_params, device_tape.device_gradients());
    if constexpr (requires { TestType::bytes_to_device; }) {
      // What crosses: the batch, the loss, one norm per tensor, the hyperparameters and
      // the programs' pointer tables; the parameters alone would be ~1/2 MB, and they,
      // their gradients and the optimizer state would each cross at least once.
      INFO("bytes to the device " << TestType::bytes_to_device << ", to the host " << TestType::bytes_to_host
                                  << ", parameters " << parameter_bytes);
      REQUIRE(TestType::bytes_to_device + TestType::bytes_to_host < parameter_bytes / 10);
    }
    const float host_loss = record_step(host_tape, *host_layer, *host_head, data, classes);
    const double host_norm = host_optimizer.step(host_params, host_tape.gradients());
    REQUIRE(loss == Approx(host_loss).epsilon(1e-5));
    REQUIRE(norm == Approx(host_norm).epsilon(1e-4));
    REQUIRE(norm > 1.0);  // clipped
  }
  // AdamW moves every element by about lr per step whatever its gradient's size, so an
  // element whose gradient is mostly cancellation (its rounding differs between the GPU's
  // reduction order and the host's) moves by a visibly different fraction of lr: on an
  // H200, 0.02 lr over 3 steps. A wrong kernel is off by lr or more.
  for (const auto& [name, entry] : host_params) {
    INFO("parameter " << name);
    test::require_close(device_params.template get<float>(name), host_params.get<float>(name), 1e-4, 0.1 * lr);
  }
  // The gradients stay allocated and zeroed for the next backward.
  REQUIRE(device_tape.device_gradients().size() == host_params.size());
  REQUIRE(xt::amax(xt::abs(device_tape.device_gradients().template get<float>("h.0.fc.weight")))() == 0.0f);

  // The optimizer state is on the device; a checkpoint brings it back, and an optimizer
  // that loads it takes the same next step as the one that made it.
  tensor_store checkpoint = device_optimizer.checkpoint(device_params);
  test::require_close(checkpoint.get<float>("optimizer.exp_avg_sq.h.1.fc.weight"),
                      host_optimizer.state().get<float>("optimizer.exp_avg_sq.h.1.fc.weight"), 1e-4, 1e-12);
  parameter_store<TestType> resumed_params;
  resumed_params.add_all(checkpoint);
  parameter_optimizer<adamw, f32, TestType> resumed_optimizer({.lr = 1e-4f});
  resumed_optimizer.max_grad_norm = 1.0;
  resumed_optimizer.load_state(checkpoint);
  tape<TestType> resumed_tape(resumed_params);
  record_step(resumed_tape, *layer, *head, data, classes);
  resumed_optimizer.step(resumed_params, resumed_tape.device_gradients());
  record_step(device_tape, *layer, *head, data, classes);
  device_optimizer.step(device_params, device_tape.device_gradients());
  REQUIRE(resumed_optimizer.step_count() == 4);
  test::require_close(resumed_params.template get<float>("h.1.fc.weight"),
                      device_params.template get<float>("h.1.fc.weight"), 1e-6, 1e-9);
}

TEMPLATE_LIST_TEST_CASE("tape over a parameter_store: the store's errors name what is wrong", "[tape][errors]",
                        device_test_backends) {
  auto x = input<"x", f32>(shape<Batch, 8>);
  auto layer = compile_block<"layer", TestType>(x + tanh(nn::Linear<"layer.fc", 8, 8>{}(x)), x);
  tensor_store host_params;
  nn::Linear<"h.0.fc", 8, 8>{}.initialize(host_params, 1);
  parameter_store<TestType> params;
  params.add_all(host_params);
  tape<TestType> t(params);
  REQUIRE_THROWS_WITH(t.gradients(), Catch::Contains("parameter_store") && Catch::Contains("device_gradients()"));
  REQUIRE_THROWS_WITH(t.parameters(), Catch::Contains("parameter_store"));
  auto v = t.variable(test::random_array<float>({2, 8}, 3));
  REQUIRE_THROWS_WITH(t.call(*layer, "h.1", {{"x", v}}),
                      Catch::Contains("'h.1.fc.weight'") && Catch::Contains("does not hold"));
  params.add("h.1.fc.weight", dtype_tag::f32, {8, 4});
  REQUIRE_THROWS_WITH(t.call(*layer, "h.1", {{"x", v}}),
                      Catch::Contains("'h.1.fc.weight' is f32 [8, 4]") && Catch::Contains("[8, 8]"));

  tape<TestType> host_store_tape(host_params);
  REQUIRE_THROWS_WITH(host_store_tape.device_gradients(), Catch::Contains("gradients()"));
}

TEMPLATE_LIST_TEST_CASE("tape over a parameter_store: backward() calls add up, and a step clears the gradients",
                        "[tape][optimizer]", device_test_backends) {
  auto [layer, head] = wide_blocks<TestType>();
  auto data = test::random_array<float>({4, width}, 7);
  xt::xarray<int> classes = {0, 1, 2, 1};
  parameter_store<TestType> params;
  params.add_all(wide_parameters());
  parameter_optimizer<adamw, f32, TestType> optimizer({.lr = 1e-3f});
  tape<TestType> t(params);
  auto& grads = t.device_gradients();

  // The first backward writes each gradient (h.0 is called twice: its second call adds);
  // the second adds to them.
  record_step(t, *layer, *head, data, classes);
  const xt::xarray<float> once = grads.template get<float>("h.1.fc.weight");
  const xt::xarray<float> twice_called = grads.template get<float>("h.0.fc.weight");
  REQUIRE(xt::amax(xt::abs(once))() > 0.0f);
  record_step(t, *layer, *head, data, classes);
  REQUIRE(bool(grads.template get<float>("h.1.fc.weight") == once * 2.0f));
  test::require_close(grads.template get<float>("h.0.fc.weight"), xt::xarray<float>(twice_called * 2.0f), 1e-6, 1e-9);

  // A step clears them without writing; they read as zeros.
  optimizer.step(params, grads);
  REQUIRE(grads.at("h.1.fc.bias").zero_pending);
  REQUIRE(xt::amax(xt::abs(grads.template get<float>("h.1.fc.bias")))() == 0.0f);
  REQUIRE_FALSE(grads.at("h.1.fc.bias").zero_pending);  // get() wrote the zeros

  // The next backward writes over them: its gradients are those of a fresh tape.
  record_step(t, *layer, *head, data, classes);
  tape<TestType> fresh(params);
  record_step(fresh, *layer, *head, data, classes);
  for (const auto& [name, g] : fresh.device_gradients()) {
    INFO("gradient " << name);
    REQUIRE(bool(grads.template get<float>(name) == fresh.device_gradients().template get<float>(name)));
  }

  // A parameter whose gradient nothing reached since the last step is left as it is, as
  // torch skips a parameter whose .grad is None.
  optimizer.step(params, grads);
  const xt::xarray<float> h1_before = params.template get<float>("h.1.fc.weight");
  const xt::xarray<float> h0_before = params.template get<float>("h.0.fc.weight");
  t.clear();
  auto h = t.call(*layer, "h.0", {{"x", t.constant(data)}});
  t.backward(t.call(*head, "", {{"x", h}, {"labels", t.constant(classes)}}));
  optimizer.step(params, grads);
  REQUIRE(bool(params.template get<float>("h.1.fc.weight") == h1_before));
  REQUIRE_FALSE(bool(params.template get<float>("h.0.fc.weight") == h0_before));
}

TEMPLATE_LIST_TEST_CASE("parameter_store: lazily zeroed tensors read as zeros, and a second buffer exists once asked for",
                        "[tape]", device_test_backends) {
  parameter_store<TestType> store;
  store.add("w", dtype_tag::f32, {2, 3});
  store.set("w", xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  REQUIRE(store.at("w").next == nullptr);
  store.zero_lazily("w");
  REQUIRE(bool(store.to_tensors().template get<float>("w") == xt::zeros<float>({2, 3})));
  store.set("w", xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  store.zero_lazily("w");
  store.set("w", xt::xarray<float>{{7, 8, 9}, {1, 2, 3}});  // a whole write ends the pending zeros
  REQUIRE(bool(store.template get<float>("w") == xt::xarray<float>{{7, 8, 9}, {1, 2, 3}}));
  store.swap_buffers();  // no second buffer yet: nothing to swap
  REQUIRE(bool(store.template get<float>("w") == xt::xarray<float>{{7, 8, 9}, {1, 2, 3}}));
  void* next = store.next_buffer("w");
  REQUIRE(next != nullptr);
  REQUIRE(store.next_buffer("w") == next);
  store.swap_buffers();
  REQUIRE(store.at("w").current == next);
}
