"Chapter 3a, the ShapeTracker (nbs/03a_shapetracker.ipynb): `View.shrink` and `View.pad`."
from tinylit_learn.tasks import Task, case, expect

BUFFER = 24   # every view here reads a buffer of 24 elements holding 1..24, so a 0 read is padding


def read(view):
  "What a View shows of the buffer: element idx at offset + sum(idx*strides), 0 where the mask says padding."
  import numpy as np
  buf, out = np.arange(1, BUFFER + 1), np.zeros(view.shape, dtype=int)
  for idx in np.ndindex(*view.shape):
    if view.mask is not None and not all(lo <= i < hi for i, (lo, hi) in zip(idx, view.mask)): continue
    pos = view.offset + sum(i * st for i, st in zip(idx, view.strides))
    expect(0 <= pos < BUFFER, f"element {idx} reads position {pos}, outside the buffer of {BUFFER} (a wrong offset or mask)")
    out[idx] = buf[pos]
  return out


def views():
  "Views to move, made directly (View.create: chapter 3a), so no other task is needed to build them."
  from tinylit.shapetracker import View
  return {"a contiguous (4, 6) view": View.create((4, 6)),
          "a permuted view, shape (6, 4), strides (1, 6)": View.create((6, 4), (1, 6)),
          "a flipped view, (4, 6) with strides (-6, 1) and offset 18": View.create((4, 6), (-6, 1), 18),
          "a padded view, (5, 8) with a mask ((1, 5), (2, 8))": View.create((5, 8), (6, 1), -8, ((1, 5), (2, 8))),
          "a broadcast view, (3, 4) with strides (0, 1)": View.create((3, 4), (0, 1))}


def compare(what, got, want):
  import numpy as np
  expect(tuple(got.shape) == want.shape, f"{what}: expected shape {want.shape}, got {tuple(got.shape)}")
  seen = read(got)
  expect(np.array_equal(seen, want), f"{what}: expected to read\n{want}\ngot\n{seen}\n(0 is padding)")


def check_shrink():
  for name, view in views().items():
    shape = view.shape
    for arg in [tuple((0, s) for s in shape), ((1, shape[0] - 1), (2, shape[1])), ((0, 1), (shape[1] - 2, shape[1] - 1)),
                ((shape[0] - 2, shape[0]), (0, 0))]:
      with case(f"shrink{arg} of {name}"):
        compare("the shrunk view", view.shrink(arg), read(view)[tuple(slice(lo, hi) for lo, hi in arg)])
  from tinylit.shapetracker import View
  padded = View.create((5, 8), (6, 1), -8, ((1, 5), (2, 8)))
  with case("shrink((0, 1), (0, 2)) of a padded view: only padding is left"):
    compare("the shrunk view", padded.shrink(((0, 1), (0, 2))), read(padded)[0:1, 0:2])


def check_pad():
  import numpy as np
  for name, view in views().items():
    for arg in [((0, 0), (0, 0)), ((1, 2), (0, 1)), ((0, 0), (3, 0)), ((2, 2), (2, 2))]:
      with case(f"pad{arg} of {name}"):
        compare("the padded view", view.pad(arg), np.pad(read(view), arg))
  from tinylit.shapetracker import View
  inner = View.create((2, 3), (6, 1), 7)   # a shrink of (4, 6): rows 1-2, columns 1-3; its neighbours are data
  with case("pad((1, 1), (1, 1)) of a shrunk view (2, 3), offset 7: the padding must not read the neighbours"):
    compare("the padded view", inner.pad(((1, 1), (1, 1))), np.pad(read(inner), ((1, 1), (1, 1))))


TASKS = [
  Task("03a.1", "write View.shrink: keep lo <= idx < hi on each axis. A View reads element idx at offset + "
       "sum(idx[i]*strides[i]) where its mask allows (chapter 3a): a shrink moves the offset to the first kept element, "
       "keeps the strides, and moves the mask with the window (clipped to the new shape). Return View.create(...).",
       "the offset grows by sum(lo*stride); a mask (mlo, mhi) becomes (mlo-lo, mhi-lo), clipped to 0 and hi-lo.",
       check_shrink),
  Task("03a.2", "write View.pad: grow each axis by (before, after) elements that read as 0. Chapter 3a's idea: a pad is "
       "a shrink to negative bounds (-before, size+after) plus a mask over the old elements, combined with the old "
       "mask (padding stays padding). Padding nothing returns the view itself.",
       "offset - sum(before*stride); the mask on axis i is (before, before+size), intersected with the old mask "
       "shifted by before (smax, smin from chapter 3 work for ints too).",
       check_pad),
]
