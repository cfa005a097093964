"""IQ4_NL and IQ4_XS files written by `lantern quantize`, read back by the
gguf Python package's own decoder (an implementation independent of ours):
the bytes must mean what the format says, not only what our dequantizer
thinks. Then the file runs. Skipped without the build's `lantern`."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = pathlib.Path(__file__).resolve().parents[2]
LANTERN = pathlib.Path(os.environ.get("LANTERN_BUILD_DIR", ROOT / "build")) / "bin" / "lantern"


@pytest.fixture(scope="module")
def tiny_f32(tmp_path_factory):
    if not LANTERN.exists():
        pytest.skip(f"needs {LANTERN}")
    path = tmp_path_factory.mktemp("iq4") / "tiny-f32.gguf"
    # --wide: rows of 256 and 512 values, so IQ4_XS's super-blocks fit.
    subprocess.run([sys.executable, str(ROOT / "tests" / "reference" / "make_tiny_model.py"), "llama", str(path),
                    "--wide"], check=True, capture_output=True)
    return path


@pytest.mark.parametrize("qtype", ["iq4_nl", "iq4_xs"])
def test_quantized_file_decodes_with_gguf_py(tiny_f32, qtype):
    out = tiny_f32.with_name(f"tiny-{qtype}.gguf")
    done = subprocess.run([str(LANTERN), "quantize", "-m", str(tiny_f32), "-o", str(out), "--type", qtype, "-t", "2"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    source = {t.name: t for t in GGUFReader(tiny_f32).tensors}
    checked = 0
    for t in GGUFReader(out).tensors:
        if t.tensor_type.name != qtype.upper():
            continue
        y = dequantize(t.data, t.tensor_type).reshape(-1)
        x = np.asarray(source[t.name].data, dtype=np.float32).reshape(-1)
        rel = float(np.sqrt(np.mean((y - x) ** 2) / np.mean(x ** 2)))
        assert rel < 0.1, (t.name, rel)
        checked += 1
    assert checked >= 7, checked  # every layer matrix, at least
    # A tiny random model's text is any bytes: not decoded.
    run = subprocess.run([str(LANTERN), "run", "-m", str(out), "-n", "8", "--temp", "0", "-t", "2", "-p", "Once upon"],
                         capture_output=True)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
