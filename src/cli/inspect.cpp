// herd inspect --model M [--tensors]: what a GGUF file holds, without loading the model.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "gguf/reader.h"

namespace herd::cli {
namespace {

std::string show_value(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::STRING: {
      std::string s(v.str.substr(0, 120));
      for (char& c : s) {
        if (c == '\n') c = ' ';
      }
      return "\"" + s +
             (v.str.size() > 120 ? "...\" (" + std::to_string(v.str.size()) + " bytes)" : "\"");
    }
    case ValueType::ARRAY:
      return "[" + std::string(gguf::value_type_name(v.elem_type)) + " x " +
             std::to_string(v.count) + "]";
    case ValueType::F32:
    case ValueType::F64:
      return std::to_string(v.f);
    case ValueType::BOOL:
      return v.u ? "true" : "false";
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64:
      return std::to_string(v.i);
    default:
      return std::to_string(v.u);
  }
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Show a GGUF file's metadata and tensors");
  auto model = std::make_shared<std::string>();
  auto tensors = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", *model, "GGUF file")->required();
  cmd->add_flag("--tensors", *tensors, "List every tensor");
  cmd->callback([model, tensors] {
    gguf::File file = gguf::File::open(*model);
    std::printf("GGUF v%u, %zu metadata entries, %zu tensors, data at %zu\n", file.version(),
                file.metadata().size(), file.tensors().size(), file.data_offset());
    for (const auto& [key, value] : file.metadata()) {
      std::printf("  %-40.*s %s\n", static_cast<int>(key.size()), key.data(),
                  show_value(value).c_str());
    }
    uint64_t total = 0;
    for (const gguf::TensorInfo& t : file.tensors()) total += t.n_bytes;
    std::printf("tensor data: %.2f MiB\n", static_cast<double>(total) / (1 << 20));
    if (!*tensors) return;
    for (const gguf::TensorInfo& t : file.tensors()) {
      std::string shape;
      for (int64_t d : t.shape) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
      std::printf("  %-40.*s %-6s [%s] %zu bytes\n", static_cast<int>(t.name.size()), t.name.data(),
                  std::string(type_traits(t.type).name).c_str(), shape.c_str(), t.n_bytes);
    }
  });
}

}  // namespace herd::cli
