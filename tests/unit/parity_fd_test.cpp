// PyTorch parity, part 3 (issue 17): the gradients of the new ops against central finite
// differences in f64 (test::check_gradients, as grad_fd_test.cpp), away from kinks and
// inside domains. (A file of its own: with parity_ops_test.cpp's fixture cases, one file
// needed over 1.5 GB of compiler memory.)
#include "test_support.hpp"

using namespace luminal;

namespace {
using arr = xt::xarray<double>;
using test::check_gradients;
using test::feeds;
using test::uniform;
}  // namespace

TEMPLATE_LIST_TEST_CASE("parity fd: the new elementwise primitives and pow", "[parity][fd]", test_backends) {
  auto cs = param<"cos", f64>(shape<2, 3>);
  auto ef = param<"erf", f64>(shape<2, 3>);
  auto ec = param<"erfc", f64>(shape<2, 3>);
  auto lp = param<"log1p", f64>(shape<2, 3>);
  auto em = param<"expm1", f64>(shape<2, 3>);
  auto fl = param<"floor", f64>(shape<2, 3>);
  auto pa = param<"pow.a", f64>(shape<2, 3>);
  auto pb = param<"pow.b", f64>(shape<2, 3>);
  auto pn = param<"pow.negative_base", f64>(shape<2, 3>);
  auto r = input<"r", f64>(shape<2, 3>);
  auto odd = input<"odd", f64>(shape<2, 3>);
  auto loss = sum(cos(cs) * r) + sum(erf(ef) * r) + sum(erfc(ec) * r) + sum(log1p(lp) * r) + sum(expm1(em) * r) +
              sum((floor(fl) + round(fl) + ceil(fl) + trunc(fl) + sign(fl) + fl) * r) + sum(pow(pa, pb) * r) +
              sum((pow(pn, c<3>) + pow(pn, c<-2>) + pow(pn, odd)) * r) + sum(gelu(pa * pb) * r) + sum(rsqrt(pa) * r);
  // floor and friends are flat away from integers and halves: only `+ fl` has a slope.
  arr flv = uniform({2, 3}, 206, -3.0, 3.0);
  for (auto& v : flv) v = std::floor(v) + 0.2 + 0.1 * (v - std::floor(v));
  check_gradients<TestType>(loss,
                            feeds().add("cos", uniform({2, 3}, 201, -4.0, 4.0)).add("erf", uniform({2, 3}, 202, -2.0, 2.0))
                                   .add("erfc", uniform({2, 3}, 203, -2.0, 2.0)).add("log1p", uniform({2, 3}, 204, -0.5, 2.0))
                                   .add("expm1", uniform({2, 3}, 205, -2.0, 2.0)).add("floor", flv)
                                   .add("pow.a", uniform({2, 3}, 207, 0.5, 2.0)).add("pow.b", uniform({2, 3}, 208, -2.0, 2.0))
                                   .add("pow.negative_base", uniform({2, 3}, 209, -2.0, -0.5))
                                   .add("odd", arr{{3, -1, 5}, {1, -3, 2}}).add("r", uniform({2, 3}, 210)),
                            cs, ef, ec, lp, em, fl, pa, pb, pn);
}

TEMPLATE_LIST_TEST_CASE("parity fd: min, var, std, concat, stack and cumsum", "[parity][fd]", test_backends) {
  auto x = param<"x", f64>(shape<3, 4>);
  auto y = param<"y", f64>(shape<3, 2>);
  auto r = input<"r", f64>(shape<3, 1>);
  auto q = input<"q", f64>(shape<3, 6>);
  auto p = input<"p", f64>(shape<3, 2, 2>);
  auto loss = sum(min<1>(x, keepdim) * r) + sum(var<1>(x, keepdim) * r) + sum(stddev<0>(x, correction<0>)) +
              sum(concat<-1>(x, y) * q) + sum(stack<1>(y, y * y) * p) + sum(cumsum<0>(x) * cumsum<1>(x));
  check_gradients<TestType>(loss,
                            feeds().add("x", test::distinct_values({3, 4}, 211)).add("y", uniform({3, 2}, 212))
                                   .add("r", uniform({3, 1}, 213)).add("q", uniform({3, 6}, 214)).add("p", uniform({3, 2, 2}, 215)),
                            x, y);
}
