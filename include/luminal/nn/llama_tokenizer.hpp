// The tokenizer and chat template a Llama GGUF file carries: a byte-level BPE
// (text/bpe.hpp) built from `tokenizer.ggml.*`, and its ChatML conversation format.
//
//     gguf_file file = gguf_file::open("SmolLM2-135M-Instruct.Q4_1.gguf");
//     bpe::tokenizer tok = nn::llama_tokenizer(file);
//     nn::chat_template chat = nn::chat_template::from_gguf(file);
//     std::string prompt = chat.format({{"user", "What is the capital of France?"}});
//     std::vector<std::int32_t> ids = tok.encode(prompt);
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../io/gguf.hpp"
#include "../text/bpe.hpp"

namespace luminal::nn {

/// The tokenizer metadata of a GGUF file whose tokenizer.ggml.model is "gpt2" (SmolLM2,
/// Llama 3, GPT-2 and others), as plain data. Throws bpe::tokenizer_error for another
/// tokenizer model and gguf_error for missing or mistyped metadata; each names the file.
inline bpe::vocabulary llama_vocabulary(const gguf_file& file) {
  const std::string_view model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    throw bpe::tokenizer_error("luminal: " + file.path() + ": tokenizer.ggml.model is '" + std::string(model) +
                               "'; luminal reads byte-level BPE ('gpt2') tokenizers only");
  bpe::vocabulary v;
  for (std::string_view t : file.get_string_array("tokenizer.ggml.tokens")) v.tokens.emplace_back(t);
  for (std::string_view m : file.get_string_array("tokenizer.ggml.merges")) v.merges.emplace_back(m);
  if (file.contains("tokenizer.ggml.token_type")) v.token_types = file.get_i32_array("tokenizer.ggml.token_type");
  if (file.contains("tokenizer.ggml.pre")) v.pre = std::string(file.get_string("tokenizer.ggml.pre"));
  if (file.contains("tokenizer.ggml.bos_token_id")) v.bos_id = file.get_i32("tokenizer.ggml.bos_token_id");
  if (file.contains("tokenizer.ggml.eos_token_id")) v.eos_id = file.get_i32("tokenizer.ggml.eos_token_id");
  return v;
}

/// The byte-level BPE of a GGUF file (llama_vocabulary); also throws bpe::tokenizer_error
/// for a vocabulary that is not one (tokens and types of different counts, bad merges).
inline bpe::tokenizer llama_tokenizer(const gguf_file& file) { return bpe::tokenizer(llama_vocabulary(file)); }

/// One message of a conversation: a role ("system", "user", "assistant") and its text.
struct chat_message {
  std::string role, content;
};

/// ChatML, the conversation format of SmolLM2 and many others, read from the file's
/// tokenizer.chat_template: `<|im_start|>role\ncontent<|im_end|>\n` per message, then
/// `<|im_start|>assistant\n` for the reply. A system message the template puts first when
/// the conversation has none is kept and added the same way.
struct chat_template {
  std::string default_system;  // empty: none

  /// Throws bpe::tokenizer_error when the file has no chat template or one that is not ChatML.
  static chat_template from_gguf(const gguf_file& file) {
    const gguf_value* value = file.find("tokenizer.chat_template");
    if (!value) throw bpe::tokenizer_error("luminal: " + file.path() + " has no chat template (tokenizer.chat_template)");
    const std::string_view text = value->as_string();
    if (text.find("<|im_start|>") == std::string_view::npos)
      throw bpe::tokenizer_error("luminal: " + file.path() + ": its chat template is not ChatML (<|im_start|> ... <|im_end|>), "
                        "the one format luminal reads");
    chat_template t;
    constexpr std::string_view start = "<|im_start|>system\n";
    if (auto at = text.find(start); at != std::string_view::npos) {
      auto from = at + start.size(), end = text.find("<|im_end|>", from);
      if (end != std::string_view::npos && text.substr(from, end - from).find("{{") == std::string_view::npos)
        t.default_system = std::string(text.substr(from, end - from));
    }
    return t;
  }

  /// The prompt for these messages, ending where the assistant's reply begins.
  std::string format(const std::vector<chat_message>& messages) const {
    std::string out;
    if (!default_system.empty() && (messages.empty() || messages.front().role != "system"))
      out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
    for (const chat_message& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    return out + "<|im_start|>assistant\n";
  }
};

}  // namespace luminal::nn
