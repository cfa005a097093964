// How the GPU backends' op tests compare a case with the CPU backend.
#pragma once

#include <string>

#include "op_harness.h"

namespace lantern::test {

// Runs `c` on the CPU backend and on `gpu` (with `hints`) and expects the
// same outputs within the case's tolerance, no write outside them, and
// outputs that are not all zeros. `mode` names the run in failures.
//
// With weights the CPU multiplies against activations in blocks of 256
// (Q8_K: the K-quants, IQ4_XS) the two differ by design, the GPU kernels
// quantizing activations in blocks of 32: there both are measured against
// the float64 reference backend, and the GPU's result must be as close to
// it as the CPU's (or within the tolerance).
void expect_matches_cpu(OpCase& c, Backend& gpu, const std::string& mode, ComputeHints hints = {});

// The default model with every layer on `backend` and a KV cache of `type`
// (keys and values): the logits, teacher-forced over 12 steps, stay within
// the model tests' bounds of the CPU's with the same cache. `held`: the
// backend holds that type (the cache on the device); otherwise the cache
// lives in host memory and attention runs on the CPU. An f16 cache is
// always on the device.
void expect_cache_type_agrees(const std::string& backend, const std::string& type, bool held);

}  // namespace lantern::test
