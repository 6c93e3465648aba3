// A Hugging Face model repository as herd pulls from it: a model's name
// ("org/repo[:QUANT]"), the repository's file listing (the hub's tree API), and which GGUF
// file(s) of it a name means. Pure: no I/O; the listing arrives as text.
//
// The listing is what `GET {endpoint}/api/models/{org}/{repo}/tree/main?recursive=true`
// answers: a JSON array of {"type": "file"|"directory", "path", "size", "lfs": {"oid":
// SHA-256 hex, "size"}}. Pages beyond the first are named by a `Link: <url>; rel="next"`
// header (next_page_url).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace herd::store {

// "org/repo" or "org/repo:QUANT" (a leading "hf.co/" or "huggingface.co/" is dropped).
struct ModelName {
  std::string org;
  std::string repo;
  std::string quant;  // as the user wrote it; empty: the default pick
  std::string repo_id() const { return org + "/" + repo; }
  std::string str() const { return repo_id() + (quant.empty() ? "" : ":" + quant); }
};

// The name, or nullopt when `text` is not of that form (org: letters, digits, '-', '_';
// repo: those and '.'; neither starting with '.' or '-', at most 96 bytes; a quant:
// letters, digits, '_', '-', '.'). A string ending in ".gguf" is never a name: it is a
// file path.
std::optional<ModelName> parse_model_name(std::string_view text);

// One file of the repository. `path` is relative, checked: no "..", no empty or absolute
// component, no backslash or control byte.
struct RepoFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // 64 lowercase hex digits (LFS files); empty: the hub gives none
};

// The listing's files (directories skipped). Throws herd::Error "[store] ..." on anything
// but the documented shape, on a path that could escape the store, or past 100000 entries.
std::vector<RepoFile> parse_listing(std::string_view json);

// The "next" URL of an RFC 8288 Link header, or "" when it has none.
std::string next_page_url(std::string_view link_header);

// One model in a repository: a single GGUF file, or all parts of a split one
// ("...-00001-of-00003.gguf" .. "-00003-of-00003.gguf"), in part order.
struct ModelFiles {
  std::vector<RepoFile> files;
  std::string quant;  // the quant tag found in the name ("Q4_K_M", "UD-Q4_K_XL"); may be empty
  uint64_t total_size() const;
  const std::string& first_path() const { return files.front().path; }
};

// The GGUF models among `files`: split parts grouped (a split set missing a part is left
// out), projector files ("mmproj") included and marked by is_projector.
std::vector<ModelFiles> gguf_models(const std::vector<RepoFile>& files);
bool is_projector(const ModelFiles& model);

// The quant tag in a GGUF file name ("Qwen3-8B-Q4_K_M.gguf" -> "Q4_K_M"), upper case, or ""
// when no token of the name looks like one.
std::string quant_of(std::string_view path);

// The model `name.quant` names among `files` (case-insensitive): the one whose tag
// (quant_of) equals it, else the one whose path holds it between separators ("q4_k" names
// "Model-Q4_K.gguf", not "Model-Q4_K_M.gguf"). Without a quant: the Q4_K_M model, else the
// only model. Projectors ("mmproj") are picked only by a quant that says "mmproj". Throws
// herd::Error "[store] ..." naming the repository and listing the choices when none or several
// match.
ModelFiles pick_model(const std::vector<RepoFile>& files, const ModelName& name);

// "Q4_K_M (4.7 GiB), Q8_0 (8.1 GiB)": the choices, for error messages and `herd pull`.
std::string describe_choices(const std::vector<ModelFiles>& models);
std::string format_size(uint64_t bytes);

}  // namespace herd::store
