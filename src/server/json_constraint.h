// JsonConstraint: a pushdown automaton that follows a reply byte by byte and says whether
// it can still grow into a reply of a JsonGrammar (a start prefix, then one JSON value that
// matches its schema). The token filter asks it, token by token, which continuations keep
// the reply valid (json_token_filter.h).
//
// Its state is a set of stacks of frames, one stack per way the text so far can still be
// read: anyOf alternatives and several forced-call names fork a stack at the first
// character that fits more than one of them, and a stack that refuses a character is
// dropped. An empty stack is a finished reply.
//
// What it allows beyond the schema, on purpose bounded so that a model cannot run on:
//   - white space only between tokens of the JSON, at most kMaxWhitespace bytes in a row;
//     none after the value (the reply ends there);
//   - numbers of at most kMaxNumberChars characters;
//   - containers nested at most kMaxNesting deep (a hostile recursive schema cannot grow
//     the stacks without bound);
//   - at most kMaxStacks readings at once (later alternatives are dropped beyond that).
// Strings must be valid UTF-8, with valid escapes and paired \u surrogates, so the reply
// always parses (nlohmann's parser refuses a lone surrogate).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "server/json_schema.h"

namespace herd::server {

class JsonConstraint {
 public:
  static constexpr int kMaxWhitespace = 8;  // a newline and three levels of 2-space indent
  static constexpr uint32_t kMaxNumberChars = 32;
  static constexpr size_t kMaxNesting = 32;
  static constexpr size_t kMaxStacks = 64;

  // At the start of a reply: before any start's prefix. REQUIRES: grammar outlives this
  // constraint and has at least one start.
  explicit JsonConstraint(const JsonGrammar& grammar);
  // Copies are cheap (the frames of a few short stacks, without reallocating into a copy
  // that already has room): the token filter copies one per byte it tries.
  JsonConstraint(const JsonConstraint& other);
  JsonConstraint& operator=(const JsonConstraint& other);

  // Adds one byte; false when the text can no longer become a reply (the constraint is then
  // dead and refuses everything).
  bool push(unsigned char c);
  bool push(std::string_view text);

  bool dead() const { return ends_.empty(); }
  // The reply is whole and nothing may follow it.
  bool complete() const;
  // The reply is whole as it stands (it may still grow: a number at the root).
  bool can_end() const;

  // The deepest frame stack (for tests of the nesting limit).
  size_t max_depth() const;

 private:
  enum class Kind : uint8_t { kText, kValue, kObject, kKey, kArray, kString, kNumber, kLiteral };
  enum class Scan : uint8_t { kRefused, kInside, kClosed };
  // Where a string is between bytes.
  struct StringScan {
    uint8_t escape = 0;     // 1: after a backslash
    uint8_t hex_left = 0;   // hex digits still due in a \u escape
    uint16_t code = 0;      // the \u escape's value so far
    bool need_low = false;  // a high surrogate was written: a \u low surrogate must follow
    uint8_t utf8_left = 0;  // continuation bytes still due
    uint8_t next_lo = 0x80, next_hi = 0xBF;  // the range of the next continuation byte
  };
  struct Frame {
    Kind kind = Kind::kValue;
    uint8_t phase = 0;
    uint8_t ws = 0;  // white space bytes in the current run
    StringScan scan;
    int32_t node = -1;                 // schema node (kText: index of the start)
    int32_t child = -1;                // kObject: the node of the value after the key just read
    uint32_t lo = 0, hi = 0, pos = 0;  // candidates [lo, hi) of sorted texts; bytes matched
    uint64_t seen = 0;                 // kObject: properties written; kArray: elements
  };
  using Stack = std::vector<Frame>;

  static Scan scan(StringScan& s, unsigned char c);
  void feed(Stack& stack, unsigned char c, size_t fork_depth);
  bool start_value(Stack& stack, unsigned char c);
  void feed_key(Stack& stack, unsigned char c);
  void emit(const Stack& stack);
  bool keys_left(const SchemaNode& n, uint64_t seen) const;

  const JsonGrammar* grammar_;
  // The stacks, flat: stack i is frames_[ends_[i - 1], ends_[i]).
  std::vector<Frame> frames_;
  std::vector<uint32_t> ends_;
  // Scratch, not part of the state (not copied).
  std::vector<Frame> next_frames_;
  std::vector<uint32_t> next_ends_;
  std::vector<Stack> forks_;  // one working stack per fork depth
};

}  // namespace herd::server
