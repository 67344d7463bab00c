// expect: shapes_cannot_be_broadcast_together<.*\(2, 4, 8, 16\).*\(8, 8\)
// at most 20 lines of at most 400 characters
// Issue 64's fourth mistake: a wrong broadcast inside the user's own template helper
// (a RoPE that multiplies heads of 16 by the cosines of 8 angles), called by a block that is called
// by a two-layer model inside compile_train_step. The compiler names the helper's
// template arguments in its "In instantiation of" lines; a node's type is a short name
// (core/node_name.hpp), so they stay short however deep the graph that feeds the helper.
#include <luminal/nn.hpp>
#include <luminal/backends/host.hpp>
#include <luminal/train/train.hpp>
using namespace luminal;
constexpr std::int64_t batch = 2, seq = 8, width = 64, heads = 4, head_dim = 16;

template <expression X, expression A>
auto apply_rope(X x, A angles) {
  auto rotated = concat<3>(-slice<3, 8, 16>(x), slice<3, 0, 8>(x));
  auto cos_t = cos(angles);  // the mistake: concat<1>(cos(angles), cos(angles)) was meant
  auto sin_t = concat<1>(sin(angles), sin(angles));
  return x * cos_t + rotated * sin_t;  // error here
}

template <fixed_string P, expression X, expression A>
auto block(X x, A angles) {
  nn::RMSNorm<P + ".norm", width> norm;
  nn::Linear<P + ".q", width, width, false> q;
  nn::Linear<P + ".o", width, width, false> o;
  auto heads_first = permute<0, 2, 1, 3>(reshape(q(norm(x)), shape<batch, seq, heads, head_dim>));
  auto rotated = apply_rope(heads_first, angles);
  return x + o(reshape(permute<0, 2, 1, 3>(rotated), shape<batch, seq, width>));
}

int main() {
  nn::Embedding<"embed", 32, width> embed;
  auto tokens = input<"tokens", i32>(shape<batch, seq>);
  auto targets = input<"targets", i32>(shape<batch, seq>);
  auto angles = cast<f32>(iota<0, i32>(shape<seq, head_dim / 2>)) * c<0.5>;
  auto h = block<"l1">(block<"l0">(embed(tokens), angles), angles);
  auto loss = nn::cross_entropy(matmul(h, transpose(embed.weight)), targets);
  auto step = compile_train_step(loss, adamw{});
  (void)step;
}
