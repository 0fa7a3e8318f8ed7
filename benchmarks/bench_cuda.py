"""Speed of tinylit's CUDA device against torch on the same GPU, in one run (the bars of the CUDA issue).

Each case is timed as a whole realize (launch, kernel, wait for the GPU), median of several repeats after a warm-up
that compiles the kernels. torch runs the same expression on the same GPU, with TF32 off, so that both do float32
arithmetic; without a CUDA build of torch, tinylit's times are printed alone. Without a GPU the script says why and
stops.

  python benchmarks/bench_cuda.py
  BEAM=2 python benchmarks/bench_cuda.py     # the kernels tuned by beam search on the GPU (chapter 6c)
"""
import argparse, statistics, time
import numpy as np
from tinylit import Tensor
from tinylit.device import Device
from tinylit.lazy import lazycache


def timeit(fn, sync, repeat: int) -> float:
  fn(); sync()   # warm-up: compile, allocate
  times = []
  for _ in range(repeat):
    st = time.perf_counter(); fn(); sync(); times.append(time.perf_counter() - st)
  return statistics.median(times)


def fresh(fn):
  "The lazy graph dedups: the same expression on the same inputs would return the result already computed."
  return lambda: (lazycache.clear(), fn())


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--repeat", type=int, default=10)
  args = ap.parse_args()
  try: gpu = Device["CUDA"]
  except RuntimeError as e:
    print(f"no CUDA device here: {e}")
    return
  try:
    import torch
    torch_gpu = torch.cuda.is_available()
  except ImportError: torch, torch_gpu = None, False
  if torch_gpu:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"GPU: {torch.cuda.get_device_name(0)} ({gpu.arch}); torch {torch.__version__}, TF32 off")
  else: print(f"GPU: {gpu.arch}; no CUDA build of torch here, so tinylit's times only")
  tsync = (lambda: torch.cuda.synchronize()) if torch_gpu else (lambda: None)
  print(f"{'case':40s} {'torch':>11s} {'tinylit':>11s} {'tinylit/torch':>14s}")

  def row(name: str, t_tl: float, t_torch: float | None, flops: float = 0) -> None:
    rate = f"  tinylit {flops / t_tl / 1e12:.2f} TFLOPS" + (f", torch {flops / t_torch / 1e12:.2f}" if t_torch else "") if flops else ""
    tt = f"{t_torch * 1e3:9.3f}ms" if t_torch else f"{'-':>11s}"
    ratio = f"{t_tl / t_torch:13.2f}x" if t_torch else f"{'-':>14s}"
    print(f"{name:40s} {tt} {t_tl * 1e3:9.3f}ms {ratio}{rate}", flush=True)

  rng = np.random.default_rng(0)
  n = 1 << 24
  a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
  ta, tb, tc = (Tensor(x, device="CUDA").realize() for x in (a, b, c))
  got = (((ta * tb + tc).relu() * 2) - ta).numpy()
  np.testing.assert_allclose(got, np.maximum(a * b + c, 0) * 2 - a, rtol=1e-6, atol=1e-6)
  t_tl = timeit(fresh(lambda: (((ta * tb + tc).relu() * 2) - ta).realize()), gpu.synchronize, args.repeat)
  if torch_gpu:
    xa, xb, xc = (torch.from_numpy(x).cuda() for x in (a, b, c))
    t_torch = timeit(lambda: (xa * xb + xc).relu() * 2 - xa, tsync, args.repeat)
  row("relu(a*b+c)*2-a, 16M floats", t_tl, t_torch if torch_gpu else None)
  np.testing.assert_allclose(ta.sum().numpy(), a.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
  row("sum of 16M floats", timeit(fresh(lambda: ta.sum().realize()), gpu.synchronize, args.repeat),
      timeit(lambda: xa.sum(), tsync, args.repeat) if torch_gpu else None)
  M = rng.standard_normal((4096, 4096)).astype(np.float32)
  tM = Tensor(M, device="CUDA").realize()
  xM = torch.from_numpy(M).cuda() if torch_gpu else None
  for axis in (0, 1):
    np.testing.assert_allclose(tM.sum(axis).numpy(), M.sum(axis), rtol=1e-3, atol=1e-2)
    row(f"(4096,4096) sum over axis {axis}", timeit(fresh(lambda axis=axis: tM.sum(axis).realize()), gpu.synchronize, args.repeat),
        timeit(lambda axis=axis: xM.sum(axis), tsync, args.repeat) if torch_gpu else None)
  for k in (1024, 4096):
    A, B = (rng.standard_normal((k, k)).astype(np.float32) for _ in range(2))
    tA, tB = Tensor(A, device="CUDA").realize(), Tensor(B, device="CUDA").realize()
    np.testing.assert_allclose((tA @ tB).numpy(), A @ B, rtol=1e-3, atol=1e-2 * np.sqrt(k))
    xA, xB = (torch.from_numpy(x).cuda() for x in (A, B)) if torch_gpu else (None, None)
    row(f"matmul {k}x{k} fp32", timeit(fresh(lambda tA=tA, tB=tB: (tA @ tB).realize()), gpu.synchronize, args.repeat),
        timeit(lambda xA=xA, xB=xB: xA @ xB, tsync, args.repeat) if torch_gpu else None, flops=2 * k**3)


if __name__ == "__main__": main()
