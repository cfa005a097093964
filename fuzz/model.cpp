// A model file as downloaded: GGUF header, metadata, tensor table, weights.
// Input: the file's bytes. It is refused with an Error naming what is wrong,
// or it loads (CPU backend), tokenizes, renders its chat template and decodes
// two tokens; nothing else.
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "fuzz_input.h"
#include "gguf/gguf.h"
#include "lantern/error.h"
#include "lantern/lantern.h"

namespace {

// The bytes as a file in memory (memfd): the loader maps a path.
class MemFile {
public:
    MemFile(const uint8_t* data, size_t size) : fd_(memfd_create("lantern-fuzz", 0)) {
        for (size_t done = 0; fd_ >= 0 && done < size;) {
            const ssize_t n = write(fd_, data + done, size - done);
            if (n <= 0) break;
            done += static_cast<size_t>(n);
        }
    }
    ~MemFile() {
        if (fd_ >= 0) close(fd_);
    }
    bool ok() const { return fd_ >= 0; }
    std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

private:
    int fd_;
};

void walk_metadata(const lantern::gguf::File& f) {
    for (const auto& [key, value] : f.metadata()) {
        (void)lantern::gguf::value_type_name(lantern::gguf::value_type(value));
        try {
            (void)f.get_int(key);
        } catch (const lantern::Error&) {
        }
        try {
            (void)f.get_string(key);
        } catch (const lantern::Error&) {
        }
    }
    for (const auto& t : f.tensors()) (void)f.find_tensor(t.name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const MemFile file(data, size);
    if (!file.ok()) return 0;
    try {
        walk_metadata(*lantern::gguf::File::open(file.path()));
    } catch (const lantern::Error&) {
        return 0;
    }
    try {
        lantern::ModelParams mp;
        mp.n_threads = 1;
        auto model = lantern::Model::load(file.path(), mp);
        const auto ids = model->tokenize("Hello <|im_end|> world", true, true);
        (void)model->detokenize(ids, true);
        try {
            (void)model->apply_chat_template({{"user", "Hi"}}, true);
        } catch (const lantern::Error&) {
        }
        lantern::ContextParams cp;
        cp.n_ctx = 8;
        cp.n_batch = 4;
        lantern::Context ctx(*model, cp);
        lantern::Batch batch;
        batch.add(0, 0, 0, false);
        batch.add(model->n_vocab() - 1, 1, 0, true);
        ctx.decode(batch);
        (void)ctx.logits(0);
    } catch (const lantern::Error&) {
    }
    return 0;
}
