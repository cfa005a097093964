// One table per backend that both declares which ops it supports and
// dispatches them, so the two can never disagree.
//
//   const OpTable<MyRun> kOps = {
//       {Op::Add, supports_add, run_add},
//       {Op::MulMat, supports_mul_mat, run_mul_mat},
//   };
//   kOps.supports(node);       // op present and its predicate accepts node
//   kOps.find(node.op)->run    // the kernel
#pragma once

#include <array>
#include <initializer_list>

#include "graph/tensor.h"

namespace lantern {

template <class Run>
struct OpEntry {
    Op op = Op::None;
    bool (*accepts)(const Tensor& node) = nullptr;  // null: every node of this op
    Run run{};
};

template <class Run>
class OpTable {
public:
    OpTable(std::initializer_list<OpEntry<Run>> entries) {
        for (const OpEntry<Run>& e : entries) {
            slots_[static_cast<size_t>(e.op)] = e;
            present_[static_cast<size_t>(e.op)] = true;
        }
    }

    const OpEntry<Run>* find(Op op) const {
        const size_t i = static_cast<size_t>(op);
        return present_[i] ? &slots_[i] : nullptr;
    }

    bool supports(const Tensor& node) const {
        const OpEntry<Run>* e = find(node.op);
        return e != nullptr && (e->accepts == nullptr || e->accepts(node));
    }

private:
    std::array<OpEntry<Run>, static_cast<size_t>(Op::Count)> slots_{};
    std::array<bool, static_cast<size_t>(Op::Count)> present_{};
};

}  // namespace lantern
