// The tape against the fully static compile of a 2-layer GPT (embeddings, two pre-norm
// transformer blocks, final norm, head, cross-entropy): the tape's blocks are compiled once
// and called per layer with the parameters "h.<i>.*"; the static program is one graph.
#include <luminal/nn.hpp>
#include <luminal/nn/attention.hpp>

#include "tape_support.hpp"

using namespace luminal;

namespace {
constexpr Dim Batch{"Batch"}, Seq{"Seq"};

// A 2-layer GPT: token and position embeddings, two pre-norm transformer blocks, a final
// layer norm and a linear head, trained with cross-entropy on next tokens.
constexpr std::int64_t vocab = 11, width = 16, heads = 2, max_seq = 8;
auto tokens = input<"tokens", i32>(shape<Batch, Seq>);
auto targets = input<"targets", i32>(shape<Batch, Seq>);

auto embed(auto ids) {
  return nn::PositionEmbedding<"wpe", max_seq, width>{}(nn::Embedding<"wte", vocab, width>{}(ids));
}
auto head_loss(auto h, auto labels) {
  return nn::cross_entropy(nn::Linear<"lm_head", width, vocab>{}(nn::LayerNorm<"ln_f", width>{}(h)), labels);
}

tensor_store gpt_parameters(int layers) {
  tensor_store params;
  nn::Embedding<"wte", vocab, width>{}.initialize(params, 1);
  nn::PositionEmbedding<"wpe", max_seq, width>{}.initialize(params, 2);
  nn::LayerNorm<"ln_f", width>{}.initialize(params, 3);
  nn::Linear<"lm_head", width, vocab>{}.initialize(params, 4);
  for (int i = 0; i < layers; ++i) {
    tensor_store one;
    nn::TransformerBlock<"layer", width, heads>{}.initialize(one, 10 + unsigned(i));
    for (const auto& [name, entry] : one)
      params.insert("h." + std::to_string(i) + name.substr(std::string_view("layer").size()), entry);
  }
  // LayerNorm starts at ones and zeros; perturb it so that its gradients are exercised.
  for (const auto& name : params.names()) {
    auto& e = params.at(name);
    float* v = reinterpret_cast<float*>(e.data.data());
    for (std::size_t i = 0; i < e.element_count(); ++i) v[i] += 0.05f * float(std::sin(double(i) + name.size()));
  }
  return params;
}

}  // namespace

TEST_CASE("tape: a 2-layer GPT gives the static compile's loss and gradients", "[tape][gpt]") {
  auto x = input<"x", f32>(shape<Batch, Seq, width>);
  auto embedding = compile_block<"embed">(embed(tokens));
  auto layer = compile_block<"layer">(nn::TransformerBlock<"layer", width, heads>{}(x), x);
  auto head = compile_block<"head">(head_loss(x, targets), x);
  // The layer keeps what its backward reads; everything cheap is recomputed.
  REQUIRE(std::remove_reference_t<decltype(*layer)>::kept_count >= 5);

  const tensor_store params = gpt_parameters(2);
  auto ids = test::random_ints<int>({3, 7}, 5, 0, int(vocab) - 1);
  auto next = test::random_ints<int>({3, 7}, 6, 0, int(vocab) - 1);

  tape<> t(params);
  auto h = t.call(*embedding, "", {{"tokens", t.constant(ids)}});
  for (int i = 0; i < 2; ++i) h = t.call(*layer, "h." + std::to_string(i), {{"x", h}});
  auto loss = t.call(*head, "", {{"x", h}, {"targets", t.constant(next)}});
  t.backward(loss);

  auto model = head_loss(nn::TransformerBlock<"h.1", width, heads>{}(nn::TransformerBlock<"h.0", width, heads>{}(embed(tokens))),
                         targets);
  constexpr auto all = std::tuple_cat(nn::Embedding<"wte", vocab, width>::parameters,
                                      nn::PositionEmbedding<"wpe", max_seq, width>::parameters,
                                      nn::TransformerBlock<"h.0", width, heads>::parameters,
                                      nn::TransformerBlock<"h.1", width, heads>::parameters,
                                      nn::LayerNorm<"ln_f", width>::parameters, nn::Linear<"lm_head", width, vocab>::parameters);
  auto prog = std::apply([&](auto... p) { return std::apply([](auto... o) { return compile(o...); }, value_and_grad(model, p...)); }, all);
  prog.bind("tokens", ids);
  prog.bind("targets", next);
  for (const auto& name : params.names()) prog.bind(name, params.get<float>(name));
  prog.run();
  REQUIRE(t.item<float>(loss) == Approx(prog.output<0>()()).epsilon(1e-5));

  std::map<std::string, xt::xarray<float>> expected;
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<std::tuple_size_v<decltype(all)>>>([&](auto I) {
    using P = std::remove_cvref_t<std::tuple_element_t<I, decltype(all)>>;
    expected[std::string(P::name.view())] = prog.template output<1 + I>();
  });
  test::require_same_store(t.gradients(), expected);
}

