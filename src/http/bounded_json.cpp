#include "http/bounded_json.h"

namespace herd::http {
namespace {

// A SAX handler that keeps only the depth: it stops the parse (returns false) at the first
// level past the limit, so nothing deeper is even read.
class DepthCheck {
 public:
  using json = nlohmann::json;
  explicit DepthCheck(int max_depth) : max_depth_(max_depth) {}

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return enter(); }
  bool key(json::string_t&) { return true; }
  bool end_object() { return leave(); }
  bool start_array(std::size_t) { return enter(); }
  bool end_array() { return leave(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = "the JSON is not valid at byte " + std::to_string(position) + ": " + e.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > max_depth_) too_deep_ = true;
    return !too_deep_;
  }
  bool leave() {
    --depth_;
    return true;
  }

  int max_depth_;
  int depth_ = 0;
  bool too_deep_ = false;
  std::string error_;
};

}  // namespace

std::string json_problem(std::string_view text, int max_depth) {
  DepthCheck check(max_depth);
  const bool ok = nlohmann::json::sax_parse(text, &check, nlohmann::json::input_format_t::json,
                                            /*strict=*/true, /*ignore_comments=*/false);
  if (check.too_deep()) {
    return "the JSON nests deeper than " + std::to_string(max_depth) + " levels";
  }
  if (!check.error().empty()) return check.error();
  if (!ok) return "the JSON is not valid";
  return "";
}

}  // namespace herd::http
