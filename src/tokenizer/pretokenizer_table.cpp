// The table of pre-tokenizer rule sets and the names that select them.
//
// Patterns are the ones each family's tokenizer publishes (its
// tokenizer.json Split / ByteLevel regexes, or the tiktoken pattern), written
// in the dialect of regex.h. Non-ASCII characters are written as \x{...} so
// that no editor or tool can normalise them: the deepseek-llm letter class
// has endpoints (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A) that NFC
// would turn into other characters, reversing ranges.
#include "tokenizer/pretokenizer.h"

#include <array>

namespace lantern::tok {
namespace {

using sv = std::string_view;

// GPT-2, as the ByteLevel pre-tokenizer applies it (with the final \s+ that
// keeps a lone whitespace before a non-space in a piece of its own).
constexpr sv kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Llama 3 (tiktoken cl100k-style): numbers in groups of up to three.
constexpr sv kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2: as Llama 3 but every digit alone.
constexpr sv kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr sv kDigit = R"(\p{N})";
constexpr sv kLineBreak = R"([\r\n])";

// DeepSeek LLM / Coder: CJK runs isolated (U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF).
constexpr sv kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
// DeepSeek LLM letters: an enumeration of the cased letters (not \p{L}).
constexpr sv kDeepseekLlmLetters =
    R"(\s?[)"
    R"(\x{41}-\x{5A}\x{61}-\x{7A}\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA})"
    R"(\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377})"
    R"(\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})"
    R"(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B})"
    R"(\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC})"
    R"(\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115})"
    R"(\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139})"
    R"(\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B})"
    R"(\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B})"
    R"(\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})"
    R"(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2})"
    R"(\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943})"
    R"(]+)";
// ASCII punctuation and symbols, their fullwidth forms, U+2018..U+201F, U+3000..U+3002.
constexpr sv kDeepseekLlmPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr sv kTrailingSpace = R"(\s+$)";

// DeepSeek V3: numbers by three, CJK ideographs and kana, then the main split.
constexpr sv kDeepseekV3Cjk = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
constexpr sv kDeepseekV3Regex =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Falcon: runs of punctuation (with the ASCII symbols \p{P} lacks), GPT-2,
// then numbers cut into threes.
constexpr sv kFalconPunct = R"([\p{P}\$\+<=>\^~\|`]+)";
constexpr sv kThreeDigits = R"([0-9][0-9][0-9])";

// BLOOM / Poro / GPT-3 Finnish: words with an optional leading space, cut at
// whitespace and sentence punctuation (… 。 ， 、 । ۔ ،).
constexpr sv kBloomRegex =
    R"( ?[^(\s|[.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C}])]+)";

// Tekken (Mistral NeMo): cased words, single digits, no contractions.
constexpr sv kTekkenRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o / Llama 4 (tiktoken o200k): cased words with contractions attached.
constexpr sv kGpt4oRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Chameleon: sentinel and image tokens, tabs/newlines and space pairs, digits,
// single punctuation, then GPT-2.
constexpr sv kChameleonSentinel = R"(<sentinel:[0-9]+>)";
constexpr sv kChameleonImage = R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)";
constexpr sv kChameleonSpaces = R"(([\t\n]|    |  ))";
constexpr sv kChameleonPunct = R"([\p{P}!-/:-@\[-`{-~])";

// Ling / BailingMoE (possessive quantifiers, as published).
constexpr sv kBailingRegex =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

// Seed-Coder: single digits, punctuation never swallows line breaks.
constexpr sv kSeedCoderRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr std::array kGpt2 = {kGpt2Regex};
constexpr std::array kLlama3 = {kLlama3Regex};
constexpr std::array kQwen2 = {kQwen2Regex};
constexpr std::array kDigitsThenGpt2 = {kDigit, kGpt2Regex};
constexpr std::array kDeepseekLlm = {kLineBreak,     kDeepseekLlmLetters, kDeepseekLlmPunct,
                                     kTrailingSpace, kDeepseekCjk,        kDigit};
constexpr std::array kDeepseekCoder = {kLineBreak, sv(R"(\s?\p{L}+)"), sv(R"(\s?\p{P}+)"),
                                       kDeepseekCjk, kDigit};
constexpr std::array kDeepseekV3 = {sv(R"(\p{N}{1,3})"), kDeepseekV3Cjk, kDeepseekV3Regex};
constexpr std::array kFalcon = {kFalconPunct, kGpt2Regex, kThreeDigits};
constexpr std::array kBloom = {kBloomRegex};
constexpr std::array kViking = {kBloomRegex, kDigit};
constexpr std::array kTekken = {kTekkenRegex};
constexpr std::array kGpt4o = {kGpt4oRegex};
constexpr std::array kChameleon = {kChameleonSentinel, kChameleonImage, kChameleonSpaces,
                                   kDigit,             kChameleonPunct, kGpt2Regex};
constexpr std::array kBailing = {kBailingRegex};
constexpr std::array kSeedCoder = {kSeedCoderRegex};

struct NamedSpec {
    sv name;
    PreTokenizerSpec spec;
};

// Names as converters write them in tokenizer.ggml.pre.
const NamedSpec kTable[] = {
    {"default", {"gpt2", kGpt2}},
    {"gpt-2", {"gpt2", kGpt2}},
    {"gpt2", {"gpt2", kGpt2}},
    {"gpt-neox", {"gpt2", kGpt2}},
    {"mpt", {"gpt2", kGpt2}},
    {"olmo", {"gpt2", kGpt2}},
    {"jais", {"gpt2", kGpt2}},
    {"trillion", {"gpt2", kGpt2}},
    {"granite-docling", {"gpt2", kGpt2}},
    {"phi-2", {"gpt2", kGpt2}},
    {"roberta-bpe", {"gpt2", kGpt2}},
    {"jina-es", {"gpt2", kGpt2}},
    {"jina-de", {"gpt2", kGpt2}},
    {"jina-v1-en", {"gpt2", kGpt2}},
    {"jina-v2-es", {"gpt2", kGpt2}},
    {"jina-v2-de", {"gpt2", kGpt2}},
    {"jina-v2-code", {"gpt2", kGpt2}},
    {"llama3", {"llama3", kLlama3, true}},
    {"llama-v3", {"llama3", kLlama3, true}},
    {"llama-bpe", {"llama3", kLlama3, true}},
    {"falcon3", {"llama3", kLlama3, true}},
    {"dbrx", {"llama3", kLlama3}},
    {"smaug-bpe", {"llama3", kLlama3}},
    {"chatglm-bpe", {"llama3", kLlama3}},
    {"qwen2", {"qwen2", kQwen2, false, true}},  // Qwen2, Qwen2.5, Qwen3: NFC
    {"stablelm2", {"qwen2", kQwen2}},
    {"deepseek-r1-qwen", {"qwen2", kQwen2}},
    {"megrez", {"qwen2", kQwen2}},
    {"starcoder", {"digits+gpt2", kDigitsThenGpt2}},
    {"refact", {"digits+gpt2", kDigitsThenGpt2}},
    {"command-r", {"digits+gpt2", kDigitsThenGpt2}},
    {"smollm", {"digits+gpt2", kDigitsThenGpt2}},
    {"codeshell", {"digits+gpt2", kDigitsThenGpt2}},
    {"exaone", {"digits+gpt2", kDigitsThenGpt2}},
    {"minerva-7b", {"digits+gpt2", kDigitsThenGpt2}},
    {"deepseek-llm", {"deepseek-llm", kDeepseekLlm}},
    {"deepseek-coder", {"deepseek-coder", kDeepseekCoder}},
    {"deepseek-v3", {"deepseek-v3", kDeepseekV3}},
    {"falcon", {"falcon", kFalcon}},
    {"bloom", {"bloom", kBloom}},
    {"poro-chat", {"bloom", kBloom}},
    {"gpt3-finnish", {"bloom", kBloom}},
    {"viking", {"viking", kViking}},
    {"tekken", {"tekken", kTekken}},
    {"gpt-4o", {"gpt-4o", kGpt4o}},
    {"llama4", {"gpt-4o", kGpt4o}},
    {"chameleon", {"chameleon", kChameleon}},
    {"bailingmoe", {"bailingmoe", kBailing}},
    {"seed-coder", {"seed-coder", kSeedCoder}},
};

}  // namespace

const PreTokenizerSpec* find_pre_tokenizer(std::string_view name) {
    for (const NamedSpec& e : kTable) {
        if (e.name == name) return &e.spec;
    }
    return nullptr;
}

const PreTokenizerSpec& gpt2_pre_tokenizer() { return kTable[0].spec; }

std::vector<std::string_view> known_pre_tokenizer_names() {
    std::vector<std::string_view> names;
    for (const NamedSpec& e : kTable) names.push_back(e.name);
    return names;
}

}  // namespace lantern::tok
