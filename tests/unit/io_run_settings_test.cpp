// run_settings (issue 63): a run's settings written exactly, recorded in a checkpoint's
// metadata, compared with what a checkpoint recorded, and serialized for the ranks'
// comparison (check_same_settings).
#include <catch2/catch.hpp>

#include <luminal/io/run_settings.hpp>

using namespace luminal;

TEST_CASE("run_settings writes numbers exactly and records them as run.<name>", "[io][settings]") {
  run_settings run("--");
  run.set("lr", 1e-3f);
  run.set("seed", std::uint64_t(18446744073709551615ull));
  run.set("model", "mlp");
  run.set("resume", true);
  run.set("training images", std::size_t(6000), run_settings::kind::other);
  run.set("lr", 2e-3f);  // replaces
  REQUIRE(run.items().size() == 5);
  CHECK(*run.find("lr") == "0.002");
  CHECK(*run.find("seed") == "18446744073709551615");
  CHECK(run.display("lr") == "--lr");
  CHECK(run.display("training images") == "training images");
  tensor_store store;
  run.record(store);
  CHECK(store.metadata.at("run.lr") == "0.002");
  CHECK(store.metadata.at("run.training images") == "6000");
}

TEST_CASE("run_settings names each setting a checkpoint recorded differently", "[io][settings]") {
  run_settings run("--");
  run.set("seed", 1);
  run.set("lr", 0.01f);
  run.set("epochs", 3);
  tensor_store saved;
  saved.metadata["run.seed"] = "2";
  saved.metadata["run.lr"] = "0.01";
  // "epochs" not recorded (an older checkpoint): not compared
  const auto changes = run.changes_from(saved.metadata);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].name == "seed");
  CHECK(run.describe(changes[0]) == "--seed is 1 in this run, 2 in the checkpoint");
}

TEST_CASE("run_settings survive serialization with any bytes in them", "[io][settings]") {
  run_settings run("--");
  run.set("corpus", std::string("a:b\n7:x\0y", 9));
  run.set("", "");
  run.set("data", std::size_t(12), run_settings::kind::other);
  const run_settings back = run_settings::parse_serialized(run.serialized(), "--");
  REQUIRE(back.items().size() == 3);
  CHECK(back.serialized() == run.serialized());
  CHECK(back.display("data") == "data");
  CHECK(run_settings::parse_serialized("o3:ab").items().empty());  // truncated: nothing made up
  CHECK(run_settings::shown(std::string(200, 'x')).size() == 80);
}
