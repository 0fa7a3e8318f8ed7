"""A pytest plugin for tests/test_cuda.py (`-p cuda_capture`): it records the AST of every kernel the tests it runs
compile, and at the end of the session renders each one for CUDA into the JSON file named by $CUDA_CAPTURE (a list
of {"name", "src"}), three ways: with the opts a GPU gets, with none, and with the GPU rules applied even to the
small kernels they would skip (so that workgroups, vectors and grouped reduces are rendered for every kind of
kernel the suite has)."""
import json, os

import tinylit.realize as realize
from tinylit.heuristic import _gpu_optimizations, hand_coded_optimizations
from tinylit.kernel import Kernel
from tinylit.renderer import CUDARenderer, ProgramSpec

_asts: dict = {}
_get_program = realize.get_program


def _capturing_get_program(ast, renderer, *args, **kwargs):
  _asts.setdefault(ast, None)
  return _get_program(ast, renderer, *args, **kwargs)


realize.get_program = _capturing_get_program


def pytest_sessionfinish(session, exitstatus):
  out = []
  for ast in _asts:
    specs = [_get_program(ast, CUDARenderer(), [])]   # no opts
    # the hand-coded opts (whatever NOOPT says), and the GPU rules applied even where the kernel is too small for them
    for k in (hand_coded_optimizations(Kernel(ast, CUDARenderer())), _gpu_optimizations(Kernel(ast, CUDARenderer()))):
      specs.append(ProgramSpec.from_uops(k.name, k.linearize(), k.opts, k.applied_opts))
    out += [{"name": spec.function_name, "src": spec.src} for spec in specs]
  with open(os.environ["CUDA_CAPTURE"], "w") as f: json.dump(out, f)
