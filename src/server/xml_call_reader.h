// XmlCallReader: the tool calls of Qwen3-Coder, Qwen3.5 and Qwen3.6, written as XML inside
// <tool_call>...</tool_call>, read while they stream into calls whose arguments are JSON:
//
//   <tool_call>
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   <parameter=days>
//   3
//   </parameter>
//   </function>
//   </tool_call>
//
// becomes get_weather {"city":"Paris","days":3}, each value typed by the tool's schema
// (argument_types.h); the newlines around a value are the format's, not the value's. The
// reader is fed what lies between <tool_call> and </tool_call> (OutputParser finds those);
// a call cut short by the block's end is closed there, so its arguments are still an object.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/argument_types.h"
#include "server/parser_text.h"

namespace herd::server {

constexpr std::string_view kXmlFunction = "<function=";

class XmlCallReader {
 public:
  // types: the request's parameter types (may be null: every value typed as undescribed).
  explicit XmlCallReader(std::shared_ptr<const ParameterTypes> types = nullptr)
      : types_(std::move(types)) {}
  // at_end: nothing follows (the block's end): everything held is read.
  void feed(std::string_view text, bool at_end);
  std::vector<ReadCall>& calls() { return calls_; }
  // The name being written when the text stops inside it.
  std::string partial_name() const;

 private:
  // kSkipName: what was opened as a name is none; it runs to its '>', which is dropped with it.
  enum class State { kBefore, kName, kSkipName, kParameters, kKey, kValue };

  std::shared_ptr<const ParameterTypes> types_;
  State state_ = State::kBefore;
  std::string buffer_;
  std::vector<ReadCall> calls_;
  TypedArguments arguments_{true};
};

}  // namespace herd::server
