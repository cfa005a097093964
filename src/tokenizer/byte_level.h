// GPT-2's byte-level alphabet: each of the 256 byte values is written as one
// printable character, so that BPE vocabularies can be stored as text.
// Bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for themselves (as
// U+0021.., U+00A1.., U+00AE..); the other 68 bytes, in increasing order,
// become U+0100, U+0101, ... (so a space is "Ġ" U+0120 and "\n" is "Ċ" U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lantern::tok {

uint32_t byte_to_char(uint8_t byte);
int char_to_byte(uint32_t cp);  // the byte a character stands for, or -1

// Appends the UTF-8 of each byte's character.
void append_byte_chars(std::string& out, std::string_view bytes);
// Appends the bytes a byte-level text stands for; a character outside the
// alphabet is copied as its UTF-8 (vocabularies with plain-text added tokens).
void append_byte_level_decoded(std::string& out, std::string_view text);

}  // namespace lantern::tok
