"""Smoke test of tinylit as `pip install tinylit` gives it: `make dist` runs this in a fresh venv that holds the wheel
and what it depends on (numpy), nothing else.

On CPU and PYTHON: a small expression and its gradients against numpy, and a TinyJit function called until it
replays its kernels. CPU kernels are compiled afresh (an empty compile cache), so the system C compiler is used.
Then every command the wheel installs (settings.ini's console_scripts) must answer --help.
"""

import os
import subprocess
import sys
import tempfile
import time
from importlib.metadata import distribution
from pathlib import Path

import numpy as np
import tinylit
from tinylit import Tensor, TinyJit


def check_installed() -> str:
    "tinylit comes from this venv's site-packages, and its __version__ is the installed distribution's."
    where, dist = Path(tinylit.__file__).resolve().parent, distribution("tinylit")
    assert Path(sys.prefix).resolve() in where.parents, f"tinylit was imported from {where}, not from this venv ({sys.prefix})"
    assert tinylit.__version__ == dist.version, f"tinylit.__version__ is {tinylit.__version__}, the wheel's version {dist.version}"
    return f"tinylit {tinylit.__version__} from {where} (numpy {np.__version__}, Python {sys.version.split()[0]})"


def check_device(device: str) -> None:
    "relu(x @ w + b).sum() and its gradients, then a TinyJit function over 4 calls, against numpy."
    rng = np.random.default_rng(0)
    x_np, w_np, b_np = (rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4, 2), (2,)])
    x, w, b = (Tensor(a, device=device, requires_grad=True) for a in (x_np, w_np, b_np))
    loss = (x @ w + b).relu().sum()
    loss.backward()
    z = x_np @ w_np + b_np
    mask = (z > 0).astype(np.float32)
    np.testing.assert_allclose(loss.numpy(), np.maximum(z, 0).sum(), rtol=1e-5)
    for name, t, expected in [("x", x, mask @ w_np.T), ("w", w, x_np.T @ mask), ("b", b, mask.sum(0))]:
        np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-5, atol=1e-6, err_msg=f"d loss / d {name} on {device}")

    @TinyJit
    def layer(inp: Tensor) -> Tensor: return (inp @ w.detach()).tanh()

    for _ in range(4):
        inp = rng.standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_allclose(layer(Tensor(inp, device=device)).numpy(), np.tanh(inp @ w_np), rtol=1e-4, atol=1e-5)
    assert layer.jit_cache, f"TinyJit on {device} captured no kernels to replay"


def check_commands() -> list[str]:
    "Every console script the wheel installs answers --help (the learner track's tinylit-learn, once settings.ini lists it)."
    commands = sorted(ep.name for ep in distribution("tinylit").entry_points if ep.group == "console_scripts")
    for command in commands:
        proc = subprocess.run([str(Path(sys.executable).parent / command), "--help"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, f"{command} --help exited with {proc.returncode}:\n{proc.stdout}{proc.stderr}"
    return commands


def main() -> None:
    start = time.perf_counter()
    print(check_installed(), flush=True)
    with tempfile.TemporaryDirectory(prefix="tinylit-smoke-cache-") as cache:
        os.environ["TINYLIT_CACHE"] = cache  # tinylit reads it whenever a kernel compiles
        for device in ("CPU", "PYTHON"):
            st = time.perf_counter()
            check_device(device)
            print(f"  {device:6s}: expression, gradients, TinyJit: ok ({time.perf_counter() - st:.2f} s)", flush=True)
    commands = check_commands()
    print(f"  commands: {', '.join(f'{c} --help' for c in commands) + ': ok' if commands else 'the wheel installs none'}")
    print(f"smoke test passed in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
