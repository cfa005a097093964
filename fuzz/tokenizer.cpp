// Text to tokens and back with published vocabularies (SentencePiece and
// byte-level BPE of several pre-tokenizers). Input: a selector byte (bits
// 0..2: the vocabulary, bit 3: parse special tokens) and the text. Any bytes
// encode; the ids decode; where tokenizer.h promises a round trip (special
// tokens left as text, only bytes the vocabulary spells, and for
// SentencePiece no literal U+2581) it holds.
#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "fuzz_input.h"
#include "gguf/gguf.h"
#include "lantern/error.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Vocab {
    const char* file;
    bool round_trip;  // decode(encode(text)) == text (see above)
};
// deepseek-llm spells 13 bytes with user-defined tokens whose text is a
// character ("û" for 0xFB): such a character written in the text is that
// token, and decodes as the byte (tokenizer.h), as Hugging Face's does.
constexpr std::array<Vocab, 5> kVocabs = {{
    {"ggml-vocab-llama-spm.gguf", true},
    {"ggml-vocab-gpt-2.gguf", true},
    {"ggml-vocab-phi-3.gguf", true},
    {"ggml-vocab-deepseek-llm.gguf", false},
    {"ggml-vocab-starcoder.gguf", true},
}};

const lantern::Tokenizer& tokenizer(size_t i) {
    static std::array<std::unique_ptr<lantern::Tokenizer>, kVocabs.size()> cache;
    if (!cache[i]) {
        const auto f = lantern::gguf::File::open((lantern::fuzz::testdata_dir() / "vocab" / kVocabs[i].file).string());
        cache[i] = std::make_unique<lantern::Tokenizer>(lantern::vocab_data_from_gguf(*f));
    }
    return *cache[i];
}

// The bytes that round-trip alone.
const std::array<bool, 256>& spelled_bytes(size_t i) {
    static std::array<std::array<bool, 256>, kVocabs.size()> spelled;
    static std::array<bool, kVocabs.size()> known{};
    if (!known[i]) {
        const auto& tok = tokenizer(i);
        for (int b = 0; b < 256; ++b) {
            const std::string one(1, static_cast<char>(b));
            spelled[i][static_cast<size_t>(b)] = tok.decode(tok.encode(one, false, false)) == one;
        }
        known[i] = true;
    }
    return spelled[i];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const size_t which = (data[0] & 7u) % kVocabs.size();
    const bool special = (data[0] & 8u) != 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const auto& tok = tokenizer(which);
    const auto ids = tok.encode(text, true, special);
    const std::string back = tok.decode(ids, special);
    for (const int32_t id : ids) (void)tok.token_to_piece(id, special);
    // tokenizer.h's exceptions: a literal U+2581 (SentencePiece), and bytes
    // a byte-level vocabulary does not spell (starcoder omits 0xF1 too).
    const auto& spelled = spelled_bytes(which);
    const bool odd_bytes =
        std::any_of(text.begin(), text.end(), [&](char c) { return !spelled[static_cast<unsigned char>(c)]; });
    if (!special && kVocabs[which].round_trip && !odd_bytes && text.find("\xE2\x96\x81") == std::string_view::npos) {
        const std::string plain = tok.decode(tok.encode(text, false, false));
        if (plain != text) __builtin_trap();
    }
    (void)back;
    return 0;
}
