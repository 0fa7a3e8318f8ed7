"Chapter 8, the runtime (nbs/08_runtime.ipynb): the caching allocator (`LRUAllocator`) and the compile cache on disk."
import os, tempfile
from pathlib import Path

from tinylit_learn.tasks import Task, case, expect


def counting_allocator(full_after: int | None = None):
  "An LRUAllocator over a device that counts what it hands out and takes back; it is full after `full_after` blocks."
  from tinylit.device import LRUAllocator
  class Device(LRUAllocator):
    def __init__(self):
      super().__init__()
      self.made, self.freed, self.live = [], [], 0
    def _alloc(self, nbytes):
      if full_after is not None and self.live >= full_after: raise MemoryError("the device is full")
      block = bytearray(nbytes)
      self.made.append(block)
      self.live += 1
      return block
    def _free(self, opaque, nbytes):
      self.freed.append(opaque)
      self.live -= 1
  return Device()


def check_lru():
  from tinylit.helpers import Context
  with case("two allocs of different sizes"):
    d = counting_allocator()
    a, b = d.alloc(16), d.alloc(32)
    expect(len(d.made) == 2 and a is not b and len(a) == 16 and len(b) == 32, f"expected two new blocks of 16 and 32 bytes, got {d.made}")
  with case("free a block, then alloc the same size"):
    d = counting_allocator()
    a = d.alloc(16)
    d.free(a, 16)
    expect(d.freed == [], "a freed block goes to the cache, not back to the device")
    expect(d.alloc(16) is a and len(d.made) == 1, "expected the freed block back, and no new block from the device")
  with case("free a block, then alloc another size"):
    d = counting_allocator()
    a = d.alloc(16)
    d.free(a, 16)
    b = d.alloc(8)
    expect(b is not a and len(d.made) == 2, "a block of 16 bytes can't serve 8: expected a new block")
  with case("free two blocks of one size, alloc three"):
    d = counting_allocator()
    a, b = d.alloc(16), d.alloc(16)
    d.free(a, 16)
    d.free(b, 16)
    got = [d.alloc(16) for _ in range(3)]
    expect({id(got[0]), id(got[1])} == {id(a), id(b)} and len(d.made) == 3, "expected both cached blocks back, then one new")
  with case("free_cache gives every cached block back to the device"):
    d = counting_allocator()
    blocks = [d.alloc(16), d.alloc(16), d.alloc(64)]
    for blk, n in zip(blocks, (16, 16, 64)): d.free(blk, n)
    d.free_cache()
    expect(sorted(map(id, d.freed)) == sorted(map(id, blocks)), f"expected the device to get back 3 blocks, it got {len(d.freed)}")
    again = d.alloc(16)
    expect(all(again is not blk for blk in blocks) and len(d.made) == 4, "after free_cache, an alloc must get a new block")
    d.free_cache()
    expect(len(d.freed) == 3, "free_cache twice must not give a block back twice")
  with case("a full device: alloc frees the cache and tries again"):
    d = counting_allocator(full_after=2)
    a, b = d.alloc(16), d.alloc(16)
    d.free(a, 16)
    d.free(b, 16)
    c = d.alloc(64)
    expect(len(c) == 64 and len(d.freed) == 2, "expected the two cached blocks given back, then a block of 64 bytes")
  with case("with LRU=0 a freed block goes back to the device at once"):
    d = counting_allocator()
    a = d.alloc(16)
    with Context(LRU=0):
      d.free(a, 16)
    expect(d.freed == [a], "expected the device to get the block back")
    expect(d.alloc(16) is not a, "expected a new block: nothing was cached")


def counting_compiler(key: str | None = "test"):
  from tinylit.device import Compiler
  class Counting(Compiler):
    cachekey = key
    def __init__(self): self.calls = []
    def compile(self, src: str) -> bytes:
      self.calls.append(src)
      return ("binary of " + src).encode()
  return Counting()


def check_compile_cached():
  with tempfile.TemporaryDirectory() as tmp:
    old = os.environ.get("TINYLIT_CACHE")
    os.environ["TINYLIT_CACHE"] = str(Path(tmp) / "cache")   # cache_dir() (chapter 8c) reads it at each call
    try:
      _check_compile_cached(Path(tmp) / "cache")
    finally:
      if old is None: os.environ.pop("TINYLIT_CACHE")
      else: os.environ["TINYLIT_CACHE"] = old


def _check_compile_cached(cache: Path):
  with case("compile a source, then the same source again (a new compiler, as in a new process)"):
    c1, c2 = counting_compiler(), counting_compiler()
    expect(c1.compile_cached("int a;") == b"binary of int a;", "expected the compiler's binary")
    expect(c2.compile_cached("int a;") == b"binary of int a;" and c2.calls == [], "the second time, the binary comes from the disk")
  with case("another source"):
    c = counting_compiler()
    expect(c.compile_cached("int b;") == b"binary of int b;" and c.calls == ["int b;"], "a new source must be compiled")
  with case("the same source, another compiler (another cachekey)"):
    other = counting_compiler("other")
    other.compile_cached("int a;")
    expect(other.calls == ["int a;"], "another compiler's binaries are not this one's: expected a compile")
  with case("a compiler without a cachekey"):
    c = counting_compiler(None)
    c.compile_cached("int a;")
    c.compile_cached("int a;")
    expect(len(c.calls) == 2, "cachekey None means no cache: expected a compile each time")
  with case("DISABLE_COMPILER_CACHE=1"):
    from tinylit.helpers import getenv
    os.environ["DISABLE_COMPILER_CACHE"] = "1"
    getenv.cache_clear()   # chapter 8c's getenv remembers what it read
    try:
      c = counting_compiler()
      c.compile_cached("int a;")
    finally:
      os.environ.pop("DISABLE_COMPILER_CACHE")
      getenv.cache_clear()
    expect(c.calls == ["int a;"], "with the cache disabled, expected a compile")
  with case("a damaged file in the cache"):
    files = sorted(cache.iterdir())
    expect(len(files) == 3, f"expected one file per (compiler, source) in the cache, found {len(files)}")
    for f in files: f.write_bytes(f.read_bytes()[:-3] + b"!!!")   # the binary's last bytes overwritten
    c = counting_compiler()
    expect(c.compile_cached("int a;") == b"binary of int a;" and c.calls == ["int a;"],
           "a file whose checksum doesn't match must be compiled again, never loaded")
    again = counting_compiler()
    expect(again.compile_cached("int a;") == b"binary of int a;" and again.calls == [], "...and written again, good this time")


TASKS = [
  Task("08.1", "write LRUAllocator's alloc, free and free_cache: freed blocks are kept by size (self.cache, a "
       "defaultdict(list)) and handed out again to the next alloc of that size; other allocs go to the device "
       "(super().alloc). If the device is full (RuntimeError or MemoryError), give the whole cache back and try once "
       "more. With the context variable LRU at 0 (chapter 8c's ContextVar), free gives the block back at once.",
       "free_cache: super().free(block, nbytes) for every cached block, then empty the lists.", check_lru),
  Task("08.2", "write the compile cache: Compiler.compile_cached (the cached binary, else compile and keep it), and "
       "what it uses, which chapter 8's compile_async uses for a batch too: _cache_entry (the key, a sha256 of "
       "self.cachekey and the source, and the file in cache_dir(), chapter 8c, named by it), cache_get and cache_put. "
       "The file holds the key, a sha256 of the binary, then the binary, so that a damaged file (or another's at that "
       "name) is compiled again and rewritten, never loaded. No cachekey, or DISABLE_COMPILER_CACHE set: no cache.",
       "write to a temporary file in the cache folder, then os.replace it: concurrent runs never read half a file.",
       check_compile_cached),
]
