// Model::fill_in_middle: the prefix-suffix-middle prompt of code models.
//
// Plain:      [BOS] PRE prefix SUF suffix MID
// With files: [BOS] REP repo "\n" (SEP name "\n" text)... SEP file "\n" PRE ...
// (Qwen2.5-Coder's repository format; without REP/SEP tokens each file is
// written as text under a "--- name ---" line). The model then writes the
// middle and ends it with EOS, EOT, PAD or a separator.
#include <algorithm>

#include "api/model_impl.h"
#include "lantern/lantern.h"

namespace lantern {

bool Model::has_fill_in_middle() const { return impl_->tokenizer->fim().usable(); }

FimPrompt Model::fill_in_middle(const FillInMiddle& r, int max_tokens) const {
    const Tokenizer& tok = *impl_->tokenizer;
    const FimTokens& fim = tok.fim();
    if (!fim.usable()) {
        throw Error(ErrorCode::Unsupported, "the model has no fill-in-the-middle tokens (prefix, suffix, middle): "
                                            "it is not a code model trained for infilling");
    }
    if (max_tokens < 0) throw Error(ErrorCode::InvalidArgument, "max_tokens must not be negative");
    auto text = [&](std::string_view s) { return tok.encode(s, false, false); };

    std::vector<int32_t> files;
    if (!r.files.empty()) {
        const bool repo = fim.rep >= 0 && fim.sep >= 0;
        if (repo) {
            files.push_back(fim.rep);
            for (int32_t t : text(r.repo_name + "\n")) files.push_back(t);
        }
        auto add_file = [&](const std::string& name, const std::string* body) {
            if (repo) files.push_back(fim.sep);
            for (int32_t t : text(repo ? name + "\n" : "--- " + name + " ---\n")) files.push_back(t);
            if (body != nullptr) {
                for (int32_t t : text(*body + (body->empty() || body->back() == '\n' ? "" : "\n"))) files.push_back(t);
            }
        };
        for (const FimFile& f : r.files) add_file(f.name, &f.text);
        add_file(r.file_name, nullptr);
    }
    std::vector<int32_t> prefix = text(r.prefix), suffix = text(r.suffix);

    FimPrompt out;
    const bool bos = tok.add_bos() && tok.bos() >= 0;
    const int64_t fixed = 3 + (bos ? 1 : 0);
    const int64_t total = fixed + static_cast<int64_t>(files.size() + prefix.size() + suffix.size());
    if (max_tokens > 0 && total > max_tokens) {
        if (fixed > max_tokens) {
            throw Error(ErrorCode::InvalidArgument, "a fill-in-the-middle prompt needs at least " +
                                                        std::to_string(fixed) + " tokens");
        }
        out.truncated = true;
        const int64_t room = max_tokens - fixed;
        // The nearest text matters most: the suffix's start, the prefix's end.
        int64_t take_suf = std::min<int64_t>(static_cast<int64_t>(suffix.size()), room / 4);
        const int64_t take_pre = std::min<int64_t>(static_cast<int64_t>(prefix.size()), room - take_suf);
        take_suf = std::min<int64_t>(static_cast<int64_t>(suffix.size()), room - take_pre);
        const int64_t take_files = std::min<int64_t>(static_cast<int64_t>(files.size()), room - take_pre - take_suf);
        prefix.erase(prefix.begin(), prefix.end() - take_pre);
        suffix.resize(static_cast<size_t>(take_suf));
        files.erase(files.begin(), files.end() - take_files);
    }
    if (bos) out.tokens.push_back(tok.bos());
    out.tokens.insert(out.tokens.end(), files.begin(), files.end());
    out.tokens.push_back(fim.pre);
    out.tokens.insert(out.tokens.end(), prefix.begin(), prefix.end());
    out.tokens.push_back(fim.suf);
    out.tokens.insert(out.tokens.end(), suffix.begin(), suffix.end());
    out.tokens.push_back(fim.mid);
    return out;
}

}  // namespace lantern
