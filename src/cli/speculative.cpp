#include "cli/speculative.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace lantern::cli {
namespace {

int32_t argmax(const float* logits, int n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) {
        if (logits[i] > logits[best]) best = i;
    }
    return best;
}

}  // namespace

SpeculativeStats generate_speculative(const Model& model, Context& target, const Model& draft_model, Context& draft,
                                      const std::vector<int32_t>& prompt, int n, int n_draft, bool ignore_eos) {
    if (draft_model.n_vocab() != model.n_vocab()) {
        throw Error(ErrorCode::InvalidArgument, "the draft model's vocabulary (" + std::to_string(draft_model.n_vocab()) +
                                                    " tokens) is not the model's (" + std::to_string(model.n_vocab()) + ")");
    }
    const auto t0 = std::chrono::steady_clock::now();
    const int n_vocab = model.n_vocab();
    const int n_ctx = std::min(target.n_ctx(), draft.n_ctx());
    SpeculativeStats st;
    // The accepted tokens (the target holds them all), and those the draft holds.
    std::vector<int32_t> seq = prompt, in_draft;
    // The target's logits for the token after `seq`.
    std::vector<float> next_logits(target.logits(0), target.logits(0) + n_vocab);

    while (st.generated < n) {
        const int32_t first = argmax(next_logits.data(), n_vocab);
        const bool end = model.is_end_of_generation(first) && !ignore_eos;
        if (end) break;
        const int pos = static_cast<int>(seq.size());
        if (pos >= n_ctx) {
            std::fprintf(stderr, "\nnote: the context is full (%d tokens)\n", n_ctx);
            break;
        }
        // The draft catches up with seq + first, then proposes up to k more.
        const int k = std::max(0, std::min({n_draft, n - st.generated - 1, n_ctx - 1 - pos}));
        std::vector<int32_t> proposed;
        if (k > 0) {
            size_t common = 0;
            while (common < in_draft.size() && common < seq.size() && in_draft[common] == seq[common]) ++common;
            Batch b;
            for (size_t i = common; i < seq.size(); ++i) b.add(seq[i], static_cast<int>(i), 0, false);
            b.add(first, pos, 0, true);
            draft.decode(b);  // rewinds the draft to `common` first
            in_draft.assign(seq.begin(), seq.end());
            in_draft.push_back(first);
            for (int i = 0; i < k; ++i) {
                const int32_t d = argmax(draft.logits(0), n_vocab);
                proposed.push_back(d);
                if (model.is_end_of_generation(d) || i + 1 == k) break;
                Batch one;
                one.add(d, pos + 1 + i, 0, true);
                draft.decode(one);
                in_draft.push_back(d);
            }
        }
        // The target checks first + proposed in one pass (decoding at pos
        // rewinds it past tokens an earlier round rejected).
        Batch check;
        check.add(first, pos, 0, true);
        for (size_t i = 0; i < proposed.size(); ++i) check.add(proposed[i], pos + 1 + static_cast<int>(i), 0, true);
        target.decode(check);
        ++st.target_passes;
        std::vector<int32_t> accepted = {first};
        size_t j = 0;
        while (j < proposed.size() && argmax(target.logits(static_cast<int>(j)), n_vocab) == proposed[j]) {
            accepted.push_back(proposed[j]);
            ++j;
        }
        st.drafted += static_cast<int>(proposed.size());
        st.accepted += static_cast<int>(j);
        next_logits.assign(target.logits(static_cast<int>(j)), target.logits(static_cast<int>(j)) + n_vocab);
        bool stop = false;
        for (int32_t t : accepted) {
            if (st.generated >= n || (model.is_end_of_generation(t) && !ignore_eos)) {
                stop = true;
                break;
            }
            const std::string piece = model.token_to_piece(t);
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            seq.push_back(t);
            ++st.generated;
        }
        std::fflush(stdout);
        if (stop) break;
    }
    st.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return st;
}

}  // namespace lantern::cli
