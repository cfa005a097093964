#include "lantern/error.h"

namespace lantern {

const char* error_code_name(ErrorCode code) {
    switch (code) {
        case ErrorCode::InvalidArgument: return "invalid argument";
        case ErrorCode::Io: return "I/O error";
        case ErrorCode::Format: return "format error";
        case ErrorCode::Unsupported: return "unsupported";
        case ErrorCode::Backend: return "backend error";
        case ErrorCode::OutOfMemory: return "out of memory";
        case ErrorCode::ContextFull: return "context full";
        case ErrorCode::Tokenizer: return "tokenizer error";
        case ErrorCode::Template: return "template error";
    }
    return "error";
}

}  // namespace lantern
