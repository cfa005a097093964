// Typed errors of the Lantern library.
//
// Library code never exits the process: every failure is an lantern::Error
// carrying a category and a message that names what was wrong and where
// (the file, the field, the tensor, the op). Front ends (CLI, server) print
// what() and choose their own exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace lantern {

enum class ErrorCode {
    InvalidArgument,  // a caller passed something out of range
    Io,               // open/read/mmap failed
    Format,           // a file is malformed (bad magic, overflowing counts, ...)
    Unsupported,      // well-formed but not handled (unknown tensor type, architecture)
    Backend,          // a device or driver call failed
    OutOfMemory,      // an allocation on a device failed
    ContextFull,      // the KV cache has no room for the tokens asked for
    Tokenizer,        // a vocabulary is inconsistent or text cannot be encoded
    Template,         // a chat template failed to parse or render
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
public:
    Error(ErrorCode code, const std::string& message)
        : std::runtime_error(message), code_(code) {}
    ErrorCode code() const noexcept { return code_; }

private:
    ErrorCode code_;
};

}  // namespace lantern
