// The program of issue 64, whose compile time benchmarks/compile_time.sh measures: a small
// Llama-style language model written as a PyTorch user ports one, trained as one compiled
// step. RMSNorm, grouped-query attention (4 query heads, 2 key/value heads) with RoPE
// composed from iota/exp2/cos/sin/slice/concat in the user's own helper, SwiGLU, a tied
// embedding, cross-entropy, AdamW; 10 steps on a fixed token stream.
//
//     g++ ... -DLAYERS=4 -DPART=4 benchmarks/llama_train_compile.cpp   # what it compiles:
//       PART 0: the loss's types only      1: compile(loss)
//            2: the gradients' types only  3: compile(loss, gradients)   4: compile_train_step
//            5: the same model on the tape: one layer block called LAYERS times, AdamW
//               through parameter_optimizer (LAYERS then changes nothing that is compiled)
//     ./build/benchmarks/llama_train_compile        # prints the loss every 5 steps
#include <cstdio>
#include <utility>
#include <luminal/backends/host.hpp>
#include <luminal/nn.hpp>
#include <luminal/tape/tape.hpp>
#include <luminal/train/parameter_optimizer.hpp>
#include <luminal/train/train.hpp>

#ifndef LAYERS
#define LAYERS 2
#endif
#ifndef PART
#define PART 4
#endif

using namespace luminal;

constexpr std::int64_t vocab = 32, width = 64, heads = 4, kv_heads = 2, head_dim = width / heads, hidden = 172;
constexpr std::int64_t batch = 2, seq = 8;

/// "l0", "l1", ...: a layer's parameter prefix.
template <int I>
constexpr fixed_string<3> layer_name() {
  fixed_string<3> name("l0");
  name.chars[1] = char('0' + I);
  return name;
}

/// Rotates x [batch, heads, seq, head_dim] by the angles [seq, head_dim / 2] (rotate_half).
template <expression X, expression A>
auto apply_rope(X x, A angles) {
  auto cos_t = concat<1>(cos(angles), cos(angles));
  auto sin_t = concat<1>(sin(angles), sin(angles));
  auto first = slice<3, 0, head_dim / 2>(x);
  auto second = slice<3, head_dim / 2, head_dim>(x);
  auto rotated = concat<3>(-second, first);
  return x * cos_t + rotated * sin_t;
}

template <fixed_string P>
struct Block {
  nn::RMSNorm<P + ".attn_norm", width> attn_norm;
  nn::Linear<P + ".q", width, heads * head_dim, false> q;
  nn::Linear<P + ".k", width, kv_heads * head_dim, false> k;
  nn::Linear<P + ".v", width, kv_heads * head_dim, false> v;
  nn::Linear<P + ".o", heads * head_dim, width, false> o;
  nn::RMSNorm<P + ".mlp_norm", width> mlp_norm;
  nn::Linear<P + ".gate", width, hidden, false> gate;
  nn::Linear<P + ".up", width, hidden, false> up;
  nn::Linear<P + ".down", hidden, width, false> down;

  template <std::int64_t H, expression X>
  static auto split(X x) {
    return permute<0, 2, 1, 3>(reshape(x, shape<batch, seq, H, head_dim>));
  }

  template <expression X, expression A>
  auto operator()(X x, A angles) const {
    auto h = attn_norm(x);
    auto queries = apply_rope(split<heads>(q(h)), angles);                       // [B, 4, S, D]
    auto keys = apply_rope(split<kv_heads>(k(h)), angles);                       // [B, 2, S, D]
    auto values = split<kv_heads>(v(h));
    // Grouped queries: heads 2g and 2g + 1 share key/value head g.
    auto grouped = reshape(queries, shape<batch, kv_heads, 2 * seq, head_dim>);
    auto scores = matmul(grouped, transpose(keys)) * c<0.25>;                     // [B, 2, 2S, S]
    auto mask = less_than(iota<3, i32>(shape<batch, kv_heads, 2 * seq, seq>),
                          iota<2, i32>(shape<batch, kv_heads, 2 * seq, seq>) % c<int(seq)> + c<1>);
    auto attended = matmul(softmax<-1>(where(mask, scores, c<-1e30>)), values);  // [B, 2, 2S, D]
    auto merged = reshape(permute<0, 2, 1, 3>(reshape(attended, shape<batch, heads, seq, head_dim>)),
                          shape<batch, seq, width>);
    auto mid = x + o(merged);
    auto m = mlp_norm(mid);
    return mid + down(silu(gate(m)) * up(m));
  }

  void initialize(tensor_store& store, std::uint64_t seed) const {
    attn_norm.initialize(store, seed);
    q.initialize(store, seed);
    k.initialize(store, seed);
    v.initialize(store, seed);
    o.initialize(store, seed);
    mlp_norm.initialize(store, seed);
    gate.initialize(store, seed);
    up.initialize(store, seed);
    down.initialize(store, seed);
  }
};

template <int I, expression X, expression A>
auto layers(X x, A angles) {
  if constexpr (I == LAYERS) return x;
  else return layers<I + 1>(Block<layer_name<I>()>{}(x, angles), angles);
}

nn::Embedding<"embed", vocab, width> embed;
nn::RMSNorm<"norm", width> final_norm;

/// angles[s, i] = s * 10000^(-2i / head_dim)
auto rope_angles() {
  auto positions = cast<f32>(iota<0, i32>(shape<seq, head_dim / 2>));
  auto exponents = cast<f32>(iota<1, i32>(shape<seq, head_dim / 2>)) * c<-2.0 / head_dim * 13.287712379549449>;
  return positions * exp2(exponents);  // log2(10000) = 13.2877...
}

/// The final norm, the tied output projection and the loss.
template <expression H>
auto head_loss(H h) {
  auto logits = matmul(final_norm(h), transpose(embed.weight));  // tied
  return nn::cross_entropy(logits, input<"targets", i32>(shape<batch, seq>));
}

auto model_loss() {
  auto tokens = input<"tokens", i32>(shape<batch, seq>);
  return head_loss(layers<0>(embed(tokens), rope_angles()));
}

template <class... P>
auto gradient_program(auto loss, boost::mp11::mp_list<P...>) {
  if constexpr (PART != 3) return sizeof(decltype(grad(loss, P{}...)));
  else return std::apply([&](auto... g) { return compile(loss, g...); }, grad(loss, P{}...));
}

template <int I>
void initialize_layers(tensor_store& store) {
  if constexpr (I < LAYERS) {
    Block<layer_name<I>()>{}.initialize(store, 1);
    initialize_layers<I + 1>(store);
  }
}

/// A fixed token stream: tokens and targets [batch, seq], each token predicting the token 7 on.
std::pair<xt::xarray<i32>, xt::xarray<i32>> token_stream() {
  xt::xarray<i32> tokens = xt::xarray<i32>::from_shape({batch, seq});
  xt::xarray<i32> targets = xt::xarray<i32>::from_shape({batch, seq});
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens.flat(i) = i32((7 * i + 3) % vocab);
    targets.flat(i) = i32((7 * i + 10) % vocab);
  }
  return {tokens, targets};
}

/// Binds the token stream to a program or step.
template <class Runnable>
void bind_tokens(Runnable& runnable) {
  const auto [tokens, targets] = token_stream();
  runnable.bind("tokens", tokens);
  runnable.bind("targets", targets);
}

int main() {
  auto loss = model_loss();
  using params = filter_nodes<detail::is_parameter_leaf, topo_nodes<decltype(loss)>>;
  tensor_store init;
  embed.initialize(init, 1);
  final_norm.initialize(init, 1);
  initialize_layers<0>(init);
#if PART == 0
  std::printf("%zu parameters\n", boost::mp11::mp_size<params>::value);
#elif PART == 2
  std::printf("gradients: %zu bytes\n", std::size_t(gradient_program(loss, params{})));
#elif PART == 1 || PART == 3
#if PART == 1
  auto program = compile(loss);
#else
  auto program = gradient_program(loss, params{});
#endif
  init.bind(program);
  bind_tokens(program);
  program.run();
  std::printf("ran\n");
#elif PART == 5
  {
    auto x = input<"x", f32>(shape<batch, seq, width>);
    auto embed_block = compile_block<"embed">(embed(input<"tokens", i32>(shape<batch, seq>)));
    auto layer_block = compile_block<"layer">(Block<"layer">{}(x, rope_angles()), x);  // "layer.*" -> "l<i>.*"
    auto head_block = compile_block<"head">(head_loss(x), x);
    parameter_optimizer<adamw> optimizer({.lr = 3e-3f, .weight_decay = 0.01f});
    tensor_store params = init;
    const auto [tokens, targets] = token_stream();
    for (int k = 1; k <= 10; ++k) {
      tape<> t(params);
      auto h = t.call(*embed_block, "", {{"tokens", t.constant(tokens)}});
      for (int i = 0; i < LAYERS; ++i) h = t.call(*layer_block, "l" + std::to_string(i), {{"x", h}});
      auto loss_value = t.call(*head_block, "", {{"x", h}, {"targets", t.constant(targets)}});
      const float value = t.item<float>(loss_value);
      t.backward(loss_value);
      optimizer.step(params, t.gradients());
      if (k % 5 == 0) std::printf("step %2d  loss %.4f\n", k, value);
    }
  }
#else
  {
    auto step = compile_train_step(loss, adamw{.lr = 3e-3f, .weight_decay = 0.01f});
    step.store().assign(init);
    bind_tokens(step);
    for (int k = 1; k <= 10; ++k) {
      float value = step.run();
      if (k % 5 == 0) std::printf("step %2d  loss %.4f\n", k, value);
    }
  }
#endif
}
