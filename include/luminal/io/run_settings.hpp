// run_settings: the settings that define a training run (the seed, the learning rate, the
// batch size, the model's size, the data's length, ...) as names and exact texts. A
// checkpoint records them in its metadata as "run.<name>", so that a resume can tell
// whether it continues the same run, and data-parallel ranks compare theirs before they
// train (check_same_settings, distributed/data_parallel.hpp).
//
//     luminal::run_settings run("--");              // "--": how messages show a name
//     run.set("seed", opt.seed);
//     run.set("lr", opt.lr);                         // 0.001f is "0.001": exact, shortest
//     run.set("model", opt.model);
//     tensor_store state = step.state();
//     run.record(state);                             // metadata "run.seed" = "1", ...
//     save_safetensors(state, "ckpt.safetensors");
//     ...                                            // resuming:
//     auto header = read_safetensors_header("ckpt.safetensors");
//     for (const auto& c : run.changes_from(header.metadata))
//       std::cerr << run.describe(c) << "\n";        // "--lr is 0.01, the checkpoint's 0.001"
#pragma once
#include <charconv>
#include <concepts>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "tensor_store.hpp"

namespace luminal {

/// Named settings of a run, in the order they were set; see the file comment.
class run_settings {
 public:
  /// An option of the program (messages show it with the display prefix: "--lr"), or
  /// another fact of the run (the data's length: shown as it is named).
  enum class kind { option, other };
  struct setting {
    std::string name, value;
    kind type = kind::option;
  };
  /// A setting whose value differs from the one a checkpoint recorded.
  struct change {
    std::string name, saved, now;
  };
  /// The metadata keys are this prefix and a setting's name.
  static constexpr std::string_view metadata_prefix = "run.";

  /// `display_prefix` goes before a name in messages ("--" for a program's options).
  explicit run_settings(std::string display_prefix = "") : display_prefix_(std::move(display_prefix)) {}

  /// Sets (or replaces) a setting. Numbers are written exactly, as the shortest text
  /// that reads back as the same value (std::to_chars): 1e-3f is "0.001".
  void set(std::string name, std::string value, kind type = kind::option) {
    for (setting& s : items_)
      if (s.name == name) {
        s.value = std::move(value);
        s.type = type;
        return;
      }
    items_.push_back({std::move(name), std::move(value), type});
  }
  void set(std::string name, const char* value, kind type = kind::option) {
    set(std::move(name), std::string(value), type);
  }
  void set(std::string name, bool value, kind type = kind::option) {
    set(std::move(name), std::string(value ? "true" : "false"), type);
  }
  template <class T>
    requires(std::integral<T> || std::floating_point<T>)
  void set(std::string name, T value, kind type = kind::option) {
    char text[64];
    const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
    set(std::move(name), std::string(text, ec == std::errc() ? end : text), type);
  }

  const std::vector<setting>& items() const { return items_; }
  /// The value of `name`, or nullptr.
  const std::string* find(std::string_view name) const {
    for (const setting& s : items_)
      if (s.name == name) return &s.value;
    return nullptr;
  }
  /// How messages show a setting's name: an option with the display prefix ("--lr"),
  /// another setting as it is named ("training images").
  std::string display(std::string_view name) const {
    for (const setting& s : items_)
      if (s.name == name && s.type == kind::other) return std::string(name);
    return display_prefix_ + std::string(name);
  }

  const std::string& display_prefix() const { return display_prefix_; }

  /// Writes every setting into `store`'s metadata as "run.<name>".
  void record(tensor_store& store) const {
    for (const setting& s : items_) store.metadata[std::string(metadata_prefix) + s.name] = s.value;
  }
  /// The settings whose value differs from the one `metadata` records. A setting the
  /// metadata does not record at all is not compared (a file written before settings were
  /// recorded, or by another program: there is nothing to compare with).
  template <class Metadata>
  std::vector<change> changes_from(const Metadata& metadata) const {
    std::vector<change> out;
    for (const setting& s : items_) {
      auto it = metadata.find(std::string(metadata_prefix) + s.name);
      if (it != metadata.end() && it->second != s.value) out.push_back({s.name, it->second, s.value});
    }
    return out;
  }
  /// "--lr is 0.01 in this run, 0.001 in the checkpoint" (values cut to 80 bytes).
  std::string describe(const change& c) const {
    return display(c.name) + " is " + shown(c.now) + " in this run, " + shown(c.saved) + " in the checkpoint";
  }

  /// The settings as one text that two sets of settings share exactly when they are the
  /// same: each kind, name and value, the texts with their lengths ("o<n>:<name><n>:<value>"),
  /// so any bytes may occur in them.
  std::string serialized() const {
    std::string out;
    for (const setting& s : items_) {
      out += s.type == kind::option ? 'o' : 'x';
      out += std::to_string(s.name.size()) + ':' + s.name;
      out += std::to_string(s.value.size()) + ':' + s.value;
    }
    return out;
  }
  /// The inverse of serialized(); text that is not one gives the settings read so far.
  static run_settings parse_serialized(std::string_view text, std::string display_prefix = "") {
    run_settings out(std::move(display_prefix));
    auto field = [&](std::string& into) {
      const std::size_t colon = text.find(':');
      std::size_t length = 0;
      if (colon == std::string_view::npos) return false;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + colon, length);
      if (ec != std::errc() || end != text.data() + colon || length > text.size() - colon - 1) return false;
      into.assign(text.substr(colon + 1, length));
      text.remove_prefix(colon + 1 + length);
      return true;
    };
    std::string name, value;
    while (!text.empty() && (text[0] == 'o' || text[0] == 'x')) {
      const kind type = text[0] == 'o' ? kind::option : kind::other;
      text.remove_prefix(1);
      if (!field(name) || !field(value)) break;
      out.items_.push_back({name, value, type});
    }
    return out;
  }

  /// `text` for a message: at most 80 bytes (cut at a UTF-8 character boundary), quoted
  /// when it is empty.
  static std::string shown(std::string_view text) {
    if (text.empty()) return "''";
    if (text.size() <= 80) return std::string(text);
    std::size_t cut = 77;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    return std::string(text.substr(0, cut)) + "...";
  }

 private:
  std::string display_prefix_;
  std::vector<setting> items_;
};

}  // namespace luminal
