"Chapter 4a, the memory planner (nbs/04a_memory.ipynb): blocks shared by lifetimes, and a schedule planned with them."
from tinylit_learn.tasks import Task, case, expect


def buffers(*sizes, device="CPU"):
  "Fresh Buffers of these byte sizes (float32s); none is allocated, and planning allocates nothing either."
  from tinylit.device import Buffer
  from tinylit.dtype import dtypes
  return [Buffer(device, n // 4, dtypes.float32) for n in sizes]


def check_planner():
  from tinylit.memory import internal_memory_planner
  def blocks(plan, bufs): return [plan[b].base if b in plan else None for b in bufs]
  with case("a chain: A read last at step 1, C first used at step 2 (and B, D likewise)"):
    A, B, C, D = buffers(64, 64, 64, 64)
    plan = internal_memory_planner([[A], [B, A], [C, B], [D, C]])
    a, b, c, d = blocks(plan, [A, B, C, D])
    expect(None not in (a, b, c, d), "expected every buffer planned (none is in noopt_buffers)")
    expect(a is c and b is d, "expected A and C in one block, B and D in another: their lifetimes don't overlap")
    expect(a is not b, "A and B are both used at step 1: they need two blocks")
    expect(all(plan[x].base is not x and plan[x].size == x.size and plan[x].dtype == x.dtype for x in (A, B, C, D)),
           "each planned buffer maps to a view of its block (Buffer(..., base=block)) with its own size and dtype")
    expect(a.nbytes == 64 and b.nbytes == 64, f"expected blocks of 64 bytes, got {a.nbytes} and {b.nbytes}")
  with case("a buffer read at step 1 and one first used at step 1 share no block"):
    A, B = buffers(64, 64)
    plan = internal_memory_planner([[A], [B, A]])
    expect(plan[A].base is not plan[B].base, "step 1 reads A while it writes B: they can't be one block")
  with case("noopt_buffers (outputs, inputs) are not planned"):
    A, B, C = buffers(64, 64, 64)
    plan = internal_memory_planner([[A], [B, A], [C, B]], noopt_buffers={C})
    expect(C not in plan and A in plan and B in plan, "expected A and B planned, C left alone")
  with case("a smaller buffer takes a free bigger block; a bigger one grows the largest free block"):
    A, B, C, D = buffers(256, 64, 32, 512)
    plan = internal_memory_planner([[A], [B, A], [C, B], [D, C]])
    expect(plan[C].base is plan[A].base and plan[A].base.nbytes >= 256, "C (32 bytes) fits in A's freed 256-byte block")
    expect(plan[D].base is plan[B].base and plan[B].base.nbytes == 512, "D (512 bytes): no free block fits, so the "
           "largest free one (B's) grows to 512")
  with case("the smallest free block that fits"):
    A, B, C, D = buffers(1024, 128, 64, 96)
    plan = internal_memory_planner([[A, B], [C, A, B], [D, C]])
    expect(plan[D].base is plan[B].base, "D (96 bytes) should take B's 128-byte block, the smallest one it fits in")
  with case("a view counts as its base: its lifetime spans every step that uses the base or a view of it"):
    from tinylit.device import Buffer
    A, B = buffers(64, 64)
    V = Buffer("CPU", 4, A.dtype, base=A)
    plan = internal_memory_planner([[A], [B], [V, B]])
    expect(plan[A].base is not plan[B].base, "A is used through its view at step 2, while B lives: two blocks")
    expect(plan[V].base is plan[A].base, "the view goes into its base's block")
  with case("buffers on two devices never share"):
    A, = buffers(64)
    B, = buffers(64, device="PYTHON")
    plan = internal_memory_planner([[A], [B]])
    expect(plan[A].base is not plan[B].base and plan[B].base.device == "PYTHON", "each device has its own blocks")


def check_memory_planner():
  from tinylit.helpers import Context
  from tinylit.memory import memory_planner
  from tinylit.ops import Ops, UOp
  from tinylit.schedule import ScheduleItem
  def items(*steps): return [ScheduleItem(UOp(Ops.EMPTY), tuple(bufs)) for bufs in steps]
  with case("a chain X -> T1 -> T2 -> O with the intermediates T1 and T2"):
    X, T1, T2, O = buffers(64, 64, 64, 64)
    sched = items([T1, X], [T2, T1], [O, T2])
    got = memory_planner(sched, {T1, T2})
    expect(isinstance(got, list) and len(got) == 3, f"expected a list of the 3 items, got {got!r}")
    expect([si.ast for si in got] == [si.ast for si in sched], "expected the same items, in the same order")
    expect(got[0].bufs[1] is X and got[2].bufs[0] is O, "X (an input) and O (the output) are not intermediates: left alone")
    t1, t2 = got[0].bufs[0], got[1].bufs[0]
    expect(t1 is not T1 and t1.base is not t1 and t1.size == T1.size, "T1 should be replaced by a view of a block")
    expect(got[1].bufs[1] is t1 and got[2].bufs[1] is t2, "each item should see the same view of an intermediate")
    expect(t1.base is not t2.base, "T1 and T2 are both used at step 1: two blocks")
  with case("no intermediates: the schedule as it is"):
    X, O = buffers(64, 64)
    sched = items([O, X])
    got = memory_planner(sched, set())
    expect([si.bufs for si in got] == [si.bufs for si in sched], "with no intermediates, no buffer changes")
  with case("NO_MEMORY_PLANNER=1 turns it off"):
    X, T, O = buffers(64, 64, 64)
    sched = items([T, X], [O, T])
    with Context(NO_MEMORY_PLANNER=1): got = memory_planner(sched, {T})
    expect([si.bufs for si in got] == [si.bufs for si in sched], "with NO_MEMORY_PLANNER=1, no buffer changes")


TASKS = [
  Task("04a.1", "write internal_memory_planner: a buffer's lifetime runs from the first step that uses it (or a view "
       "of it: count every buffer as its .base) to the last; walking the steps in order, every buffer first used at "
       "step i (biggest first) takes a block whose tenant's lifetime ended before step i: the smallest free block it "
       "fits in, else the largest free one grown, else a new block. Blocks never mix devices; noopt_buffers (and "
       "views of them) and empty buffers are not planned. Return {buffer: Buffer(b.device, b.size, b.dtype, base=its block)}, the blocks being uint8 "
       "Buffers of their final size. Chapter 4a's 'Blocks of memory' section walks through it.",
       "two passes: first and last use of every base, then the blocks, each a [device, nbytes, tenant] list.",
       check_planner),
  Task("04a.2", "write memory_planner: plan a schedule's intermediates `temps` with internal_memory_planner (every other "
       "buffer the items use goes in noopt_buffers, so it is left alone), and return the same items in the same order, "
       "each with its buffers replaced by their views (dataclasses.replace(si, bufs=...)). With no temps, or with "
       "NO_MEMORY_PLANNER, the schedule as it is. Chapter 4a's 'The planner' section.",
       "one call of internal_memory_planner over [si.bufs for si in schedule]; assigned.get(b, b) for each buffer.",
       check_memory_planner),
]
