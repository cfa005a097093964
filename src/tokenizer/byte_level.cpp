#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/unicode.h"

namespace lantern::tok {
namespace {

constexpr bool stands_for_itself(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<uint16_t, 256> make_byte_to_char() {
    std::array<uint16_t, 256> table{};
    unsigned next = 256;
    for (unsigned b = 0; b < 256; ++b) table[b] = static_cast<uint16_t>(stands_for_itself(b) ? b : next++);
    return table;
}
constexpr std::array<uint16_t, 256> kByteToChar = make_byte_to_char();
constexpr unsigned kCharLimit = 256 + 68;  // characters in use are below this

constexpr std::array<int16_t, kCharLimit> make_char_to_byte() {
    std::array<int16_t, kCharLimit> table{};
    for (auto& v : table) v = -1;
    for (unsigned b = 0; b < 256; ++b) table[kByteToChar[b]] = static_cast<int16_t>(b);
    return table;
}
constexpr std::array<int16_t, kCharLimit> kCharToByte = make_char_to_byte();

}  // namespace

uint32_t byte_to_char(uint8_t byte) { return kByteToChar[byte]; }

int char_to_byte(uint32_t cp) { return cp < kCharLimit ? kCharToByte[cp] : -1; }

void append_byte_chars(std::string& out, std::string_view bytes) {
    for (char c : bytes) unicode::append_utf8(out, kByteToChar[static_cast<uint8_t>(c)]);
}

void append_byte_level_decoded(std::string& out, std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
        uint32_t cp = 0;
        const size_t len = unicode::decode_utf8(text, pos, cp);
        const int byte = char_to_byte(cp);
        if (byte >= 0) {
            out.push_back(static_cast<char>(byte));
        } else {
            out.append(text.substr(pos, len));
        }
        pos += len;
    }
}

}  // namespace lantern::tok
