// A read-only memory mapping of a whole file, released on destruction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lantern {

class MappedFile {
public:
    MappedFile() = default;
    // Maps `path` read-only. Throws Error(Io) naming the path when it cannot be
    // opened, is not a regular file, or cannot be mapped. An empty file gives
    // an empty mapping (data() == nullptr, size() == 0).
    static MappedFile open(const std::string& path);

    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

    // Unmaps the whole pages of [p, p + n) (part of this mapping; anything
    // outside it is ignored) from the process: the file's pages stay in the
    // page cache, and a later read maps them again. For bytes the process has
    // copied elsewhere, so that it does not hold both.
    void drop_pages(const void* p, size_t n) const noexcept;

private:
    void release() noexcept;

    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace lantern
