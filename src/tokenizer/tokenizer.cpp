// Tokenizer: vocabulary validation, special tokens, and the encode/decode
// pipelines around the SPM and BPE models.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <optional>

#include "lantern/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalize.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/token_index.h"
#include "tokenizer/unicode.h"

namespace lantern {

namespace {

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581 "▁"

// Texts of published end-of-turn / end-of-text markers, in the order eot()
// prefers them.
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|end_of_turn|>", "<EOT>", "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // <｜end▁of▁sentence｜>
};
constexpr std::string_view kEogOnlyTexts[] = {
    "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>", "<|return|>", "<|call|>",
};

// Published fill-in-the-middle token texts (Qwen2.5-Coder, StarCoder,
// SantaCoder, CodeLlama, DeepSeek-Coder), per role.
constexpr std::string_view kFimPreTexts[] = {
    "<|fim_prefix|>", "<fim_prefix>", "<fim-prefix>", "<PRE>", "\xE2\x96\x81<PRE>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",  // <｜fim▁begin｜>
};
constexpr std::string_view kFimSufTexts[] = {
    "<|fim_suffix|>", "<fim_suffix>", "<fim-suffix>", "<SUF>", "\xE2\x96\x81<SUF>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",  // <｜fim▁hole｜>
};
constexpr std::string_view kFimMidTexts[] = {
    "<|fim_middle|>", "<fim_middle>", "<fim-middle>", "<MID>", "\xE2\x96\x81<MID>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",  // <｜fim▁end｜>
};
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim_pad>", "<fim-pad>"};
constexpr std::string_view kFimRepTexts[] = {"<|repo_name|>", "<repo_name>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>", "<file_sep>"};

bool is_special_type(TokenType t) {
    return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

}  // namespace

struct Tokenizer::Impl {
    enum class Kind { Spm, Bpe };

    VocabData data;
    Kind kind = Kind::Spm;
    tok::TokenIndex index;
    std::optional<tok::SpmModel> spm;
    std::optional<tok::BpeModel> bpe;
    std::optional<tok::PreTokenizer> pre;
    bool ignore_merges = false;
    bool nfc = false;  // normalise each stretch of text to NFC first (PreTokenizerSpec::nfc)
    bool pre_fallback = false;

    bool add_bos = false, add_eos = false, add_space_prefix = false, remove_extra_ws = false;
    int32_t eot = -1, nl = -1;
    FimTokens fim;
    int32_t byte_unk = -1;  // BPE: what a byte without a token becomes (-1: dropped)
    std::vector<uint8_t> special;                       // [n_vocab]
    std::array<std::vector<int32_t>, 256> by_first_byte;  // special ids, longest text first
    std::vector<int32_t> eog;                           // sorted
    std::vector<std::string> warnings;

    explicit Impl(VocabData d) : data(std::move(d)), index(data.tokens) {}

    int32_t n_vocab() const { return static_cast<int32_t>(data.tokens.size()); }
    TokenType type(int32_t id) const {
        return data.token_types.empty() ? TokenType::Normal : static_cast<TokenType>(data.token_types[id]);
    }

    struct Scratch {
        tok::PreTokenizer::Scratch pre;
        tok::BpeModel::Scratch bpe;
        tok::SpmModel::Scratch spm;
        std::vector<std::pair<size_t, size_t>> pieces;
        std::string buffer;
        std::string normalized;
    };

    // Encodes one stretch of text between special tokens (or the whole text).
    void encode_text(std::string_view text, std::vector<int32_t>& out, Scratch& s) const;
};

namespace {

[[noreturn]] void vocab_error(const std::string& what) {
    throw Error(ErrorCode::Tokenizer, "tokenizer vocabulary: " + what);
}

void check_id(const VocabData& d, int32_t id, const char* name) {
    if (id < -1 || id >= static_cast<int32_t>(d.tokens.size())) {
        vocab_error(std::string(name) + " id " + std::to_string(id) + " is outside the vocabulary (n_vocab " +
                    std::to_string(d.tokens.size()) + ")");
    }
}

// SentencePiece's remove_extra_whitespaces: strip leading and trailing
// spaces and collapse runs of spaces into one.
void collapse_spaces(std::string_view text, std::string& out) {
    out.clear();
    bool pending = false;
    for (char c : text) {
        if (c == ' ') {
            pending = !out.empty();
            continue;
        }
        if (pending) out.push_back(' ');
        pending = false;
        out.push_back(c);
    }
}

}  // namespace

Tokenizer::Tokenizer(VocabData data, WarningFn on_warning) {
    // Which model, before building anything large.
    Impl::Kind kind;
    if (data.model == "llama") {
        kind = Impl::Kind::Spm;
    } else if (data.model == "gpt2") {
        kind = Impl::Kind::Bpe;
    } else {
        throw Error(ErrorCode::Unsupported,
                    "tokenizer model '" + data.model +
                        "' is not supported (supported: 'llama' = SentencePiece, 'gpt2' = byte-level BPE)");
    }
    const size_t n = data.tokens.size();
    if (n == 0) vocab_error("no tokens");
    if (n > static_cast<size_t>(INT32_MAX)) vocab_error("too many tokens");
    if (!data.scores.empty() && data.scores.size() != n) {
        vocab_error(std::to_string(data.scores.size()) + " scores for " + std::to_string(n) + " tokens");
    }
    if (!data.token_types.empty() && data.token_types.size() != n) {
        vocab_error(std::to_string(data.token_types.size()) + " token types for " + std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < data.token_types.size(); ++i) {
        if (data.token_types[i] < 0 || data.token_types[i] > 6) {
            vocab_error("token " + std::to_string(i) + " has unknown type " + std::to_string(data.token_types[i]));
        }
    }
    const std::pair<int32_t, const char*> ids[] = {
        {data.bos, "bos"},         {data.eos, "eos"},         {data.unk, "unknown"},
        {data.pad, "padding"},     {data.eot, "eot"},         {data.eom, "eom"},
        {data.sep, "separator"},   {data.cls, "cls"},         {data.mask, "mask"},
        {data.fim_pre, "fim_pre"}, {data.fim_suf, "fim_suf"}, {data.fim_mid, "fim_mid"},
        {data.fim_pad, "fim_pad"}, {data.fim_rep, "fim_rep"}, {data.fim_sep, "fim_sep"},
    };
    for (const auto& [id, name] : ids) check_id(data, id, name);
    if (kind == Impl::Kind::Bpe && data.merges.empty()) vocab_error("a gpt2 (BPE) vocabulary without merges");

    impl_ = std::make_unique<Impl>(std::move(data));
    Impl& m = *impl_;
    m.kind = kind;
    const VocabData& d = m.data;
    auto warn = [&](std::string message) {
        if (on_warning) on_warning(message);
        m.warnings.push_back(std::move(message));
    };

    const bool spm = kind == Impl::Kind::Spm;
    m.add_bos = d.add_bos.value_or(spm);
    m.add_eos = d.add_eos.value_or(false);
    m.add_space_prefix = d.add_space_prefix.value_or(spm);
    m.remove_extra_ws = d.remove_extra_whitespaces.value_or(false);
    if (m.add_bos && d.bos < 0) vocab_error("add_bos_token is set but there is no bos token id");
    if (m.add_eos && d.eos < 0) vocab_error("add_eos_token is set but there is no eos token id");

    if (spm) {
        std::vector<uint8_t> mergeable(n);
        for (size_t i = 0; i < n; ++i) {
            const TokenType t = m.type(static_cast<int32_t>(i));
            mergeable[i] = t == TokenType::Normal || t == TokenType::Undefined;
        }
        m.spm.emplace(d.tokens, d.scores, std::move(mergeable), m.index);
        m.nl = m.spm->byte_token('\n');
        if (m.nl < 0) m.nl = m.index.find("\n");
    } else {
        m.bpe.emplace(d.merges, m.index);
        if (m.bpe->skipped_merges() > 0) {
            warn(std::to_string(m.bpe->skipped_merges()) +
                 " merges name pieces that are not in the vocabulary; they are ignored");
        }
        const tok::PreTokenizerSpec* spec = tok::find_pre_tokenizer(d.pre);
        if (!spec) {
            m.pre_fallback = true;
            spec = &tok::gpt2_pre_tokenizer();
            warn("unknown pre-tokenizer '" + d.pre + "'; splitting text with the GPT-2 rules");
        }
        m.pre.emplace(spec->patterns);
        m.ignore_merges = spec->ignore_merges;
        m.nfc = spec->nfc;
        m.nl = m.bpe->byte_token('\n');
        // Only a genuine unknown token stands in for a byte the vocabulary
        // cannot spell; some files name <|endoftext|> as "unknown".
        if (d.unk >= 0 && m.type(d.unk) == TokenType::Unknown) m.byte_unk = d.unk;
    }

    // Special tokens, bucketed by first byte, longest first.
    m.special.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(i);
        if (!is_special_type(m.type(id)) || d.tokens[i].empty()) continue;
        m.special[i] = 1;
        m.by_first_byte[static_cast<uint8_t>(d.tokens[i][0])].push_back(id);
    }
    for (auto& bucket : m.by_first_byte) {
        std::stable_sort(bucket.begin(), bucket.end(), [&](int32_t a, int32_t b) {
            return d.tokens[a].size() > d.tokens[b].size();
        });
    }

    // End of generation.
    auto special_named = [&](std::string_view text) {
        const int32_t id = m.index.find(text);
        return id >= 0 && m.special[id] ? id : -1;
    };
    m.eot = d.eot;
    for (std::string_view text : kEotTexts) {
        if (m.eot >= 0) break;
        m.eot = special_named(text);
    }
    auto first_named = [&](int32_t given, const auto& texts) {
        for (std::string_view text : texts) {
            if (given >= 0) break;
            given = special_named(text);
        }
        return given;
    };
    m.fim.pre = first_named(d.fim_pre, kFimPreTexts);
    m.fim.suf = first_named(d.fim_suf, kFimSufTexts);
    m.fim.mid = first_named(d.fim_mid, kFimMidTexts);
    if (m.fim.usable()) {
        m.fim.pad = first_named(d.fim_pad, kFimPadTexts);
        m.fim.rep = first_named(d.fim_rep, kFimRepTexts);
        m.fim.sep = first_named(d.fim_sep, kFimSepTexts);
    } else {
        m.fim = FimTokens{};
    }
    for (int32_t id : {d.eos, m.eot, d.eom, m.fim.pad, m.fim.rep, m.fim.sep}) {
        if (id >= 0) m.eog.push_back(id);
    }
    for (std::string_view text : kEotTexts) {
        if (const int32_t id = special_named(text); id >= 0) m.eog.push_back(id);
    }
    for (std::string_view text : kEogOnlyTexts) {
        if (const int32_t id = special_named(text); id >= 0) m.eog.push_back(id);
    }
    std::sort(m.eog.begin(), m.eog.end());
    m.eog.erase(std::unique(m.eog.begin(), m.eog.end()), m.eog.end());
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

void Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>& out,
                                  Scratch& s) const {
    if (text.empty()) return;
    if (kind == Kind::Spm) {
        std::string collapsed;
        if (remove_extra_ws) {
            collapse_spaces(text, collapsed);
            text = collapsed;
            if (text.empty()) return;
        }
        s.buffer.clear();
        s.buffer.reserve(text.size() + text.size() / 2 + 3);
        if (add_space_prefix) s.buffer.append(kSpaceEscape);
        for (char c : text) {
            if (c == ' ') {
                s.buffer.append(kSpaceEscape);
            } else {
                s.buffer.push_back(c);
            }
        }
        spm->encode(s.buffer, index, data.unk, out, s.spm);
        return;
    }
    if (nfc) {
        s.normalized = unicode::to_nfc(text);
        text = s.normalized;
    }
    if (add_space_prefix) {
        s.buffer.assign(1, ' ');
        s.buffer.append(text);
        text = s.buffer;
    }
    s.pieces.clear();
    pre->split(text, s.pieces, s.pre);
    for (const auto& [begin, end] : s.pieces) {
        bpe->encode_piece(text.substr(begin, end - begin), index, ignore_merges, byte_unk, out, s.bpe);
    }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    const Impl& m = *impl_;
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    Impl::Scratch scratch;
    if (add_special && m.add_bos) out.push_back(m.data.bos);

    // Special tokens written in the text become single ids. Without
    // parse_special only user-defined tokens are matched (llama.cpp's and
    // SentencePiece's rule: they are part of the vocabulary's text, e.g.
    // Gemma's whitespace runs); control tokens stay plain text.
    size_t segment = 0, pos = 0;
    while (pos < text.size()) {
        int32_t found = -1;
        for (int32_t id : m.by_first_byte[static_cast<uint8_t>(text[pos])]) {
            if (!parse_special && m.type(id) != TokenType::UserDefined) continue;
            const std::string& t = m.data.tokens[id];
            if (text.compare(pos, t.size(), t) == 0) {
                found = id;
                break;
            }
        }
        if (found < 0) {
            ++pos;
            continue;
        }
        m.encode_text(text.substr(segment, pos - segment), out, scratch);
        out.push_back(found);
        pos += m.data.tokens[found].size();
        segment = pos;
    }
    m.encode_text(text.substr(segment), out, scratch);

    if (add_special && m.add_eos) out.push_back(m.data.eos);
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id, bool render_special) const {
    const Impl& m = *impl_;
    if (id < 0 || id >= m.n_vocab()) {
        throw Error(ErrorCode::InvalidArgument, "token id " + std::to_string(id) + " is outside the vocabulary (n_vocab " +
                                                    std::to_string(m.n_vocab()) + ")");
    }
    const std::string& text = m.data.tokens[id];
    const TokenType type = m.type(id);
    std::string out;
    switch (type) {
        case TokenType::Control: return render_special ? text : std::string();
        case TokenType::UserDefined:
            // Byte-level vocabularies may complete their byte alphabet with
            // user-defined one-character tokens (deepseek: the 13 bytes never
            // valid in UTF-8); a token the encoder spells a byte with stands
            // for that byte.
            if (m.kind == Impl::Kind::Bpe) {
                uint32_t cp = 0;
                if (!text.empty() && unicode::decode_utf8(text, 0, cp) == text.size()) {
                    const int byte = tok::char_to_byte(cp);
                    if (byte >= 0 && m.bpe->byte_token(static_cast<uint8_t>(byte)) == id) {
                        return std::string(1, static_cast<char>(byte));
                    }
                }
            }
            return text;
        case TokenType::Unknown:
            if (render_special) return text;
            // SentencePiece shows the unknown piece as " ⁇ ".
            return m.kind == Impl::Kind::Spm && id == m.data.unk ? std::string(" \xE2\x81\x87 ") : std::string();
        case TokenType::Byte:
            if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
                return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
            }
            break;
        default: break;
    }
    if (m.kind == Impl::Kind::Spm) {
        out.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
            if (text.compare(i, kSpaceEscape.size(), kSpaceEscape) == 0) {
                out.push_back(' ');
                i += kSpaceEscape.size();
            } else {
                out.push_back(text[i++]);
            }
        }
        return out;
    }
    tok::append_byte_level_decoded(out, text);
    return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
    const Impl& m = *impl_;
    std::string out;
    // Undo the space prefix encode puts before each stretch of text: at the
    // start and after every special token.
    bool boundary = true;
    for (int32_t id : ids) {
        std::string piece = token_to_piece(id, render_special);  // checks the id
        if (m.special[id]) {
            out += piece;
            boundary = true;
            continue;
        }
        if (piece.empty()) continue;
        if (boundary && m.add_space_prefix && piece[0] == ' ') piece.erase(0, 1);
        boundary = false;
        out += piece;
    }
    return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->n_vocab(); }
const std::string& Tokenizer::model() const { return impl_->data.model; }
const std::string& Tokenizer::pre() const { return impl_->data.pre; }
int32_t Tokenizer::bos() const { return impl_->data.bos; }
int32_t Tokenizer::eos() const { return impl_->data.eos; }
int32_t Tokenizer::eot() const { return impl_->eot; }
int32_t Tokenizer::eom() const { return impl_->data.eom; }
int32_t Tokenizer::unk() const { return impl_->data.unk; }
int32_t Tokenizer::pad() const { return impl_->data.pad; }
int32_t Tokenizer::nl() const { return impl_->nl; }
const FimTokens& Tokenizer::fim() const { return impl_->fim; }
const VocabData& Tokenizer::data() const { return impl_->data; }

bool Tokenizer::is_eog(int32_t id) const {
    return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog; }
bool Tokenizer::is_special(int32_t id) const {
    return id >= 0 && id < impl_->n_vocab() && impl_->special[id];
}
bool Tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < impl_->n_vocab() && impl_->type(id) == TokenType::Control;
}

bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }

TokenType Tokenizer::token_type(int32_t id) const {
    if (id < 0 || id >= impl_->n_vocab()) {
        throw Error(ErrorCode::InvalidArgument, "token id " + std::to_string(id) + " is outside the vocabulary");
    }
    return impl_->type(id);
}

const std::string& Tokenizer::token_text(int32_t id) const {
    if (id < 0 || id >= impl_->n_vocab()) {
        throw Error(ErrorCode::InvalidArgument, "token id " + std::to_string(id) + " is outside the vocabulary");
    }
    return impl_->data.tokens[id];
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
    const int32_t id = impl_->index.find(text);
    if (id < 0) return std::nullopt;
    return id;
}

bool Tokenizer::pre_tokenizer_fallback() const { return impl_->pre_fallback; }
const std::vector<std::string>& Tokenizer::warnings() const { return impl_->warnings; }

}  // namespace lantern
