// Text <-> token ids for GGUF models.
//
// Two tokenizer models are supported, named by `tokenizer.ggml.model`:
//   "llama"  SentencePiece-style: spaces escaped as U+2581 "▁", an optional
//            "▁" prefix, pieces merged by score, unknown characters spelled
//            with byte tokens <0xNN> (or the unknown token).
//   "gpt2"   GPT-2-style byte-level BPE: text split by the pre-tokenizer the
//            file names (`tokenizer.ggml.pre`), bytes mapped to printable
//            characters, pieces merged by rank (`tokenizer.ggml.merges`).
// Any other model ("bert", "t5", "rwkv", ...) is rejected with
// ErrorCode::Unsupported.
//
// Pre-tokenizers (gpt2 only) are looked up by name in a table of published
// split rules (pretokenizer_table.cpp lists every name: gpt-2, llama-bpe,
// qwen2, deepseek-llm, deepseek-coder, deepseek-v3, falcon, starcoder,
// smollm, refact, command-r, mpt, olmo, dbrx, stablelm2, jais, tekken, poro,
// bloom, chatglm-bpe, viking, exaone, chameleon, minerva-7b, codeshell,
// smaug-bpe, gpt-4o, ...). "default" -- what a file without
// `tokenizer.ggml.pre` gets -- means the GPT-2 rules. An unknown name also
// falls back to the GPT-2 rules (not an error: the split rules only refine
// where merges may happen, and GPT-2's are the common ancestor); the
// Tokenizer then reports it once, through the optional warning callback and
// in warnings(), and pre_tokenizer_fallback() returns true.
//
// Unicode normalisation: the qwen2 pre-tokenizer (Qwen2, Qwen2.5, Qwen3)
// first puts each stretch of text between special tokens in NFC, as the
// family's tokenizer.json normalizer does (llama.cpp does not); every other
// vocabulary takes the text as given.
//
// Special tokens: tokens of type CONTROL, USER_DEFINED or UNKNOWN with a
// non-empty text. encode(..., parse_special = true) finds them in the text
// (leftmost, longest first) and emits each as its single id; with
// parse_special = false only the USER_DEFINED ones are matched (they belong
// to the vocabulary's text: Gemma spells newlines and space runs with them),
// as llama.cpp and SentencePiece do, and control tokens are ordinary text.
//
// Space prefix (add_space_prefix, on by default for SPM): every stretch of
// text -- the start, and the text after each special token -- is encoded
// with a leading space, as llama.cpp and the normalizer-based SentencePiece
// tokenizers (Llama 2, Mistral, Phi-3) do; decode() removes one leading space
// at the same places.
//
// Round trip: decode(encode(text, false, false)) == text, invalid UTF-8
// included (it travels as byte tokens or byte-level characters), except:
//   - NFC vocabularies (above): text not in NFC decodes in NFC;
//   - SPM: a literal "▁" (U+2581) in the text decodes as a space, as in
//     SentencePiece; with remove_extra_whitespaces (off unless the file asks)
//     space runs collapse;
//   - BPE: a byte the vocabulary has no character for (some omit bytes that
//     never occur in UTF-8, 0xC0, 0xC1, 0xF5..0xFF) is dropped, or becomes
//     the unknown token if the vocabulary has one of type Unknown; where a
//     user-defined token spells such a byte (deepseek: "û" for 0xFB), that
//     character written in the text is the token and decodes as the byte,
//     as in Hugging Face's tokenizer.
// Special tokens written in the text round-trip with parse_special and
// decode(..., render_special = true).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lantern {

namespace gguf {
class File;
}

// Token types as numbered in `tokenizer.ggml.token_type`.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

// Everything the tokenizer needs, independent of GGUF. Ids are -1 when absent.
struct VocabData {
    std::string model;                  // tokenizer.ggml.model: "llama", "gpt2", ...
    std::string pre = "default";        // tokenizer.ggml.pre
    std::vector<std::string> tokens;    // [n_vocab] token texts (SPM: "▁" for space; BPE: byte-level)
    std::vector<float> scores;          // [n_vocab] or empty (SPM merge priority, higher first)
    std::vector<int32_t> token_types;   // [n_vocab] or empty (all Normal); values of TokenType
    std::vector<std::string> merges;    // BPE: "left right", in rank order (first = merged first)

    int32_t bos = -1, eos = -1, unk = -1, pad = -1, eot = -1, eom = -1, sep = -1, cls = -1,
            mask = -1;
    int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;

    // Unset means the default for the model, as published by the reference
    // tokenizers: llama (SPM) adds BOS and a space prefix; gpt2 adds neither.
    // Neither adds EOS; remove_extra_whitespaces defaults to false.
    std::optional<bool> add_bos, add_eos, add_space_prefix, remove_extra_whitespaces;
};

// A code model's fill-in-the-middle tokens (-1: absent): prefix, suffix and
// middle markers, and the padding, repository and file separators of
// repository-level prompts.
struct FimTokens {
    int32_t pre = -1, suf = -1, mid = -1, pad = -1, rep = -1, sep = -1;
    bool usable() const { return pre >= 0 && suf >= 0 && mid >= 0; }
};

// Reads the tokenizer.ggml.* keys. Throws lantern::Error(Format) naming the
// key when one is missing (model, tokens) or has the wrong type or length.
VocabData vocab_data_from_gguf(const gguf::File& f);

class Tokenizer {
public:
    using WarningFn = std::function<void(std::string_view message)>;

    // Validates `data` and builds the lookup tables. Throws lantern::Error:
    // Unsupported for a tokenizer model other than llama/gpt2, Tokenizer for
    // an inconsistent vocabulary (array lengths, ids out of range, malformed
    // merges, add_bos without a bos id, ...). `on_warning`, when given, is
    // called once per warning during construction (e.g. unknown pre-tokenizer).
    explicit Tokenizer(VocabData data, WarningFn on_warning = nullptr);
    ~Tokenizer();
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;

    // Token ids for `text`. add_special: prepend BOS / append EOS as the
    // vocabulary asks (add_bos(), add_eos()). parse_special: match special
    // tokens written in the text (see above). Thread-safe (const, no caches).
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

    // The bytes of one token: SPM "▁" -> " ", <0x0A> -> "\n"; BPE byte-level
    // characters -> bytes. Control tokens give "" unless render_special.
    // User-defined tokens give their text. Throws Error(InvalidArgument) for
    // an id outside [0, n_vocab).
    std::string token_to_piece(int32_t id, bool render_special) const;

    // Concatenated pieces; when the vocabulary adds a space prefix, the one
    // space encode() puts at the start and after each special token is
    // removed again.
    std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

    int32_t n_vocab() const;
    const std::string& model() const;
    const std::string& pre() const;  // the pre-tokenizer name as given
    int32_t bos() const;
    int32_t eos() const;
    int32_t eot() const;   // from the file, else detected by text (<|eot_id|>, <|im_end|>, ...), else -1
    int32_t eom() const;
    int32_t unk() const;
    int32_t pad() const;
    int32_t nl() const;    // the token for "\n" (SPM <0x0A>, BPE "Ċ"), or -1
    // From the file's keys, else special tokens found by their published
    // texts (<|fim_prefix|>, <fim_prefix>, <PRE>, ...); the padding and
    // separators only where prefix, suffix and middle are there.
    const FimTokens& fim() const;
    const VocabData& data() const;

    // End of generation: eos, eot, eom and every control/user-defined token
    // whose text is a published end marker (<|im_end|>, <end_of_turn>,
    // <|eot_id|>, <|endoftext|>, <|end|>, ...), and a FIM model's padding
    // and separators (it writes one where the middle ends).
    bool is_eog(int32_t id) const;
    const std::vector<int32_t>& eog_ids() const;  // sorted
    bool is_special(int32_t id) const;  // control, user-defined or unknown type
    bool is_control(int32_t id) const;

    bool add_bos() const;
    bool add_eos() const;
    bool add_space_prefix() const;

    TokenType token_type(int32_t id) const;
    const std::string& token_text(int32_t id) const;  // raw vocabulary text
    std::optional<int32_t> find_token(std::string_view text) const;  // exact vocabulary text

    // True when `pre` named no known pre-tokenizer and the GPT-2 rules were used.
    bool pre_tokenizer_fallback() const;
    const std::vector<std::string>& warnings() const;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace lantern
