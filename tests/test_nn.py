"""nn layers, losses, optimizers and state against torch (CPU wheel); safetensors files against the safetensors library."""
import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinylit import Tensor, nn
from tinylit.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save
from test_ops import kernels_bind_many_buffers

from devices import DEVICES
rng = np.random.default_rng(0)

def close(a, b, atol=1e-5, rtol=1e-4): np.testing.assert_allclose(a, b, atol=atol, rtol=rtol)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", [{}, {"stride": 2}, {"padding": 1}, {"dilation": 2, "padding": 2}, {"groups": 2, "padding": (1, 0)}])
def test_conv2d(device, kw):
  g = kw.get("groups", 1)
  x, w, b = (rng.standard_normal((2, 4, 7, 7), dtype=np.float32), rng.standard_normal((6, 4 // g, 3, 3), dtype=np.float32),
             rng.standard_normal(6, dtype=np.float32))
  tx, tw, tb = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
  lx, lw, lb = [Tensor(v, device=device, requires_grad=True) for v in (x, w, b)]
  ref, out = torch.nn.functional.conv2d(tx, tw, tb, **kw), lx.conv2d(lw, lb, **kw)
  close(out.numpy(), ref.detach().numpy(), atol=1e-4)
  ref.sum().backward(); out.sum().backward()
  for t, l in [(tx, lx), (tw, lw), (tb, lb)]: close(l.grad.numpy(), t.grad.numpy(), atol=1e-3)

@pytest.mark.parametrize("device", DEVICES)
def test_pools(device):
  x = rng.standard_normal((2, 3, 6, 6), dtype=np.float32)
  tx, lx = torch.tensor(x, requires_grad=True), Tensor(x, device=device, requires_grad=True)
  ref, out = torch.nn.functional.max_pool2d(tx, 2) + torch.nn.functional.avg_pool2d(tx, 3, 1, 1, count_include_pad=True).sum(), \
             lx.max_pool2d() + lx.avg_pool2d(3, 1, padding=1).sum()
  close(out.numpy(), ref.detach().numpy())
  ref.sum().backward(); out.sum().backward()
  close(lx.grad.numpy(), tx.grad.numpy(), atol=1e-4)

@pytest.mark.parametrize("device", DEVICES)
def test_losses(device):
  logits, labels = rng.standard_normal((6, 5), dtype=np.float32), np.array([0, 4, 2, 2, 1, 3])
  tl, ll = torch.tensor(logits, requires_grad=True), Tensor(logits, device=device, requires_grad=True)
  ref = torch.nn.functional.cross_entropy(tl, torch.tensor(labels), label_smoothing=0.1)
  out = ll.sparse_categorical_crossentropy(Tensor(labels, device=device), label_smoothing=0.1)
  close(out.numpy(), ref.detach().numpy())
  ref.backward(); out.backward(); close(ll.grad.numpy(), tl.grad.numpy())
  probs, targets = rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32), rng.integers(0, 2, (4, 3)).astype(np.float32)
  close(Tensor(probs, device=device).binary_crossentropy(Tensor(targets, device=device)).numpy(),
        torch.nn.functional.binary_cross_entropy(torch.tensor(probs), torch.tensor(targets)).numpy())
  close(Tensor(logits, device=device).binary_crossentropy_logits(Tensor((logits > 0).astype(np.float32), device=device)).numpy(),
        torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(logits), torch.tensor((logits > 0).astype(np.float32))).numpy())

@pytest.mark.parametrize("device", DEVICES)
def test_layers_match_torch(device):
  Tensor.manual_seed(0)
  x = rng.standard_normal((4, 3, 5, 5), dtype=np.float32)
  lin, conv = nn.Linear(5, 2), nn.Conv2d(3, 4, 3, padding=1)
  tlin, tconv = torch.nn.Linear(5, 2), torch.nn.Conv2d(3, 4, 3, padding=1)
  with torch.no_grad():
    tlin.weight[:], tlin.bias[:] = torch.tensor(lin.weight.numpy()), torch.tensor(lin.bias.numpy())
    tconv.weight[:], tconv.bias[:] = torch.tensor(conv.weight.numpy()), torch.tensor(conv.bias.numpy())
  for t in get_parameters([lin, conv]): t.to_(device)
  close(lin(Tensor(x, device=device)).numpy(), tlin(torch.tensor(x)).detach().numpy())
  close(conv(Tensor(x, device=device)).numpy(), tconv(torch.tensor(x)).detach().numpy(), atol=1e-4)
  ln, tln = nn.LayerNorm(5), torch.nn.LayerNorm(5)
  for t in get_parameters(ln): t.to_(device)
  close(ln(Tensor(x, device=device)).numpy(), tln(torch.tensor(x)).detach().numpy(), atol=1e-4)
  bn, tbn = nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
  for t in get_state_dict(bn).values(): t.to_(device)
  with Tensor.train(): out = bn(Tensor(x, device=device)).numpy()
  close(out, tbn(torch.tensor(x)).detach().numpy(), atol=1e-4)
  close(bn.running_mean.numpy(), tbn.running_mean.numpy()); close(bn.running_var.numpy(), tbn.running_var.numpy())
  close(bn(Tensor(x, device=device)).numpy(), tbn.eval()(torch.tensor(x)).detach().numpy(), atol=1e-4)
  emb = nn.Embedding(7, 3)
  emb.weight.to_(device)
  idx = np.array([[1, 6], [0, 0]])
  close(emb(Tensor(idx, device=device)).numpy(), emb.weight.numpy()[idx])

@pytest.mark.parametrize("name", ["sgd", "sgd_momentum", "nesterov_wd", "adam", "adamw"])
@Tensor.train()   # Optimizer.step needs training mode, as tinygrad's asserts
def test_optimizers_match_torch(name):
  w0 = rng.standard_normal((3, 4), dtype=np.float32)
  x = rng.standard_normal((5, 3), dtype=np.float32)
  tw, lw = torch.tensor(w0, requires_grad=True), Tensor(w0, requires_grad=True)
  make = {"sgd": (lambda p: torch.optim.SGD(p, lr=0.1), lambda p: nn.optim.SGD(p, lr=0.1)),
          "sgd_momentum": (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), lambda p: nn.optim.SGD(p, lr=0.1, momentum=0.9)),
          "nesterov_wd": (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                          lambda p: nn.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
          "adam": (lambda p: torch.optim.Adam(p, lr=0.01), lambda p: nn.optim.Adam(p, lr=0.01)),
          "adamw": (lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1), lambda p: nn.optim.AdamW(p, lr=0.01, weight_decay=0.1))}[name]
  topt, lopt = make[0]([tw]), make[1]([lw])
  for _ in range(4):
    topt.zero_grad(); (torch.tensor(x) @ tw).tanh().sum().backward(); topt.step()
    lopt.zero_grad(); (Tensor(x) @ lw).tanh().sum().backward(); lopt.step()
  close(lw.numpy(), tw.detach().numpy(), atol=1e-5)

@pytest.mark.parametrize("device", DEVICES)
@Tensor.train()
def test_loss_realized_with_schedule_step_matches_torch(device):
  "tinygrad's llm.c step, `loss.realize(*opt.schedule_step())`: the loss and the updates of two parameters, as torch's."
  w0, v0 = rng.standard_normal((3, 4), dtype=np.float32), rng.standard_normal((4,), dtype=np.float32)
  x = rng.standard_normal((5, 3), dtype=np.float32)
  tw, tv = torch.tensor(w0, requires_grad=True), torch.tensor(v0, requires_grad=True)
  lw, lv = Tensor(w0, requires_grad=True, device=device), Tensor(v0, requires_grad=True, device=device)
  topt, lopt = torch.optim.AdamW([tw, tv], lr=0.01), nn.optim.AdamW([lw, lv], lr=0.01)
  for _ in range(3):
    topt.zero_grad(); tloss = ((torch.tensor(x) @ tw) * tv).tanh().sum(); tloss.backward(); topt.step()
    lopt.zero_grad(); lloss = ((Tensor(x, device=device) @ lw) * lv).tanh().sum(); lloss.backward()
    lloss.realize(*lopt.schedule_step())
    close(lloss.numpy(), tloss.item(), atol=1e-5)
  close(lw.numpy(), tw.detach().numpy(), atol=1e-5); close(lv.numpy(), tv.detach().numpy(), atol=1e-5)

def test_safetensors_roundtrip(tmp_path):
  st = pytest.importorskip("safetensors.numpy")
  tensors = {"a": Tensor(rng.standard_normal((2, 3), dtype=np.float32)), "b.c": Tensor(np.arange(5, dtype=np.int64)),
             "h": Tensor([1.5, -2.0]).half(), "flag": Tensor([True, False])}
  path = str(tmp_path / "x.safetensors")
  safe_save(tensors, path)
  theirs = st.load_file(path)
  for k, v in tensors.items(): np.testing.assert_array_equal(theirs[k], v.numpy())
  st.save_file({"w": np.ones((2, 2), dtype=np.float32)}, str(tmp_path / "y.safetensors"))
  np.testing.assert_array_equal(safe_load(str(tmp_path / "y.safetensors"))["w"].numpy(), np.ones((2, 2)))
  ours = safe_load(path)
  for k, v in tensors.items(): assert ours[k].dtype == v.dtype and np.array_equal(ours[k].numpy(), v.numpy())

def test_load_state_dict_checks():
  model = [nn.Linear(2, 3)]
  with pytest.raises(KeyError, match="missing"): load_state_dict(model, {})
  with pytest.raises(ValueError, match="0.bias"): load_state_dict(model, {"0.weight": Tensor.ones(3, 2), "0.bias": Tensor.ones(4)})

@Tensor.train()   # Optimizer.step needs training mode, as tinygrad's asserts
def test_optimizer_gradient_aliasing_a_parameter():
  "d(a*b)/da is b's own buffer; the update of a must not change what b's update reads."
  a, b = Tensor([2.0], requires_grad=True), Tensor([3.0], requires_grad=True)
  opt = nn.optim.SGD([a, b], lr=0.1)
  (a * b).sum().backward()
  opt.step()
  close(a.numpy(), [2.0 - 0.1 * 3.0]); close(b.numpy(), [3.0 - 0.1 * 2.0])

def test_clone_is_new_memory_with_the_graph():
  t = Tensor([1.0, 2.0]).realize()
  c = t.clone()
  assert c.lazydata.base.buffer is not t.lazydata.base.buffer
  np.testing.assert_array_equal(c.numpy(), [1.0, 2.0])
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x * 3).clone().sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])

# ---- the layers of tinygrad v0.10's nn that chapter 10 added: against torch, forward and backward
def _copy_into(torch_module, ours, names):
  with torch.no_grad():
    for name in names:
      val = getattr(ours, name)
      if val is not None: getattr(torch_module, name)[:] = torch.tensor(val.numpy())

def _params_grads(module, names): return [getattr(module, n) for n in names if getattr(module, n) is not None]

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["conv1d", "conv1d_same", "conv2d_same", "convt1d", "convt2d", "convt2d_groups", "groupnorm", "instancenorm",
                                  "layernorm2d", "rmsnorm", "groupnorm_noaffine"])
def test_new_layers_match_torch(device, case):
  Tensor.manual_seed(1)
  spec = {
    "conv1d": (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), lambda: torch.nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9), ["weight", "bias"]),
    "conv1d_same": (lambda: nn.Conv1d(3, 4, 4, padding="same", dilation=2), lambda: torch.nn.Conv1d(3, 4, 4, padding="same", dilation=2),
                    (2, 3, 9), ["weight", "bias"]),
    "conv2d_same": (lambda: nn.Conv2d(2, 3, (3, 4), padding="same"), lambda: torch.nn.Conv2d(2, 3, (3, 4), padding="same"),
                    (1, 2, 6, 7), ["weight", "bias"]),
    "convt1d": (lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
                lambda: torch.nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), (2, 3, 5), ["weight", "bias"]),
    "convt2d": (lambda: nn.ConvTranspose2d(2, 3, 3, stride=2, dilation=2), lambda: torch.nn.ConvTranspose2d(2, 3, 3, stride=2, dilation=2),
                (1, 2, 4, 5), ["weight", "bias"]),
    "convt2d_groups": (lambda: nn.ConvTranspose2d(4, 6, (2, 3), groups=2, bias=False),
                       lambda: torch.nn.ConvTranspose2d(4, 6, (2, 3), groups=2, bias=False),
                       (2, 4, 3, 3), ["weight", "bias"]),
    "groupnorm": (lambda: nn.GroupNorm(2, 6), lambda: torch.nn.GroupNorm(2, 6), (3, 6, 4, 2), ["weight", "bias"]),
    "groupnorm_noaffine": (lambda: nn.GroupNorm(3, 6, affine=False), lambda: torch.nn.GroupNorm(3, 6, affine=False), (3, 6, 5), ["weight", "bias"]),
    "instancenorm": (lambda: nn.InstanceNorm(3), lambda: torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 5), ["weight", "bias"]),
    "layernorm2d": (lambda: nn.LayerNorm2d(3), lambda: torch.nn.LayerNorm(3), (2, 3, 4, 5), ["weight", "bias"]),
    "rmsnorm": (lambda: nn.RMSNorm(5), lambda: torch.nn.RMSNorm(5, eps=1e-6), (2, 3, 5), ["weight"]),
  }[case]
  ours, theirs, shape, names = spec[0](), spec[1](), spec[2], spec[3]
  _copy_into(theirs, ours, names)
  for t in _params_grads(ours, names): t.to_(device); t.requires_grad = True
  x = rng.standard_normal(shape).astype(np.float32) * 2 + 0.5
  tx, lx = torch.tensor(x, requires_grad=True), Tensor(x, device=device, requires_grad=True)
  tin = tx.permute(0, 2, 3, 1) if case == "layernorm2d" else tx
  tout = theirs(tin)
  if case == "layernorm2d": tout = tout.permute(0, 3, 1, 2)
  out = ours(lx)
  close(out.numpy(), tout.detach().numpy(), atol=1e-4)
  w = rng.standard_normal(tout.shape).astype(np.float32)
  (tout * torch.tensor(w)).sum().backward(); (out * Tensor(w, device=device)).sum().backward()
  close(lx.grad.numpy(), tx.grad.numpy(), atol=1e-3)
  for name in names:
    if getattr(ours, name) is not None: close(getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(), atol=1e-3)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
def test_lstmcell_matches_torch(device, bias):
  if not kernels_bind_many_buffers(device): pytest.xfail("the LSTM's backward has kernels of 12+ buffers: needs the renderer's buffer-order fix")
  Tensor.manual_seed(2)
  cell, tcell = nn.LSTMCell(3, 4, bias=bias), torch.nn.LSTMCell(3, 4, bias=bias)
  names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if bias else [])
  if bias: cell.bias_ih, cell.bias_hh = Tensor(rng.standard_normal(16).astype(np.float32)), Tensor(rng.standard_normal(16).astype(np.float32))
  _copy_into(tcell, cell, names)
  for n in names: getattr(cell, n).to_(device); getattr(cell, n).requires_grad = True
  seq = rng.standard_normal((3, 2, 3)).astype(np.float32)
  hc, thc = None, None
  for step in seq: hc, thc = cell(Tensor(step, device=device), hc), tcell(torch.tensor(step), thc)
  close(hc[0].numpy(), thc[0].detach().numpy()); close(hc[1].numpy(), thc[1].detach().numpy())
  (hc[0].sum() + hc[1].square().sum()).backward(); (thc[0].sum() + thc[1].square().sum()).backward()
  for n in names: close(getattr(cell, n).grad.numpy(), getattr(tcell, n).grad.numpy(), atol=1e-4)
  assert nn.BatchNorm3d is nn.BatchNorm2d is nn.BatchNorm

# ---- LARS and LAMB against numpy transcriptions of the published updates (with tinygrad's options). The reference
# replays our own gradients, so it checks the update rule; the gradients themselves are checked against torch elsewhere.
@Tensor.train()   # Optimizer.step needs training mode, as tinygrad's asserts
def _record_steps(opt, w, x, steps=4) -> list:
  grads = []
  for _ in range(steps):
    opt.zero_grad(); (Tensor(x) @ w).tanh().sum().backward()
    grads.append(w.grad.numpy().astype(np.float64)); opt.step()
  return grads

@pytest.mark.parametrize("kw", [dict(lr=0.1, momentum=0.9, wd=1e-4, nesterov=False, classic=True, tcoef=0.001),
                                dict(lr=0.05, momentum=0.9, wd=0.01, nesterov=True, classic=False, tcoef=0.02),
                                dict(lr=0.1, momentum=0.0, wd=0.0, nesterov=False, classic=True, tcoef=0.01)])
def test_lars_matches_reference(kw):
  w0, x = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
  lw = Tensor(w0, requires_grad=True)
  grads = _record_steps(nn.optim.LARS([lw], kw["lr"], kw["momentum"], kw["wd"], kw["nesterov"], kw["classic"], kw["tcoef"]), lw, x)
  w_ref, b = w0.astype(np.float64), 0.0
  for g in grads:
    wn, gn = np.linalg.norm(w_ref), np.linalg.norm(g)
    ratio = kw["tcoef"] * wn / (gn + kw["wd"] * wn) if kw["tcoef"] and wn > 0 and gn > 0 else 1.0
    step = g + kw["wd"] * w_ref
    if kw["classic"]: step = step * ratio * kw["lr"]
    if kw["momentum"]:
      b = kw["momentum"] * b + step
      step = step + kw["momentum"] * b if kw["nesterov"] else b
    if not kw["classic"]: step = step * ratio * kw["lr"]
    w_ref = w_ref - step
  close(lw.numpy(), w_ref, atol=1e-5)

@pytest.mark.parametrize("kw", [dict(lr=0.01, b1=0.9, b2=0.999, eps=1e-6, wd=0.0, adam=False),
                                dict(lr=0.02, b1=0.8, b2=0.99, eps=1e-6, wd=0.1, adam=False),
                                dict(lr=0.01, b1=0.9, b2=0.999, eps=1e-8, wd=0.05, adam=True)])
def test_lamb_matches_reference(kw):
  w0, x = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)
  lw = Tensor(w0, requires_grad=True)
  grads = _record_steps(nn.optim.LAMB([lw], kw["lr"], kw["b1"], kw["b2"], kw["eps"], kw["wd"], kw["adam"]), lw, x)
  w_ref, m, v = w0.astype(np.float64), 0.0, 0.0
  for t, g in enumerate(grads, 1):
    m, v = kw["b1"] * m + (1 - kw["b1"]) * g, kw["b2"] * v + (1 - kw["b2"]) * g * g
    up = (m / (1 - kw["b1"] ** t)) / (np.sqrt(v / (1 - kw["b2"] ** t)) + kw["eps"]) + kw["wd"] * w_ref
    wn, un = np.linalg.norm(w_ref), np.linalg.norm(up)
    w_ref = w_ref - kw["lr"] * (1.0 if kw["adam"] else wn / un) * up
  close(lw.numpy(), w_ref, atol=1e-5)

def test_sgd_and_adam_are_lars_and_lamb():
  w = Tensor([1.0], requires_grad=True)
  assert isinstance(nn.optim.SGD([w]), nn.optim.LARS) and nn.optim.SGD([w]).tcoef == 0
  assert isinstance(nn.optim.Adam([w]), nn.optim.LAMB) and nn.optim.Adam([w]).adam and nn.optim.AdamW([w], weight_decay=0.3).wd == 0.3

@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adamw", "lamb", "lars"])
@Tensor.train()   # Optimizer.step needs training mode, as tinygrad's asserts
def test_optimizers_on_half_parameters(name):
  "Half weights: updates computed in float32 and rounded once; the result follows the float32 run closely."
  make = {"sgd_momentum": lambda p: nn.optim.SGD(p, lr=0.05, momentum=0.9), "adam": lambda p: nn.optim.Adam(p, lr=0.01),
          "adamw": lambda p: nn.optim.AdamW(p, lr=0.01), "lamb": lambda p: nn.optim.LAMB(p, lr=0.01),
          "lars": lambda p: nn.optim.LARS(p, lr=0.1)}[name]
  w0, x = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32)
  results = {}
  for dt in ("float32", "float16"):
    w = Tensor(w0).cast(dt).contiguous().realize()
    w.requires_grad = True
    opt = make([w])
    for _ in range(5):
      opt.zero_grad(); (Tensor(x).cast(dt) @ w).float().tanh().sum().backward(); opt.step()
    assert w.dtype.name == ("half" if dt == "float16" else "float")
    results[dt] = w.float().numpy()
  close(results["float16"], results["float32"], atol=2e-2, rtol=1e-2)
  assert not np.allclose(results["float32"], w0)   # the weights did move

@Tensor.train()   # Optimizer.step needs training mode, as tinygrad's asserts
def test_step_refuses_parameters_without_gradient():
  a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0], requires_grad=True)
  for opt in [nn.optim.SGD([a, b], lr=0.1), nn.optim.Adam([a, b]), nn.optim.LAMB([a, b]), nn.optim.LARS([a, b])]:
    opt.zero_grad(); (a * a).sum().backward()
    with pytest.raises(AssertionError, match=r"parameter #1 \(1,\) dtypes.float32 has no gradient"): opt.step()
    with pytest.raises(RuntimeError): opt.step()
  np.testing.assert_array_equal(a.numpy(), [1.0, 2.0])   # nothing was written
