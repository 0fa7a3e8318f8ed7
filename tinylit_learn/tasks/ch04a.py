"Chapter 4a, the memory planner (nbs/04a_memory.ipynb): blocks shared by lifetimes, and an order that frees memory early."
from collections import namedtuple

from tinylit_learn.tasks import Task, case, expect

# a stand-in for a ScheduleItem: `memory_order` asks only which buffers it writes and which it reads
Item = namedtuple("Item", "outputs inputs")


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
  with case("in place: step i's output may take an input's block if that input dies at step i"):
    A, B = buffers(64, 64)
    plan = internal_memory_planner([[A], [B, A]], inplace=[set(), {1}])
    expect(plan[A].base is plan[B].base, "B = f(A) elementwise, A read for the last time: one block")
  with case("buffers on two devices never share"):
    A, = buffers(64)
    B, = buffers(64, device="PYTHON")
    plan = internal_memory_planner([[A], [B]])
    expect(plan[A].base is not plan[B].base and plan[B].base.device == "PYTHON", "each device has its own blocks")


def check_order():
  from tinylit.memory import memory_order
  def order(items, temps): return [items.index(si) for si in memory_order(items, temps)]
  with case("one chain: nothing to choose"):
    X, T, O = buffers(64, 64, 64)
    items = [Item((T,), (X,)), Item((O,), (T,))]
    expect(order(items, {T}) == [0, 1], f"expected [0, 1], got {order(items, {T})}")
  with case("two independent chains: the ready item that frees the most, less what it allocates, goes first"):
    X, T1, T2, O1, O2 = buffers(64, 4096, 64, 64, 64)
    items = [Item((T1,), (X,)), Item((T2,), (X,)), Item((O1,), (T1,)), Item((O2,), (T2,))]
    # ready first: 0 (allocates 4096) and 1 (64): 1; then 0 and 3 (frees 64, allocates 64): 3; then 0, then 2
    got = order(items, {T1, T2})
    expect(got == [1, 3, 0, 2], f"expected [1, 3, 0, 2] (T1's 4096 bytes alive for one step only), got {got}")
  with case("equal sizes: a tie goes to the earlier item"):
    X, T1, T2, O1, O2 = buffers(64, 64, 64, 64, 64)
    items = [Item((T1,), (X,)), Item((T2,), (X,)), Item((O1,), (T1,)), Item((O2,), (T2,))]
    got = order(items, {T1, T2})
    expect(got == [0, 2, 1, 3], f"expected [0, 2, 1, 3] (0 and 1 tie; then 2 frees T1), got {got}")
  with case("a write after a read: the item that overwrites W runs after every item that reads W"):
    Z, W, T, O = buffers(4096, 64, 64, 64)
    # item 1 overwrites W (an assign) and frees the 4096 bytes of Z: the best gain, but item 0 reads W first
    items = [Item((T,), (W,)), Item((W,), (Z,)), Item((O,), (T,))]
    got = order(items, {T, Z})
    expect(got == [0, 1, 2], f"expected [0, 1, 2]: item 1 writes W, which item 0 reads, so it must come after it; got {got}")
  with case("a read after a write, and two writes of one buffer, keep their order"):
    X, W, O = buffers(64, 64, 64)
    items = [Item((W,), (X,)), Item((W,), (W,)), Item((O,), (W,))]
    got = order(items, set())
    expect(got == [0, 1, 2], f"expected [0, 1, 2], got {got}")


TASKS = [
  Task("04a.1", "write internal_memory_planner: a buffer's lifetime runs from the first step that uses it (or a view "
       "of it: count every buffer as its .base) to the last; walking the steps in order, every buffer first used at "
       "step i (biggest first) takes a block whose tenant's lifetime ended before step i (or, for the step's output, "
       "an input in `inplace[i]` that dies at step i): the smallest free block it fits in, else the largest free "
       "one grown, else a new block. Blocks never mix devices; noopt_buffers (and views of them) and empty buffers "
       "are not planned. Return {buffer: Buffer(b.device, b.size, b.dtype, base=its block)}, the blocks being uint8 "
       "Buffers of their final size. Chapter 4a's 'Blocks of memory' section walks through it.",
       "two passes: first and last use of every base, then the blocks, each a [device, nbytes, tenant] list.",
       check_planner),
  Task("04a.2", "write memory_order: the same items in an order that lets the intermediates `temps` go early. An item "
       "must run after the last earlier writer of every buffer it reads or writes, and a writer after every earlier "
       "reader of what it overwrites. Among the ready items, take the one whose gain is largest: the bytes of the "
       "temps it reads for the last time, less the bytes of the outputs it allocates (not b.is_allocated); on a tie, "
       "the earlier item. Chapter 4a's 'Order matters' section.",
       "count the dependencies of each item (a set per item), release the items waiting on the one you take, and keep a "
       "Counter of each temp's readers still to run.", check_order),
]
