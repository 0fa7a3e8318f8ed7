"""nn layers, losses, optimizers and state against torch (CPU wheel); safetensors files against the safetensors library."""
import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinylit import Tensor, nn
from tinylit.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save

DEVICES = ["CPU", "PYTHON"]
rng = np.random.default_rng(0)

def close(a, b, atol=1e-5, rtol=1e-4): np.testing.assert_allclose(a, b, atol=atol, rtol=rtol)

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", [{}, {"stride": 2}, {"padding": 1}, {"dilation": 2, "padding": 2}, {"groups": 2, "padding": (1, 0)}])
def test_conv2d(device, kw):
  g = kw.get("groups", 1)
  x, w, b = rng.standard_normal((2, 4, 7, 7), dtype=np.float32), rng.standard_normal((6, 4 // g, 3, 3), dtype=np.float32), rng.standard_normal(6, dtype=np.float32)
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
