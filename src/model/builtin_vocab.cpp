#include "model/builtin_vocab.h"

#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace herd {
namespace {

// Training text for the merges: plain English about the project, so that common words
// become single tokens and generated text from a random model at least looks like words.
constexpr std::string_view kTrainingText =
    "The herd runs large language models on ordinary computers. A model that is too big for "
    "one machine is split across several machines, and each machine holds a part of the "
    "layers. The first machine turns the prompt into tokens, runs the first layers and sends "
    "the activations to the next machine, which runs its layers and passes them on. The last "
    "machine computes the logits, and the sampler picks the next token. Then the new token "
    "goes through the whole pipeline again. When there are many users, their requests are "
    "batched together, so that the weights are read once for all of them. The weights are "
    "stored in a file with a header, metadata and tensors. Each tensor has a name, a shape "
    "and a type; quantized types store blocks of numbers with a scale. The tokenizer splits "
    "text into pieces, and the chat template turns a conversation of messages into the text "
    "that the model was trained on. Hello! How are you today? I am fine, thank you. What is "
    "the weather like in the city? It is sunny and warm, with a light wind from the west. "
    "Please write a short story about a cat and a dog who become friends. Once upon a time, "
    "there was a little cat who lived in a house by the river. Every morning she would sit "
    "in the window and watch the birds. One day a dog came to the door, and he was hungry and "
    "tired. The cat shared her food with him, and from that day they were the best of friends. "
    "The answer is 42. Numbers like 2026, 3.14 and 100 appear in text, and so does code: "
    "for (int i = 0; i < n; ++i) { sum += x[i]; } return sum;";

// Splits text into pre-tokens the way a byte-level BPE pre-tokenizer would for ASCII text:
// an optional leading space with a run of letters, single digits, an optional leading space
// with a run of punctuation, or a run of whitespace.
std::vector<std::string> pre_tokens(std::string_view text) {
  auto is_alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\t'; };
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && !is_space(text[i + 1]) && !is_digit(text[i + 1])) {
      ++i;  // the space joins the word or punctuation run that follows
    }
    char c = text[i];
    if (is_alpha(c)) {
      while (i < text.size() && is_alpha(text[i])) ++i;
    } else if (is_digit(c)) {
      ++i;
    } else if (is_space(c)) {
      while (i < text.size() && is_space(text[i])) ++i;
    } else {
      while (i < text.size() && !is_alpha(text[i]) && !is_digit(text[i]) && !is_space(text[i])) ++i;
    }
    out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

// Learns up to max_merges BPE merges over the pre-tokens (most frequent pair first, ties
// broken by the pair's text so that the result is deterministic). Returns symbol pairs.
std::vector<std::pair<std::string, std::string>> learn_merges(std::string_view text,
                                                              size_t max_merges) {
  std::map<std::string, int> word_counts;
  for (const std::string& w : pre_tokens(text)) ++word_counts[w];
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [w, count] : word_counts) {
    std::vector<std::string> symbols;
    for (unsigned char b : w) symbols.push_back(byte_to_symbol(b));
    words.emplace_back(std::move(symbols), count);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  while (merges.size() < max_merges) {
    std::map<std::pair<std::string, std::string>, int> pair_counts;
    for (const auto& [symbols, count] : words) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i)
        pair_counts[{symbols[i], symbols[i + 1]}] += count;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int best_count = 1;  // a pair seen once is not worth a token
    for (const auto& [pair, count] : pair_counts) {
      if (count > best_count) {
        best = &pair;
        best_count = count;
      }
    }
    if (best == nullptr) break;
    auto merged = *best;
    merges.push_back(merged);
    for (auto& [symbols, count] : words) {
      std::vector<std::string> next;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == merged.first &&
            symbols[i + 1] == merged.second) {
          next.push_back(merged.first + merged.second);
          ++i;
        } else {
          next.push_back(symbols[i]);
        }
      }
      symbols = std::move(next);
    }
  }
  return merges;
}

// ChatML, with tool definitions and tool calls in the Hermes/Qwen style and reasoning in
// <think> blocks, so that the serving code has every feature to exercise.
constexpr std::string_view kChatTemplate = R"TEMPLATE({%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}
{{- messages[0].content + '\n\n' }}
{%- endif %}
{{- '# Tools\n\nYou may call functions. Their signatures are inside <tools></tools>:\n<tools>' }}
{%- for tool in tools %}
{{- '\n' + (tool | tojson) }}
{%- endfor %}
{{- '\n</tools>\n\nTo call a function, answer with a JSON object inside <tool_call></tool_call>:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}
{%- if not loop.first %}
{{- raise_exception('System message must be the first message') }}
{%- endif %}
{%- elif message.role == 'user' %}
{{- '<|im_start|>user\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\n' }}
{%- if message.reasoning_content %}
{{- '<think>\n' + message.reasoning_content + '\n</think>\n\n' }}
{%- endif %}
{%- if message.content %}
{{- message.content }}
{%- endif %}
{%- for call in message.tool_calls or [] %}
{%- set fn = call.function if call.function is defined else call %}
{{- '\n<tool_call>\n{"name": "' + fn.name + '", "arguments": ' }}
{%- if fn.arguments is string %}
{{- fn.arguments }}
{%- else %}
{{- fn.arguments | tojson }}
{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}
{{- '<|im_start|>user' }}
{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- else %}
{{- raise_exception('Unknown role: ' + message.role) }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}
{{- '<think>\n\n</think>\n\n' }}
{%- endif %}
{%- endif %}
)TEMPLATE";

constexpr size_t kMaxMerges = 640;

}  // namespace

std::string byte_to_symbol(uint8_t b) {
  // Printable bytes stand for themselves; the others are shifted to U+0100 and up, in order.
  auto printable = [](int c) {
    return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
  };
  uint32_t cp = b;
  if (!printable(b)) {
    int n = 0;
    for (int c = 0; c < b; ++c) n += printable(c) ? 0 : 1;
    cp = 256 + static_cast<uint32_t>(n);
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

BuiltinVocab make_builtin_vocab() {
  BuiltinVocab v;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_to_symbol(static_cast<uint8_t>(b)));
    v.token_types.push_back(1);
  }
  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  for (const auto& [left, right] : learn_merges(kTrainingText, kMaxMerges)) {
    v.merges.push_back(left + " " + right);
    // Two different merges can spell the same token; it is listed once.
    if (known.insert(left + right).second) {
      v.tokens.push_back(left + right);
      v.token_types.push_back(1);
    }
  }
  auto add_special = [&v](const char* text, int32_t type) {
    v.tokens.emplace_back(text);
    v.token_types.push_back(type);
    return static_cast<int32_t>(v.tokens.size() - 1);
  };
  v.bos_id = add_special("<|endoftext|>", 3);
  add_special("<|im_start|>", 3);
  v.eos_id = add_special("<|im_end|>", 3);
  v.pad_id = v.bos_id;
  add_special("<think>", 4);
  add_special("</think>", 4);
  add_special("<tool_call>", 4);
  add_special("</tool_call>", 4);
  add_special("<tool_response>", 4);
  add_special("</tool_response>", 4);
  v.chat_template = std::string(kChatTemplate);
  return v;
}

}  // namespace herd
