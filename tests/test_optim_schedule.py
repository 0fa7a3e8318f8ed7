"""Optimizer settings under TinyJit (chapter 10a): the learning rate is a Tensor, as tinygrad's, so a schedule that
changes it between replays changes the replayed step; the settings kept as Python numbers raise when set on an
optimizer whose step was captured, instead of replaying their old value."""
import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinylit import Tensor, TinyJit, nn
from tinylit.dtype import dtypes
from tinylit.jit import JitError
from tinylit.mixin import ArgumentError
from tinylit.nn.state import get_state_dict

from devices import DEVICES
rng = np.random.default_rng(0)

# a warm-up then a decay: every step another learning rate, so a replay of an old one shows
LRS = [0.02, 0.05, 0.1, 0.08, 0.03, 0.01, 0.06]
MAKE = {"sgd": (lambda p: torch.optim.SGD(p, lr=LRS[0]), lambda p: nn.optim.SGD(p, lr=LRS[0])),
        "sgd_nesterov_wd": (lambda p: torch.optim.SGD(p, lr=LRS[0], momentum=0.9, nesterov=True, weight_decay=0.01),
                            lambda p: nn.optim.SGD(p, lr=LRS[0], momentum=0.9, nesterov=True, weight_decay=0.01)),
        "adam": (lambda p: torch.optim.Adam(p, lr=LRS[0]), lambda p: nn.optim.Adam(p, lr=LRS[0])),
        "adamw": (lambda p: torch.optim.AdamW(p, lr=LRS[0], weight_decay=0.1), lambda p: nn.optim.AdamW(p, lr=LRS[0], weight_decay=0.1))}


def jitted_fit(device: str, name: str):
  "A weight and a bias, torch's copies of them, and a TinyJit-captured training step of tinylit's optimizer."
  w0, b0 = rng.standard_normal((3, 4), dtype=np.float32), rng.standard_normal((4,), dtype=np.float32)
  x, y = rng.standard_normal((5, 3), dtype=np.float32), rng.standard_normal((5, 4), dtype=np.float32)
  tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
  lw, lb = Tensor(w0, device=device, requires_grad=True), Tensor(b0, device=device, requires_grad=True)
  topt, opt = MAKE[name][0]([tw, tb]), MAKE[name][1]([lw, lb])
  @TinyJit
  def step(xs: Tensor, ys: Tensor) -> Tensor:
    with Tensor.train():
      opt.zero_grad()
      loss = ((xs @ lw + lb).tanh() - ys).square().mean()
      loss.backward()
      opt.step()
    return loss
  def torch_step(lr: float) -> float:
    for group in topt.param_groups: group["lr"] = lr
    topt.zero_grad()
    loss = ((torch.tensor(x) @ tw + tb).tanh() - torch.tensor(y)).square().mean()
    loss.backward(); topt.step()
    return loss.item()
  return opt, step, torch_step, (lw, lb), (tw, tb), (Tensor(x, device=device), Tensor(y, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(MAKE))
@pytest.mark.parametrize("how", ["assign", "set"])
def test_a_learning_rate_schedule_changes_the_replayed_step(device, name, how):
  "Call 1 runs, call 2 captures, calls 3+ replay: every step, with its own learning rate, matches torch's."
  opt, step, torch_step, ours, theirs, (x, y) = jitted_fit(device, name)
  assert isinstance(opt.lr, Tensor) and opt.lr.shape == (1,)
  for i, lr in enumerate(LRS):
    if how == "assign": opt.lr.assign(Tensor([lr], device=device))   # tinygrad's way (its lr schedulers do this)
    else: opt.lr = lr                                                 # a Python number: written into the same tensor
    np.testing.assert_allclose(opt.lr.numpy(), [lr], rtol=1e-7)
    loss, ref = step(x, y).item(), torch_step(lr)
    np.testing.assert_allclose(loss, ref, rtol=1e-4, atol=1e-6, err_msg=f"loss of step {i} (lr {lr})")
    for p, t in zip(ours, theirs):
      np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=f"step {i} (lr {lr})")
  assert len(step.jit_cache) > 0   # the steps after the second were replays


@pytest.mark.parametrize("device", DEVICES)
def test_a_schedule_computed_from_the_learning_rate_itself(device):
  "`opt.lr *= 0.5` (tinygrad's ReduceLROnPlateau) and `opt.lr = opt.lr * 2` write into the tensor the replays read."
  opt, step, torch_step, ours, theirs, (x, y) = jitted_fit(device, "sgd")
  lr_tensor, lr = opt.lr, LRS[0]
  for i in range(6):
    if i % 2: opt.lr *= 0.5; lr *= 0.5
    else: opt.lr = opt.lr * 2; lr *= 2
    assert opt.lr is lr_tensor   # the same tensor: its memory is what the captured kernels read
    step(x, y); torch_step(lr)
    np.testing.assert_allclose(ours[0].numpy(), theirs[0].detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=f"step {i}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, setting, value", [("sgd_nesterov_wd", "momentum", 0.5), ("sgd_nesterov_wd", "wd", 0.0),
                                                  ("adam", "b1", 0.5), ("adamw", "wd", 0.0), ("adam", "eps", 1e-3)])
def test_a_setting_baked_into_a_capture_raises(device, name, setting, value):
  "A setting kept as a Python number is a constant in the captured kernels: setting it after the capture raises."
  opt, step, torch_step, ours, theirs, (x, y) = jitted_fit(device, name)
  setattr(opt, setting, getattr(opt, setting))   # before any capture, a setting may change (the next step uses it)
  for _ in range(2): step(x, y); torch_step(LRS[0])
  with pytest.raises(JitError, match=rf"\.{setting}: .*captured by TinyJit.*opt\.lr\.assign"):
    setattr(opt, setting, value)
  # nothing changed: the replays still compute the step with the old value, as torch does
  for _ in range(2): step(x, y); torch_step(LRS[0])
  for p, t in zip(ours, theirs): np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)


@Tensor.train()
def test_a_setting_changed_before_a_capture_takes_effect():
  "Eager steps read the settings each time: a weight decay changed between them is used by the next one."
  w0 = np.array([1.0, -2.0], np.float32)
  lw, tw = Tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
  opt, topt = nn.optim.SGD([lw], lr=0.1, weight_decay=0.5), torch.optim.SGD([tw], lr=0.1, weight_decay=0.5)
  for wd in (0.5, 0.0, 0.2):
    opt.wd = wd; topt.param_groups[0]["weight_decay"] = wd
    opt.zero_grad(); (lw * lw).sum().backward(); opt.step()
    topt.zero_grad(); (tw * tw).sum().backward(); topt.step()
    np.testing.assert_allclose(lw.numpy(), tw.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@Tensor.train()
def test_the_learning_rate_tensor(device):
  "float32, on the parameters' device, in the optimizer's state dict (tinygrad's `lr`); a 0-d parameter still updates."
  scale = Tensor(2.0, device=device, requires_grad=True)   # a 0-d parameter: the (1,) learning rate must not reshape it
  opt = nn.optim.Adam([scale], lr=0.1)
  assert opt.lr.dtype == dtypes.float32 and opt.lr.device == device
  assert get_state_dict(opt)["lr"] is opt.lr
  (scale * scale).backward(); opt.step()
  assert scale.shape == () and abs(scale.item() - 1.9) < 1e-5   # Adam's first step moves by lr
  with pytest.raises(ArgumentError, match=r"shape \(\) doesn't match \(1,\)"): opt.lr.assign(0.5)   # as tinygrad's assign


@Tensor.train()
def test_an_optimizer_group_has_no_learning_rate_of_its_own():
  "As in tinygrad, each member has its own; setting one on the group would otherwise do nothing."
  a, b = Tensor([1.0], requires_grad=True), Tensor([2.0], requires_grad=True)
  group = nn.optim.OptimizerGroup(nn.optim.SGD([a], lr=0.1), nn.optim.Adam([b], lr=0.01))
  with pytest.raises(ArgumentError, match=r"group\[i\]\.lr"): group.lr = 0.5
  group[0].lr = 0.5
  group.zero_grad(); (a * a + b * b).sum().backward(); group.step()
  np.testing.assert_allclose(a.numpy(), [1.0 - 0.5 * 2.0], rtol=1e-6)


@Tensor.train()
def test_a_captured_group_freezes_its_members_settings():
  a, b = Tensor([1.0], requires_grad=True), Tensor([2.0], requires_grad=True)
  group = nn.optim.OptimizerGroup(nn.optim.SGD([a], lr=0.1, momentum=0.9), nn.optim.Adam([b], lr=0.01))
  @TinyJit
  def step() -> None:
    group.zero_grad(); (a * a + b * b).sum().backward(); group.step()
  for _ in range(3): step()
  with pytest.raises(JitError, match=r"LARS\.momentum"): group[0].momentum = 0.0
  with pytest.raises(JitError, match=r"LAMB\.b2"): group[1].b2 = 0.9
  group[1].lr = 0.0   # the learning rate still changes: b stops moving
  before = b.numpy()
  step()
  np.testing.assert_array_equal(b.numpy(), before)
