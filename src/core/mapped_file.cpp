#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lantern/error.h"

namespace lantern {
namespace {

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
    throw Error(ErrorCode::Io, path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

MappedFile MappedFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open", errno);

    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail(path, "cannot stat", err);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(ErrorCode::Io, path + ": not a regular file");
    }

    MappedFile m;
    m.size_ = static_cast<size_t>(st.st_size);
    if (m.size_ > 0) {
        void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            fail(path, "cannot mmap", err);
        }
        m.data_ = static_cast<const uint8_t*>(p);
    }
    // The mapping keeps the file alive; the descriptor is no longer needed.
    ::close(fd);
    return m;
}

void MappedFile::drop_pages(const void* p, size_t n) const noexcept {
    const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + n;
    const auto map_begin = reinterpret_cast<uintptr_t>(data_), map_end = map_begin + size_;
    if (data_ == nullptr || begin < map_begin || end > map_end) return;
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
    // A read-only private mapping: dropping its pages loses nothing.
    if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        data_ = other.data_;
        size_ = other.size_;
        other.data_ = nullptr;
        other.size_ = 0;
    }
    return *this;
}

void MappedFile::release() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace lantern
