// herd tokenize --model M --text T [--no-bos] [--no-parse-special] [--pieces]: the token
// ids of a text under a model's tokenizer, separated by single spaces, on one line.
//   default             adds the model's special tokens (BOS/EOS per the file) and reads
//                       special-token text such as "<|im_start|>" as those tokens;
//   --no-bos            adds no special tokens at all;
//   --no-parse-special  reads special-token text as plain text (with --no-bos: the
//                       convention of the tokenizer test vectors);
//   --pieces            also prints one line per token: its id and its vocabulary text.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/store_options.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace herd::cli {
namespace {

// Vocabulary texts may hold control characters; show them escaped, one token per line.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (b < 0x20 || b == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", b);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Print the token ids of a text");
  struct Options {
    std::string model;
    std::string text;
    bool no_bos = false;
    bool no_parse_special = false;
    bool pieces = false;
  };
  auto opt = std::make_shared<Options>();
  cmd->add_option("-m,--model", opt->model, "GGUF file holding the tokenizer")->required();
  cmd->add_option("-t,--text", opt->text, "Text to tokenize")->required();
  cmd->add_flag("--no-bos", opt->no_bos, "Add no special tokens (BOS/EOS, [CLS]/[SEP])");
  cmd->add_flag("--no-parse-special", opt->no_parse_special,
                "Read special-token text such as <|im_start|> as plain text");
  cmd->add_flag("--pieces", opt->pieces, "Also print each token's id and text, one per line");
  cmd->callback([opt] {
    const auto tokenizer =
        tokenizer::Tokenizer::from_gguf(gguf::File::open(resolve_model_arg(opt->model)));
    const std::vector<int32_t> ids = tokenizer.encode(opt->text, /*add_special=*/!opt->no_bos,
                                                      /*parse_special=*/!opt->no_parse_special);
    std::string line;
    for (int32_t id : ids) {
      if (!line.empty()) line += ' ';
      line += std::to_string(id);
    }
    std::printf("%s\n", line.c_str());
    if (opt->pieces) {
      for (int32_t id : ids) {
        std::printf("%d\t%s\n", id, printable(tokenizer.token_text(id)).c_str());
      }
    }
  });
}

}  // namespace herd::cli
