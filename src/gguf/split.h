// Models split across several GGUF files, as llama.cpp's gguf-split writes
// them: NAME-00001-of-00003.gguf, NAME-00002-of-00003.gguf, ... Each part is
// a GGUF file of its own holding some of the tensors; every part carries
// split.no (0-based), split.count and split.tensors.count (the tensors of
// all parts), and the first one the model's metadata.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace lantern::gguf {

// The file name of part i (0-based) of n, beside `first`, whose name must end
// in -00001-of-NNNNN.gguf.
std::string split_part_path(const std::string& first, int i, int n);

// The other parts of the model whose first part is `first`, opened and
// checked (none when it is not split). Throws Error(Format) when `first` is
// not the first part (naming the file to open instead), when a part's
// numbering disagrees, or when the parts' tensors do not add up to
// split.tensors.count; Error(Io) naming a part that cannot be opened.
std::vector<std::unique_ptr<File>> open_other_parts(const File& first);

}  // namespace lantern::gguf
