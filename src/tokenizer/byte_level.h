// GPT-2's byte-level alphabet: byte-level BPE vocabularies spell every byte as one
// printable character, so that token texts are valid UTF-8 strings. Bytes that are
// printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68
// (controls, space, DEL, NBSP, soft hyphen) are moved to U+0100.. in byte order, so a
// space is 'Ġ' (U+0120) and a newline 'Ċ' (U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace herd::tokenizer {

// The code point that spells byte b.
uint32_t byte_to_codepoint(uint8_t b);

// The byte spelled by code point cp, or -1 when cp is not in the alphabet.
int byte_from_codepoint(uint32_t cp);

// Appends the byte-level spelling of every byte of raw to out.
void append_byte_level(std::string& out, std::string_view raw);

// Appends the bytes spelled by a byte-level token text. Characters outside the alphabet
// (never produced by a correct vocabulary) are copied through unchanged.
void append_byte_level_decoded(std::string& out, std::string_view text);

}  // namespace herd::tokenizer
