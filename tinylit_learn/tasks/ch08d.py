"Chapter 8d, the PYTHON device (nbs/08d_python.ipynb): where a load or store touches memory, and BITCAST."
import numpy as np

from tinylit_learn.tasks import Task, case, expect


def program():
  "A PythonProgram without a listing: its address helpers need only its name."
  from tinylit.runtime.ops_python import PythonProgram
  p = PythonProgram.__new__(PythonProgram)
  p.name = "k"
  return p


def check_address():
  p = program()
  buf = np.zeros(8, np.float32)
  glob = (buf, False, 8, np.zeros(4, np.int64))
  with case("a scalar load by 4 lanes at [3, 0, 7, 1]"):
    got, idx, valid, size, start = p._address((glob, np.array([3, 0, 7, 1]), np.array([True] * 4)), 1, (4,))
    expect(got is buf and size == 8, "expected the buffer itself and its 8 elements")
    expect(idx.tolist() == [3, 0, 7, 1] and valid.tolist() == [True] * 4, f"got positions {idx.tolist()}, valid {valid.tolist()}")
    expect(np.all(start == 0) and np.shape(start) == (4,), "memory of the whole kernel: every lane starts at 0")
  with case("one position for every lane (a scalar index), 3 lanes"):
    _, idx, valid, _, _ = p._address((glob, np.int32(5), np.bool_(True)), 1, (3,))
    expect(idx.tolist() == [5, 5, 5] and valid.tolist() == [True] * 3, f"expected [5, 5, 5], got {idx.tolist()}")
  with case("a vector of 4 floats, 2 lanes at [0, 4]: consecutive elements"):
    _, idx, valid, _, _ = p._address((glob, np.array([0, 4]), np.array([True, False])), 4, (2,))
    expect(idx.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]], f"expected [[0, 1, 2, 3], [4, 5, 6, 7]], got {idx.tolist()}")
    expect(valid.tolist() == [[True] * 4, [False] * 4], f"a lane's validity holds for its whole vector, got {valid.tolist()}")
  with case("shared memory (DEFINE_LOCAL): 4 lanes in workgroups [0, 0, 1, 1], 2 elements each"):
    local = (np.zeros(4, np.float32), True, 2, np.array([0, 0, 1, 1]))
    _, idx, _, size, start = p._address((local, np.array([0, 1, 0, 1]), np.array([True] * 4)), 1, (4,))
    expect(size == 2 and idx.tolist() == [0, 1, 0, 1], "positions and size are within one workgroup's part")
    expect(start.tolist() == [0, 0, 2, 2], f"each lane's workgroup part starts at block * size: expected [0, 0, 2, 2], got {start.tolist()}")
  with case("_check: a valid lane out of bounds raises IndexError naming the access"):
    try:
      p._check("write", 8, np.array([2, 8, 3]), np.array([True, True, True]))
      raise AssertionError("expected an IndexError")
    except IndexError as e:
      expect("write out of bounds" in str(e) and "8" in str(e), f"the error should say 'write out of bounds' and the index, said: {e}")
  with case("_check: a negative index is out of bounds too"):
    try:
      p._check("read", 8, np.array([-1]), np.array([True]))
      raise AssertionError("expected an IndexError")
    except IndexError: pass
  with case("_check: an invalid lane (a masked load) may point anywhere"):
    p._check("read", 8, np.array([-1, 3, 99]), np.array([False, True, False]))


def check_bitcast():
  from tinylit.dtype import dtypes
  from tinylit.runtime.ops_python import PythonProgram
  bitcast = PythonProgram._bitcast
  with case("float32 [1.0, -2.0] as int32"):
    got = bitcast(np.array([1.0, -2.0], np.float32), dtypes.float32, dtypes.int32)
    expect(got.dtype == np.int32 and got.tolist() == [0x3F800000, -0x40000000], f"got {got!r}")
  with case("int32 as float32"):
    got = bitcast(np.array([0x40490FDB], np.int32), dtypes.int32, dtypes.float32)
    expect(got.dtype == np.float32 and abs(float(got[0]) - 3.1415927) < 1e-6, f"got {got!r}")
  with case("float16 1.0 as uint16"):
    got = bitcast(np.array([1.0], np.float16), dtypes.float16, dtypes.uint16)
    expect(got.tolist() == [0x3C00], f"got {got!r}")
  with case("bfloat16 values (held as float32) as uint16: their bits are the float32's top half"):
    got = bitcast(np.array([1.0, 3.140625], np.float32), dtypes.bfloat16, dtypes.uint16)
    expect(got.tolist() == [0x3F80, 0x4049], f"expected [16256, 16457], got {got.tolist()}")
  with case("uint16 bits as bfloat16: float32 values"):
    got = bitcast(np.array([0x3F80, 0xC049], np.uint16), dtypes.uint16, dtypes.bfloat16)
    expect(got.dtype == np.float32 and got.tolist() == [1.0, -3.140625], f"got {got!r}")
  with case("a bfloat16 signaling NaN keeps its bits (no rounding on the way)"):
    got = bitcast(np.array([0x7F81], np.uint16), dtypes.uint16, dtypes.bfloat16)
    back = bitcast(got, dtypes.bfloat16, dtypes.uint16)
    expect(back.tolist() == [0x7F81], f"0x7F81 came back as {hex(int(back[0]))}")


TASKS = [
  Task("08d.1", "write PythonProgram._address and _check: the positions a LOAD or STORE touches, one per lane (and, for a "
       "vector of `count` elements, `count` consecutive positions from the lane's index: shape lane_shape + (count,)), "
       "the validity broadcast alike, the buffer's size, and for shared memory (DEFINE_LOCAL) where each lane's "
       "workgroup part starts (block * size; 0 for a global buffer); then _check raises IndexError for a valid lane "
       "outside 0..size-1. Chapter 8d's 'Catching an out-of-bounds store' and 'Workgroups, shared memory and vectors'.",
       "np.broadcast_to makes a scalar index or validity one per lane; idx[..., None] + np.arange(count) spreads a vector.",
       check_address),
  Task("08d.2", "write PythonProgram._bitcast(x, src_dt, dt): the same bytes read as dt (numpy's .view). A bfloat16 is "
       "held as the float32 it is: its bits are the top 16 of the float32's, and bits read as bfloat16 come back as "
       "float32 values (dtype.np_storage and chapter 1a's bf16_to_float). Exactly, so a signaling NaN keeps its bits.",
       "for a bfloat16 source, take float32 bits >> 16 as uint16 (no astype to bfloat16: that would round).",
       check_bitcast),
]
