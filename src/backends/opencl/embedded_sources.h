// Text files embedded into the binary at build time (the OpenCL C kernels of
// kernels/*.cl): see lantern_embed_sources in CMakeLists.txt.
#pragma once

#include <cstddef>
#include <string_view>

namespace lantern::ocl {

struct EmbeddedSource {
    const char* name;  // the file's stem: "matvec" for kernels/matvec.cl
    const char* text;
    size_t size;
};

extern const EmbeddedSource kEmbeddedSources[];
extern const size_t kEmbeddedSourceCount;

// The embedded file named `name`, or null.
inline const EmbeddedSource* find_embedded_source(std::string_view name) {
    for (size_t i = 0; i < kEmbeddedSourceCount; ++i) {
        if (name == kEmbeddedSources[i].name) return &kEmbeddedSources[i];
    }
    return nullptr;
}

}  // namespace lantern::ocl
