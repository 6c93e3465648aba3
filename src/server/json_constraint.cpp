#include "server/json_constraint.h"

#include <algorithm>

namespace herd::server {
namespace {

// Phases of kObject.
constexpr uint8_t kObjectStart = 0;  // after '{': a key or '}'
constexpr uint8_t kObjectKey = 1;    // after ',': a key
constexpr uint8_t kObjectColon = 2;  // after a key: ':'
constexpr uint8_t kObjectComma = 3;  // after a value: ',' or '}'
// Phases of kArray.
constexpr uint8_t kArrayStart = 0;  // after '[': an element or ']'
constexpr uint8_t kArrayComma = 1;  // after an element: ',' or ']'
constexpr uint8_t kArrayNext = 2;   // after ',': an element
// Phases of kNumber, as JSON's grammar reads a number.
constexpr uint8_t kNumberSign = 0;      // "-"
constexpr uint8_t kNumberZero = 1;      // "0" (no more integer digits)
constexpr uint8_t kNumberInteger = 2;   // "12"
constexpr uint8_t kNumberDot = 3;       // "1."
constexpr uint8_t kNumberFraction = 4;  // "1.5"
constexpr uint8_t kNumberE = 5;         // "1e"
constexpr uint8_t kNumberESign = 6;     // "1e-"
constexpr uint8_t kNumberExponent = 7;  // "1e5"
// kKey's phase: 1 while the key may still be a key outside `properties`.
constexpr uint8_t kKeyFree = 1;

bool is_space(unsigned char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
bool is_digit(unsigned char c) {
  return c >= '0' && c <= '9';
}
int hex_value(unsigned char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
// Working stacks: one for the stack being fed, one per anyOf/$ref hop at one character
// (JsonGrammar allows chains of 16), and a few for the containers a character can close
// and open at once. Sized up front: a working stack must not move while it is fed.
constexpr size_t kMaxForks = 24;

bool number_may_end(uint8_t phase) {
  return phase == kNumberZero || phase == kNumberInteger || phase == kNumberFraction ||
         phase == kNumberExponent;
}

// Narrows the candidates [lo, hi) of sorted `texts`, which all share their first `pos`
// bytes, to those whose next byte is c (a contiguous run, the texts being sorted).
template <class Text>
void narrow(const std::vector<Text>& texts, const std::string& (*text_of)(const Text&),
            uint32_t& lo, uint32_t& hi, uint32_t pos, unsigned char c) {
  uint32_t first = hi, last = hi;
  for (uint32_t i = lo; i < hi; ++i) {
    const std::string& t = text_of(texts[i]);
    const bool match = t.size() > pos && static_cast<unsigned char>(t[pos]) == c;
    if (match && first == hi) first = i;
    if (match) last = i + 1;
  }
  lo = first;
  hi = first == hi ? first : last;
}
const std::string& literal_text(const std::string& s) {
  return s;
}
const std::string& key_text(const SchemaNode::Property& p) {
  return p.key;
}

}  // namespace

JsonConstraint::JsonConstraint(const JsonGrammar& grammar) : grammar_(&grammar), forks_(kMaxForks) {
  const auto& starts = grammar.starts();
  for (size_t i = 0; i < starts.size(); ++i) {
    Frame value;
    value.kind = Kind::kValue;
    value.node = starts[i].node;
    frames_.push_back(value);
    if (!starts[i].prefix.empty()) {
      Frame text;
      text.kind = Kind::kText;
      text.node = static_cast<int32_t>(i);
      frames_.push_back(text);
    }
    ends_.push_back(static_cast<uint32_t>(frames_.size()));
  }
}

JsonConstraint::JsonConstraint(const JsonConstraint& other)
    : grammar_(other.grammar_), frames_(other.frames_), ends_(other.ends_) {}

JsonConstraint& JsonConstraint::operator=(const JsonConstraint& other) {
  grammar_ = other.grammar_;
  frames_.assign(other.frames_.begin(), other.frames_.end());
  ends_.assign(other.ends_.begin(), other.ends_.end());
  return *this;
}

bool JsonConstraint::push(std::string_view text) {
  for (char c : text) {
    if (!push(static_cast<unsigned char>(c))) return false;
  }
  return !dead();
}

bool JsonConstraint::push(unsigned char c) {
  next_frames_.clear();
  next_ends_.clear();
  if (forks_.size() < kMaxForks) forks_.resize(kMaxForks);
  uint32_t begin = 0;
  for (uint32_t end : ends_) {
    Stack& work = forks_[0];
    work.assign(frames_.begin() + begin, frames_.begin() + end);
    begin = end;
    feed(work, c, 0);
  }
  frames_.swap(next_frames_);
  ends_.swap(next_ends_);
  return !dead();
}

bool JsonConstraint::complete() const {
  if (dead()) return false;
  uint32_t begin = 0;
  for (uint32_t end : ends_) {
    if (end != begin) return false;
    begin = end;
  }
  return true;
}

bool JsonConstraint::can_end() const {
  uint32_t begin = 0;
  for (uint32_t end : ends_) {
    if (end == begin) return true;
    // A root scalar that may still grow (a number, or a literal with a longer one beside it)
    // is whole as it stands.
    if (end == begin + 1) {
      const Frame& f = frames_[begin];
      if (f.kind == Kind::kNumber && number_may_end(f.phase)) return true;
      if (f.kind == Kind::kLiteral) {
        const auto& literals = grammar_->node(f.node).literals;
        for (uint32_t i = f.lo; i < f.hi; ++i) {
          if (literals[i].size() == f.pos) return true;
        }
      }
    }
    begin = end;
  }
  return false;
}

size_t JsonConstraint::max_depth() const {
  size_t deepest = 0;
  uint32_t begin = 0;
  for (uint32_t end : ends_) {
    deepest = std::max<size_t>(deepest, end - begin);
    begin = end;
  }
  return deepest;
}

void JsonConstraint::emit(const Stack& stack) {
  if (next_ends_.size() >= kMaxStacks) return;
  next_frames_.insert(next_frames_.end(), stack.begin(), stack.end());
  next_ends_.push_back(static_cast<uint32_t>(next_frames_.size()));
}

bool JsonConstraint::keys_left(const SchemaNode& n, uint64_t seen) const {
  if (n.additional >= 0) return true;
  const uint64_t all =
      n.properties.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << n.properties.size()) - 1;
  return (seen & all) != all;
}

JsonConstraint::Scan JsonConstraint::scan(StringScan& s, unsigned char c) {
  if (s.utf8_left > 0) {
    if (c < s.next_lo || c > s.next_hi) return Scan::kRefused;
    --s.utf8_left;
    s.next_lo = 0x80;
    s.next_hi = 0xBF;
    return Scan::kInside;
  }
  if (s.hex_left > 0) {
    const int v = hex_value(c);
    if (v < 0) return Scan::kRefused;
    s.code = static_cast<uint16_t>(s.code * 16 + v);
    --s.hex_left;
    // Surrogates are checked as soon as their leading digits show: a low surrogate
    // (DC00-DFFF) only right after a high one (D800-DBFF), and one must follow a high one.
    if (s.hex_left == 2) {
      const bool low = s.code >= 0xDC && s.code <= 0xDF;
      if (low != s.need_low) return Scan::kRefused;
    } else if (s.hex_left == 3 && s.need_low && s.code != 0xD) {
      return Scan::kRefused;
    } else if (s.hex_left == 0) {
      s.need_low = !s.need_low && s.code >= 0xD800 && s.code <= 0xDBFF;
    }
    return Scan::kInside;
  }
  if (s.escape) {
    s.escape = 0;
    if (c == 'u') {
      s.hex_left = 4;
      s.code = 0;
      return Scan::kInside;
    }
    if (s.need_low) return Scan::kRefused;
    switch (c) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        return Scan::kInside;
      default:
        return Scan::kRefused;
    }
  }
  if (c == '\\') {
    s.escape = 1;
    return Scan::kInside;
  }
  if (s.need_low) return Scan::kRefused;
  if (c == '"') return Scan::kClosed;
  if (c < 0x20) return Scan::kRefused;  // control characters must be escaped
  if (c < 0x80) return Scan::kInside;
  // A UTF-8 lead byte, and the range its first continuation byte must fall in (no overlong
  // forms, no surrogates, nothing above U+10FFFF).
  s.next_lo = 0x80;
  s.next_hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    s.utf8_left = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    s.utf8_left = 2;
    if (c == 0xE0) s.next_lo = 0xA0;
    if (c == 0xED) s.next_hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    s.utf8_left = 3;
    if (c == 0xF0) s.next_lo = 0x90;
    if (c == 0xF4) s.next_hi = 0x8F;
  } else {
    return Scan::kRefused;
  }
  return Scan::kInside;
}

// Replaces the kValue frame on top with the frame of the value that c begins.
bool JsonConstraint::start_value(Stack& stack, unsigned char c) {
  Frame& f = stack.back();
  const SchemaNode& n = grammar_->node(f.node);
  const int32_t id = f.node;
  if (n.enumerated || c == 't' || c == 'f' || c == 'n') {
    Frame literal;
    literal.kind = Kind::kLiteral;
    literal.node = id;
    literal.hi = static_cast<uint32_t>(n.literals.size());
    narrow(n.literals, literal_text, literal.lo, literal.hi, 0, c);
    if (literal.lo == literal.hi) return false;
    literal.pos = 1;
    f = literal;
    if (f.hi - f.lo == 1 && n.literals[f.lo].size() == 1) stack.pop_back();
    return true;
  }
  Frame next;
  next.node = id;
  if (c == '{' || c == '[') {
    if (!(n.types & (c == '{' ? kTypeObject : kTypeArray))) return false;
    if (stack.size() > kMaxNesting) return false;
    next.kind = c == '{' ? Kind::kObject : Kind::kArray;
    next.phase = c == '{' ? kObjectStart : kArrayStart;
  } else if (c == '"') {
    if (!(n.types & kTypeString)) return false;
    next.kind = Kind::kString;
  } else if (c == '-' || is_digit(c)) {
    if (!(n.types & (kTypeNumber | kTypeInteger))) return false;
    next.kind = Kind::kNumber;
    next.lo = (n.types & kTypeNumber) ? 0 : 1;  // 1: integers only
    next.phase = c == '-' ? kNumberSign : c == '0' ? kNumberZero : kNumberInteger;
    next.pos = 1;
  } else {
    return false;
  }
  f = next;
  return true;
}

void JsonConstraint::feed_key(Stack& stack, unsigned char c) {
  Frame& key = stack.back();
  Frame& object = stack[stack.size() - 2];
  const SchemaNode& n = grammar_->node(key.node);
  narrow(n.properties, key_text, key.lo, key.hi, key.pos, c);
  ++key.pos;
  const Scan free_scan = key.phase == kKeyFree ? scan(key.scan, c) : Scan::kRefused;
  if (free_scan == Scan::kRefused) key.phase = 0;
  // A property's key ends here (its closing quote): every candidate shares the bytes so
  // far, so at most one ends.
  for (uint32_t i = key.lo; i < key.hi; ++i) {
    if (n.properties[i].key.size() != key.pos) continue;
    const uint64_t bit = uint64_t{1} << i;
    if (object.seen & bit) return;  // a key written twice
    object.seen |= bit;
    object.child = n.properties[i].node;
    stack.pop_back();
    return emit(stack);
  }
  if (free_scan == Scan::kClosed) {  // a key outside `properties`
    object.child = n.additional;
    stack.pop_back();
    return emit(stack);
  }
  bool unseen = false;
  for (uint32_t i = key.lo; i < key.hi && !unseen; ++i) {
    unseen = !(object.seen & (uint64_t{1} << i));
  }
  if (key.phase == kKeyFree || unseen) emit(stack);
}

// Feeds c to `stack` (a working copy it changes) and emits every stack that results.
void JsonConstraint::feed(Stack& stack, unsigned char c, size_t fork_depth) {
  const bool space = is_space(c);
  for (;;) {
    if (stack.empty()) return;  // the value is whole: nothing may follow it
    Frame& f = stack.back();
    auto take_space = [&] {
      if (f.ws >= kMaxWhitespace) return;
      ++f.ws;
      emit(stack);
    };
    switch (f.kind) {
      case Kind::kText: {
        const std::string& prefix = grammar_->starts()[static_cast<size_t>(f.node)].prefix;
        if (static_cast<unsigned char>(prefix[f.pos]) != c) return;
        if (++f.pos == prefix.size()) stack.pop_back();
        return emit(stack);
      }
      case Kind::kValue: {
        if (space) return take_space();
        const SchemaNode& n = grammar_->node(f.node);
        if (!n.alternatives.empty()) {
          // The alternatives that can begin with c each go on as a stack of their own.
          if (fork_depth + 1 >= forks_.size()) return;  // deeper than any schema compiles to
          for (int32_t alternative : n.alternatives) {
            Stack& fork = forks_[fork_depth + 1];
            fork.assign(stack.begin(), stack.end());
            fork.back().node = alternative;
            feed(fork, c, fork_depth + 1);
          }
          return;
        }
        if (start_value(stack, c)) emit(stack);
        return;
      }
      case Kind::kObject: {
        if (space) return take_space();
        const SchemaNode& n = grammar_->node(f.node);
        const bool all_required = (n.required & ~f.seen) == 0;
        if (f.phase == kObjectColon) {
          if (c != ':') return;
          f.phase = kObjectComma;
          f.ws = 0;
          Frame value;
          value.node = f.child;
          stack.push_back(value);
          return emit(stack);
        }
        if (c == '}' && f.phase != kObjectKey && all_required) {
          stack.pop_back();
          return emit(stack);
        }
        if (f.phase == kObjectComma) {
          if (c != ',' || !keys_left(n, f.seen)) return;
          f.phase = kObjectKey;
          f.ws = 0;
          return emit(stack);
        }
        if (c != '"' || !keys_left(n, f.seen)) return;  // kObjectStart or kObjectKey
        f.phase = kObjectColon;
        f.ws = 0;
        Frame key;
        key.kind = Kind::kKey;
        key.node = f.node;
        key.hi = static_cast<uint32_t>(n.properties.size());
        key.pos = 1;  // the opening quote
        key.phase = n.additional >= 0 ? kKeyFree : 0;
        stack.push_back(key);
        return emit(stack);
      }
      case Kind::kKey:
        return feed_key(stack, c);
      case Kind::kArray: {
        if (space) return take_space();
        const SchemaNode& n = grammar_->node(f.node);
        if (f.phase == kArrayComma) {
          if (c == ',' && (n.max_items < 0 || static_cast<int64_t>(f.seen) < n.max_items)) {
            f.phase = kArrayNext;
            f.ws = 0;
            return emit(stack);
          }
          if (c == ']' && static_cast<int64_t>(f.seen) >= n.min_items) {
            stack.pop_back();
            return emit(stack);
          }
          return;
        }
        if (c == ']' && f.phase == kArrayStart && n.min_items == 0) {
          stack.pop_back();
          return emit(stack);
        }
        if (n.max_items >= 0 && static_cast<int64_t>(f.seen) >= n.max_items) return;
        ++f.seen;
        f.phase = kArrayComma;
        f.ws = 0;
        Frame element;
        element.node = n.items;
        stack.push_back(element);
        continue;  // c begins the element
      }
      case Kind::kString: {
        const Scan s = scan(f.scan, c);
        if (s == Scan::kRefused) return;
        if (s == Scan::kClosed) stack.pop_back();
        return emit(stack);
      }
      case Kind::kNumber: {
        const bool integer = f.lo == 1;
        int next = -1;
        switch (f.phase) {
          case kNumberSign:
            if (is_digit(c)) next = c == '0' ? kNumberZero : kNumberInteger;
            break;
          case kNumberInteger:
            if (is_digit(c)) next = kNumberInteger;
            [[fallthrough]];
          case kNumberZero:
            if (!integer && c == '.') next = kNumberDot;
            if (!integer && (c == 'e' || c == 'E')) next = kNumberE;
            break;
          case kNumberDot:
            if (is_digit(c)) next = kNumberFraction;
            break;
          case kNumberFraction:
            if (is_digit(c)) next = kNumberFraction;
            if (c == 'e' || c == 'E') next = kNumberE;
            break;
          case kNumberE:
            if (c == '+' || c == '-') next = kNumberESign;
            if (is_digit(c)) next = kNumberExponent;
            break;
          case kNumberESign:
          case kNumberExponent:
            if (is_digit(c)) next = kNumberExponent;
            break;
        }
        if (next >= 0) {
          if (++f.pos > kMaxNumberChars) return;
          f.phase = static_cast<uint8_t>(next);
          return emit(stack);
        }
        if (!number_may_end(f.phase)) return;
        stack.pop_back();  // the number ended before c, which belongs to what follows
        continue;
      }
      case Kind::kLiteral: {
        const auto& literals = grammar_->node(f.node).literals;
        uint32_t lo = f.lo, hi = f.hi;
        narrow(literals, literal_text, lo, hi, f.pos, c);
        if (lo < hi) {
          f.lo = lo;
          f.hi = hi;
          ++f.pos;
          if (hi - lo == 1 && literals[lo].size() == f.pos) stack.pop_back();
          return emit(stack);
        }
        bool whole = false;  // a literal ended before c ("1" of enum [1, 10], then ',')
        for (uint32_t i = f.lo; i < f.hi; ++i) whole = whole || literals[i].size() == f.pos;
        if (!whole) return;
        stack.pop_back();
        continue;
      }
    }
  }
}

}  // namespace herd::server
