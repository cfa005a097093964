"""Simple encoders for the GGML k-quant formats (Q2_K .. Q6_K).

gguf-py (gguf.quants) can dequantize every k-quant but only quantize the
legacy types, so make_tiny_model.py uses these encoders to write k-quant test
models.  They are plain round-to-nearest with min/max (or abs-max) sub-block
scales -- not llama.cpp's optimised search -- but they produce valid blocks:
the layouts below are the inverse of gguf.quants' dequantize_blocks, and
test_reference.py checks the round trip through gguf.quants.dequantize.

All functions take float rows whose last dimension is a multiple of 256 and
return uint8 arrays of shape (..., n / 256 * type_size), ready for
GGUFWriter.add_tensor(..., raw_dtype=<type>).
"""
from __future__ import annotations

import numpy as np

QK_K = 256


def _blocks(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-1] % QK_K:
        raise ValueError(f"row size {x.shape[-1]} is not a multiple of {QK_K}")
    return x.reshape(-1, QK_K), x.shape


def _f16(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float16)


def _out(parts: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    blk = np.concatenate([p.reshape(p.shape[0], -1).view(np.uint8) for p in parts], axis=1)
    return blk.reshape(*shape[:-1], shape[-1] // QK_K * blk.shape[1])


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(b != 0, a / np.where(b != 0, b, 1), 0)


def _scale_min_quant(x: np.ndarray, sub: int, nlev: int, sbits: int):
    """Affine sub-block quantization shared by Q2_K/Q4_K/Q5_K.

    x: (nb, 256); returns d, dmin (f16 per block), sc, mn (ints per sub-block)
    and q (ints per element) with x ~= d*sc*q - dmin*mn."""
    nb = x.shape[0]
    xs = x.reshape(nb, -1, sub)
    lo = np.minimum(xs.min(axis=-1), 0.0)            # (nb, nsub)
    hi = xs.max(axis=-1)
    scale = (hi - lo) / nlev                          # >= 0
    mins = -lo                                        # >= 0
    smax = (1 << sbits) - 1
    d = _f16(scale.max(axis=-1) / smax)
    dmin = _f16(mins.max(axis=-1) / smax)
    df = d.astype(np.float32)[:, None]
    dmf = dmin.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_safe_div(scale, df)), 0, smax).astype(np.int32)
    mn = np.clip(np.rint(_safe_div(mins, dmf)), 0, smax).astype(np.int32)
    eff_scale = (df * sc)[..., None]
    eff_min = (dmf * mn)[..., None]
    q = np.clip(np.rint(_safe_div(xs + eff_min, eff_scale)), 0, nlev).astype(np.int32)
    return d, dmin, sc, mn, q.reshape(nb, QK_K)


def _pack_scales_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """8 six-bit scales + 8 six-bit mins -> 12 bytes (Q4_K / Q5_K layout)."""
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    for i in range(4):
        out[:, i] = (sc[:, i] & 63) | ((sc[:, 4 + i] >> 4) << 6)
        out[:, 4 + i] = (mn[:, i] & 63) | ((mn[:, 4 + i] >> 4) << 6)
        out[:, 8 + i] = (sc[:, 4 + i] & 15) | ((mn[:, 4 + i] & 15) << 4)
    return out


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    b, shape = _blocks(x)
    d, dmin, sc, mn, q = _scale_min_quant(b, 32, 15, 6)
    q = q.reshape(-1, 4, 2, 32)                       # chunk, nibble, lane
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).astype(np.uint8).reshape(-1, 128)
    return _out([d, dmin, _pack_scales_k4(sc, mn), qs], shape)


def quantize_q5_k(x: np.ndarray) -> np.ndarray:
    b, shape = _blocks(x)
    d, dmin, sc, mn, q = _scale_min_quant(b, 32, 31, 6)
    lo = q & 15
    hi = q >> 4                                       # 1 bit
    lo = lo.reshape(-1, 4, 2, 32)
    qs = (lo[:, :, 0, :] | (lo[:, :, 1, :] << 4)).astype(np.uint8).reshape(-1, 128)
    hi = hi.reshape(-1, 8, 32)                        # sub-block s -> bit s
    qh = np.zeros((b.shape[0], 32), dtype=np.uint8)
    for s in range(8):
        qh |= (hi[:, s, :] << s).astype(np.uint8)
    return _out([d, dmin, _pack_scales_k4(sc, mn), qh, qs], shape)


def quantize_q2_k(x: np.ndarray) -> np.ndarray:
    b, shape = _blocks(x)
    d, dmin, sc, mn, q = _scale_min_quant(b, 16, 3, 4)
    scales = (sc | (mn << 4)).astype(np.uint8)        # (nb, 16)
    q = q.reshape(-1, 2, 4, 32)                       # half, shift, lane
    qs = np.zeros((b.shape[0], 2, 32), dtype=np.uint8)
    for s in range(4):
        qs |= (q[:, :, s, :] << (2 * s)).astype(np.uint8)
    return _out([scales, qs.reshape(-1, 64), d, dmin], shape)


def quantize_q3_k(x: np.ndarray) -> np.ndarray:
    b, shape = _blocks(x)
    nb = b.shape[0]
    xs = b.reshape(nb, 16, 16)
    amax_i = np.argmax(np.abs(xs), axis=-1)
    vmax = np.take_along_axis(xs, amax_i[..., None], axis=-1)[..., 0]   # signed
    scale = -vmax / 4.0                               # q in [-4, 3]; extreme -> -4
    d = _f16(np.abs(scale).max(axis=-1) / 31.0)
    df = d.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_safe_div(scale, df)), -32, 31).astype(np.int32)
    eff = (df * sc)[..., None]
    q = np.clip(np.rint(_safe_div(xs, eff)), -4, 3).astype(np.int32).reshape(nb, QK_K)
    u = q + 4                                         # 0..7: low 2 bits + high bit
    ql = u & 3
    hbit = u >> 2                                     # 1 -> no offset (value = ql)
    # low bits: same layout as Q2_K
    qlr = ql.reshape(nb, 2, 4, 32)
    qs = np.zeros((nb, 2, 32), dtype=np.uint8)
    for s in range(4):
        qs |= (qlr[:, :, s, :] << (2 * s)).astype(np.uint8)
    # high bits: element e -> hmask byte e % 32, bit e // 32
    hb = hbit.reshape(nb, 8, 32)
    hmask = np.zeros((nb, 32), dtype=np.uint8)
    for bit in range(8):
        hmask |= (hb[:, bit, :] << bit).astype(np.uint8)
    # 16 six-bit scales stored as (scale + 32)
    us = (sc + 32).astype(np.int32)
    packed = np.zeros((nb, 12), dtype=np.uint8)
    for k in range(16):
        packed[:, k % 8] |= ((us[:, k] & 15) << (4 * (k // 8))).astype(np.uint8)
        packed[:, 8 + (k % 4)] |= (((us[:, k] >> 4) & 3) << (2 * (k // 4))).astype(np.uint8)
    return _out([hmask, qs.reshape(nb, 64), packed, d], shape)


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    b, shape = _blocks(x)
    nb = b.shape[0]
    xs = b.reshape(nb, 16, 16)
    amax_i = np.argmax(np.abs(xs), axis=-1)
    vmax = np.take_along_axis(xs, amax_i[..., None], axis=-1)[..., 0]
    scale = -vmax / 32.0                              # q in [-32, 31]; extreme -> -32
    d = _f16(np.abs(scale).max(axis=-1) / 127.0)
    df = d.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_safe_div(scale, df)), -128, 127).astype(np.int32)
    eff = (df * sc)[..., None]
    q = (np.clip(np.rint(_safe_div(xs, eff)), -32, 31).astype(np.int32) + 32).reshape(nb, QK_K)
    lo = q & 15
    hi = q >> 4
    # element e: g = e // 32, l = e % 32, h = g // 4, nib = (g % 4) // 2, half = g % 2
    lo = lo.reshape(nb, 2, 2, 2, 32)                  # h, nib, half, l
    ql = (lo[:, :, 0, :, :] | (lo[:, :, 1, :, :] << 4)).astype(np.uint8).reshape(nb, 128)
    hi = hi.reshape(nb, 2, 4, 32)                     # h, shift index, l
    qh = np.zeros((nb, 2, 32), dtype=np.uint8)
    for s in range(4):
        qh |= (hi[:, :, s, :] << (2 * s)).astype(np.uint8)
    return _out([ql, qh.reshape(nb, 64), sc.astype(np.int8), d], shape)


ENCODERS = {
    "Q2_K": quantize_q2_k,
    "Q3_K": quantize_q3_k,
    "Q4_K": quantize_q4_k,
    "Q5_K": quantize_q5_k,
    "Q6_K": quantize_q6_k,
}
