// What the tape tests share: comparing a tape's gradients with a static program's.
#pragma once
#include <luminal/tape/tape.hpp>
#include <luminal/backends/host.hpp>
#include <map>
#include <string>

#include "test_support.hpp"

namespace test {
/// Every expected parameter gradient is in `actual` (and nothing else), within f32 tolerance.
inline void require_same_store(const luminal::tensor_store& actual, const std::map<std::string, xt::xarray<float>>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (const auto& [name, value] : expected) {
    INFO("parameter " << name);
    REQUIRE(actual.contains(name));
    require_close(actual.get<float>(name), value, 2e-4, 2e-5);
  }
}
}  // namespace test
