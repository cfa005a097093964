// The fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput over
// every file of the directories (or files) named on the command line, so
// the corpus -- seeds, and each input that once crashed a target -- runs as
// a ctest test in every build. A crash or an escaping exception fails it.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_one(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "cannot read %s\n", path.c_str());
        return 1;
    }
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
        LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: uncaught %s\n", path.c_str(), e.what());
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    int failed = 0, ran = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path arg(argv[i]);
        std::vector<std::filesystem::path> files;
        if (std::filesystem::is_directory(arg)) {
            for (const auto& e : std::filesystem::directory_iterator(arg))
                if (e.is_regular_file()) files.push_back(e.path());
        } else {
            files.push_back(arg);
        }
        std::sort(files.begin(), files.end());
        for (const auto& f : files) {
            failed += run_one(f);
            ++ran;
        }
    }
    std::printf("%d inputs, %d failed\n", ran, failed);
    return ran == 0 || failed != 0 ? 1 : 0;
}
