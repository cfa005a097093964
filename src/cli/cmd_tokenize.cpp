// lantern tokenize -m MODEL (-p TEXT | -f FILE) [--ids] [--no-bos] [--no-parse-special]
#include <cstdio>

#include "cli/common.h"

namespace lantern::cli {

void add_tokenize_command(CLI::App& app) {
    struct Options {
        ModelOptions model;
        std::string prompt;
        std::string file;
        bool ids = false;
        bool no_bos = false;
        bool no_parse_special = false;
    };
    auto opt = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("tokenize", "print the tokens of a text");
    cmd->add_option("-m,--model", opt->model.model_path, "GGUF model or vocabulary file (default: SmolLM2)");
    auto* p = cmd->add_option("-p,--prompt", opt->prompt, "text to tokenize");
    auto* f = cmd->add_option("-f,--file", opt->file, "file whose contents to tokenize");
    p->excludes(f);
    cmd->add_flag("--ids", opt->ids, "print only the ids, as [1, 2, 3]");
    cmd->add_flag("--no-bos", opt->no_bos, "do not add BOS/EOS even if the vocabulary asks for them");
    cmd->add_flag("--no-parse-special", opt->no_parse_special, "treat special-token text as plain text");
    cmd->callback([opt] {
        std::string text = opt->prompt;
        if (!opt->file.empty()) text = read_text_file(opt->file);
        ModelParams params;
        params.vocab_only = true;
        std::unique_ptr<Model> model =
            Model::load(opt->model.model_path.empty() ? default_model_path() : opt->model.model_path, params);
        const std::vector<int32_t> ids = model->tokenize(text, !opt->no_bos, !opt->no_parse_special);
        if (opt->ids) {
            std::string out = "[";
            for (size_t i = 0; i < ids.size(); ++i) {
                if (i > 0) out += ", ";
                out += std::to_string(ids[i]);
            }
            std::printf("%s]\n", out.c_str());
            return;
        }
        for (int32_t id : ids) {
            std::printf("%6d -> '%s'\n", id, model->token_to_piece(id, true).c_str());
        }
    });
}

}  // namespace lantern::cli
