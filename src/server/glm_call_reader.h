// GlmCallReader: the tool calls of GLM-4.5, 4.6, 4.7 and GLM-5, one in each
// <tool_call>...</tool_call> block, read while they stream into calls whose arguments are
// JSON:
//
//   <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>
//   <arg_key>days</arg_key><arg_value>3</arg_value></tool_call>
//
// becomes get_weather {"city":"Paris","days":3}, each value typed by the tool's schema
// (argument_types.h). GLM-4.7 and GLM-5 write the pairs back to back; GLM-4.5 and 4.6 put a
// newline after the name and after each tag, which is read alike. The reader is fed what lies
// between the block's markers (OutputParser finds those); the name is complete at the first
// <arg_key>, a newline after it, or the block's end, and must be plausible_name(): a block
// that mentions the marker in prose is text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/argument_types.h"
#include "server/parser_text.h"

namespace herd::server {

constexpr std::string_view kGlmArgKey = "<arg_key>";

class GlmCallReader {
 public:
  // types: the request's parameter types (may be null: every value typed as undescribed).
  explicit GlmCallReader(std::shared_ptr<const ParameterTypes> types = nullptr)
      : types_(std::move(types)) {}
  // at_end: nothing follows (the block's end): everything held is read.
  void feed(std::string_view text, bool at_end);
  std::vector<ReadCall>& calls() { return calls_; }
  // The name being written when the text stops inside it.
  std::string partial_name() const;

 private:
  enum class State { kName, kParameters, kKey, kBeforeValue, kValue, kDone };
  bool start_call(std::string_view name);  // false: not a name, the block is text
  void close();

  std::shared_ptr<const ParameterTypes> types_;
  State state_ = State::kName;
  std::string buffer_;
  std::string key_;  // the key whose value comes next
  std::vector<ReadCall> calls_;
  TypedArguments arguments_{false};
};

}  // namespace herd::server
