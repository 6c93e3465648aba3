// The pod's side of loads (`herd serve --models-dir DIR --hub URL`; the hub's side is
// demand.h): which models the pod could serve instead of its own, and who may ask it to.
//
// A model's name is its GGUF file's stem (DIR/qwen3-8b-q4_0.gguf is "qwen3-8b-q4_0"), checked
// as the registration checks model names; the pod lists the names in its registration's
// "loadable". Only the hub it registered with may ask (POST /api/load): the hub's answer to
// each registration carries a control token, and the request must show it.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace herd::hub {

struct ModelDir {
  std::map<std::string, std::string> models;  // name -> path, at most kMaxLoadable
  std::vector<std::string> skipped;           // why some files were left out

  std::vector<std::string> names() const;
};

inline constexpr size_t kMaxLoadable = 64;

// The *.gguf files of `dir` (not its subdirectories), by name (a split model's first file,
// named without its -00001-of-0000N); the first kMaxLoadable names in order. Throws
// herd::Error("hub", ...) when `dir` is not a readable directory.
ModelDir list_model_dir(const std::string& dir);

// Whether an Authorization header shows `token`: 0 when it does ("Bearer TOKEN", compared in
// constant time), 401 without a bearer token, 403 for another token or when `token` is empty
// (the pod is not registered yet).
int check_control_token(std::string_view authorization, std::string_view token);

}  // namespace herd::hub
