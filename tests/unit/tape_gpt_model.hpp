// The GPT of tape_gpt_test.cpp, shared with tape_gpt_reference.cpp, which computes the
// static compile's loss and gradients in a translation unit of its own (the static
// gradient program and the tape's blocks are each about a minute of compile time).
#pragma once
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/nn/attention.hpp>
#include <map>
#include <string>
#include <xtensor/xarray.hpp>

namespace test::gpt {
using namespace luminal;
inline constexpr Dim Batch{"Batch"}, Seq{"Seq"};

// Token and position embeddings, pre-norm transformer blocks, a final layer norm and a
// linear head, trained with cross-entropy on next tokens.
inline constexpr std::int64_t vocab = 11, width = 16, heads = 2, max_seq = 8;
inline constexpr auto tokens = input<"tokens", i32>(shape<Batch, Seq>);
inline constexpr auto targets = input<"targets", i32>(shape<Batch, Seq>);

inline auto embed(auto ids) {
  return nn::PositionEmbedding<"wpe", max_seq, width>{}(nn::Embedding<"wte", vocab, width>{}(ids));
}
inline auto head_loss(auto h, auto labels) {
  return nn::cross_entropy(nn::Linear<"lm_head", width, vocab>{}(nn::LayerNorm<"ln_f", width>{}(h)), labels);
}

/// The static compile's loss and parameter gradients (by name) of one layer "h.0".
struct reference {
  float loss = 0;
  std::map<std::string, xt::xarray<float>> gradients;
};
reference static_reference(const tensor_store& params, const xt::xarray<int>& ids, const xt::xarray<int>& next);
}  // namespace test::gpt
