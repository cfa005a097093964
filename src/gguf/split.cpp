#include "gguf/split.h"

#include <cstdio>

#include "lantern/error.h"

namespace lantern::gguf {
namespace {

std::string part_suffix(int i, int n) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", i + 1, n);
    return buf;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
    throw Error(ErrorCode::Format, path + ": " + what);
}

}  // namespace

std::string split_part_path(const std::string& first, int i, int n) {
    const std::string suffix = part_suffix(0, n);
    if (first.size() < suffix.size() || first.compare(first.size() - suffix.size(), suffix.size(), suffix) != 0) {
        bad(first, "the model is split into " + std::to_string(n) + " files, but this name does not end in " + suffix +
                       " (the other parts are found by their names)");
    }
    return first.substr(0, first.size() - suffix.size()) + part_suffix(i, n);
}

std::vector<std::unique_ptr<File>> open_other_parts(const File& first) {
    const int64_t n = first.get_int("split.count").value_or(1);
    if (n <= 1) return {};
    if (n > 9999) bad(first.path(), "split.count " + std::to_string(n) + " is not a number of files");
    const int64_t no = first.get_int("split.no").value_or(0);
    if (no != 0) {
        bad(first.path(), "this is part " + std::to_string(no + 1) + " of " + std::to_string(n) +
                              " of a split model: open the first part, whose name ends in " +
                              part_suffix(0, static_cast<int>(n)));
    }
    const int64_t total = first.get_int("split.tensors.count").value_or(-1);
    std::vector<std::unique_ptr<File>> parts;
    size_t tensors = first.tensors().size();
    for (int i = 1; i < n; ++i) {
        const std::string path = split_part_path(first.path(), i, static_cast<int>(n));
        std::unique_ptr<File> f = File::open(path);
        if (f->get_int("split.no").value_or(-1) != i || f->get_int("split.count").value_or(-1) != n) {
            bad(path, "is not part " + std::to_string(i + 1) + " of " + std::to_string(n) + " (its split.no / split.count say otherwise)");
        }
        tensors += f->tensors().size();
        parts.push_back(std::move(f));
    }
    if (total >= 0 && tensors != static_cast<size_t>(total)) {
        bad(first.path(), "the " + std::to_string(n) + " parts hold " + std::to_string(tensors) +
                              " tensors; split.tensors.count says " + std::to_string(total));
    }
    return parts;
}

}  // namespace lantern::gguf
