#!/usr/bin/env python3
"""Writes a random LoRA adapter GGUF (llama.cpp's adapter format) for a base
model: general.type "adapter", adapter.type "lora", adapter.lora.alpha, and
NAME.lora_a [n_in, rank] / NAME.lora_b [rank, n_out] (GGUF order) for each
attention and FFN matrix and the output matrix of the base file.

    make_lora.py BASE.gguf OUT.gguf [--rank 4] [--alpha 8] [--seed 1]
"""
import argparse
import re

import numpy as np
from gguf import GGUFReader, GGUFWriter

ADAPTED = re.compile(r"(blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)|output)\.weight$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    base = GGUFReader(args.base)
    arch = bytes(base.fields["general.architecture"].parts[-1]).decode()
    rng = np.random.default_rng(args.seed)
    w = GGUFWriter(args.out, arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", args.alpha)
    for t in base.tensors:
        if not ADAPTED.match(t.name) or len(t.shape) != 2:
            continue
        n_in, n_out = int(t.shape[0]), int(t.shape[1])
        # numpy shapes are GGUF's reversed: A is rank rows of n_in.
        w.add_tensor(t.name + ".lora_a", rng.uniform(-0.3, 0.3, (args.rank, n_in)).astype(np.float32))
        w.add_tensor(t.name + ".lora_b", rng.uniform(-0.3, 0.3, (n_out, args.rank)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out} ({arch} adapter, rank {args.rank})")


if __name__ == "__main__":
    main()
