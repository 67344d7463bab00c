// The fully static compile of tape_gpt_model.hpp's one-layer GPT: one graph, its loss and
// the gradient of every parameter, for tape_gpt_test.cpp to compare the tape against.
#include <boost/mp11/algorithm.hpp>
#include <tuple>

#include "tape_gpt_model.hpp"

namespace test::gpt {
reference static_reference(const tensor_store& params, const xt::xarray<int>& ids, const xt::xarray<int>& next) {
  auto model = head_loss(nn::TransformerBlock<"h.0", width, heads>{}(embed(tokens)), targets);
  constexpr auto all = std::tuple_cat(nn::Embedding<"wte", vocab, width>::parameters,
                                      nn::PositionEmbedding<"wpe", max_seq, width>::parameters,
                                      nn::TransformerBlock<"h.0", width, heads>::parameters,
                                      nn::LayerNorm<"ln_f", width>::parameters, nn::Linear<"lm_head", width, vocab>::parameters);
  auto prog = std::apply([&](auto... p) { return std::apply([](auto... o) { return compile(o...); }, value_and_grad(model, p...)); }, all);
  prog.bind("tokens", ids);
  prog.bind("targets", next);
  for (const auto& name : params.names()) prog.bind(name, params.get<float>(name));
  prog.run();
  reference r;
  r.loss = prog.output<0>()();
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<std::tuple_size_v<decltype(all)>>>([&](auto I) {
    using P = std::remove_cvref_t<std::tuple_element_t<I, decltype(all)>>;
    r.gradients[std::string(P::name.view())] = prog.template output<1 + I>();
  });
  return r;
}
}  // namespace test::gpt
