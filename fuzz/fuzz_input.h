// What the fuzz targets share: the input split into parts, and where the
// test data lies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <vector>

namespace lantern::fuzz {

// The input cut at each NUL byte into at most `n` parts (the last keeps any
// further NULs): a target that takes a grammar and a text to check against it
// reads "grammar\0text".
inline std::vector<std::string_view> parts(const uint8_t* data, size_t size, size_t n) {
    std::string_view rest(reinterpret_cast<const char*>(data), size);
    std::vector<std::string_view> out;
    while (out.size() + 1 < n) {
        const size_t cut = rest.find('\0');
        if (cut == std::string_view::npos) break;
        out.push_back(rest.substr(0, cut));
        rest.remove_prefix(cut + 1);
    }
    out.push_back(rest);
    out.resize(n);
    return out;
}

// ../shared/testdata beside the checkout (LANTERN_TESTDATA overrides), as
// the unit tests find it.
inline std::filesystem::path testdata_dir() {
    if (const char* env = std::getenv("LANTERN_TESTDATA")) return env;
    const char* src = std::getenv("LANTERN_SOURCE_DIR");
    return std::filesystem::path(src ? src : LANTERN_SOURCE_DIR).parent_path() / "shared" / "testdata";
}

}  // namespace lantern::fuzz
