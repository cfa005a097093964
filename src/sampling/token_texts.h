// Every token's text and whether it ends generation: what the constrained
// samplers (json_constraint.h, grammar_constraint.h) and DRY's sequence
// breakers read. A model makes its table once (Model::Impl::token_texts)
// and every sampler shares it: built per request, the default model's
// 49k token_to_piece calls took ~60-80 ms of each constrained request.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace lantern {

struct TokenTexts {
    std::vector<std::string> pieces;  // pieces[t]: token t's text
    std::vector<bool> eog;            // eog[t]: t ends generation
};

using SharedTokenTexts = std::shared_ptr<const TokenTexts>;

inline SharedTokenTexts share_token_texts(std::vector<std::string> pieces, std::vector<bool> eog) {
    return std::make_shared<const TokenTexts>(TokenTexts{std::move(pieces), std::move(eog)});
}

}  // namespace lantern
