"Chapter 1b, autograd's Functions (nbs/01b_function.ipynb): forward and backward of Mul, Div, Maximum and Sigmoid."
from tinylit_learn.tasks import Task, case, expect

X, Y, G = [2.0, -3.0, 0.5, 4.0], [4.0, 2.0, -8.0, 0.25], [1.0, 10.0, 100.0, -1.0]


def run(fn_class, needs, inputs, grad):
  "Forward on stand-in nodes, then backward of `grad`: (output, gradients)."
  from tinylit_learn.tasks.common import Needs, numpy_node_class
  Node = numpy_node_class()
  fn = fn_class("CPU", *[Needs(n) for n in needs])
  out = fn.forward(*[Node(v) for v in inputs])
  return out, fn.backward(Node(grad))


def check_grads(name, got, want):
  from tinylit_learn.tasks.common import close, show
  expect(isinstance(got, tuple) and len(got) == len(want), f"backward should return a tuple of {len(want)} gradients, got {got!r}")
  for i, (g, w) in enumerate(zip(got, want)):
    if w is None: expect(g is None, f"input {i} needs no gradient: expected None, got {show(g)}")
    else: expect(g is not None and close(g, w), f"gradient of input {i}: expected {show(w)}, got {show(g)}")


def tensors_agree(op, want_value, want_grads):
  "The same op through the whole stack (Tensor, lazy graph, kernels), on the CPU."
  import numpy as np
  from tinylit import Tensor
  from tinylit_learn.tasks.common import close, show
  a, b = Tensor(np.array(X, dtype=np.float32), requires_grad=True), Tensor(np.array(Y, dtype=np.float32), requires_grad=True)
  out = op(a, b)
  expect(close(out.numpy(), want_value, rtol=1e-5), f"value: expected {show(want_value)}, got {show(out.numpy())}")
  out.backward(Tensor(np.array(G, dtype=np.float32)))
  for t, w, n in ((a, want_grads[0], "a"), (b, want_grads[1], "b")):
    expect(close(t.grad.numpy(), w, rtol=1e-5), f"{n}.grad: expected {show(w)}, got {show(t.grad.numpy())}")


def check_mul_div():
  import numpy as np
  from tinylit.function import Div, Mul
  from tinylit_learn.tasks.common import close, show
  x, y, g = np.array(X), np.array(Y), np.array(G)
  with case("Mul.forward(x, y)"):
    out, _ = run(Mul, (True, True), (X, Y), G)
    expect(close(out, x * y), f"expected x*y = {show(x * y)}, got {show(out)}")
  with case("Mul.backward, both inputs need a gradient"):
    check_grads("Mul", run(Mul, (True, True), (X, Y), G)[1], (y * g, x * g))
  with case("Mul.backward, only the second input needs a gradient"):
    check_grads("Mul", run(Mul, (False, True), (X, Y), G)[1], (None, x * g))
  with case("Div.forward(x, y)"):
    out, _ = run(Div, (True, True), (X, Y), G)
    expect(close(out, x / y), f"expected x/y = {show(x / y)}, got {show(out)}")
  with case("Div.backward, both inputs need a gradient"):
    check_grads("Div", run(Div, (True, True), (X, Y), G)[1], (g / y, -g * x / y ** 2))
  with case("Div.backward, only the first input needs a gradient"):
    check_grads("Div", run(Div, (True, False), (X, Y), G)[1], (g / y, None))
  with case("a * b and a / b on Tensors, values and gradients"):
    tensors_agree(lambda a, b: a * b, x * y, (y * g, x * g))
    tensors_agree(lambda a, b: a / b, x / y, (g / y, -g * x / y ** 2))


def check_sigmoid_maximum():
  import numpy as np
  from tinylit.function import Maximum, Sigmoid
  from tinylit_learn.tasks.common import close, show
  xs = [-30.0, -1.0, 0.0, 2.0, 30.0]
  s, g = 1 / (1 + np.exp(-np.array(xs))), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
  with case("Sigmoid.forward of [-30, -1, 0, 2, 30]"):
    out, _ = run(Sigmoid, (True,), (xs,), g)
    expect(close(out, s), f"expected 1/(1+e^-x) = {show(s)}, got {show(out)}")
  with case("Sigmoid.backward"):
    _, grad = run(Sigmoid, (True,), (xs,), g)
    grad = grad[0] if isinstance(grad, tuple) else grad
    expect(close(grad, s * (1 - s) * g), f"expected sigmoid(x)*(1-sigmoid(x))*grad = {show(s * (1 - s) * g)}, got {show(grad)}")
  a, b, gm = [1.0, 5.0, 2.0, -1.0], [3.0, 2.0, 2.0, -4.0], np.array([1.0, 10.0, 100.0, 1000.0])
  with case("Maximum.forward([1, 5, 2, -1], [3, 2, 2, -4])"):
    out, _ = run(Maximum, (True, True), (a, b), gm)
    expect(close(out, np.maximum(a, b)), f"expected {show(np.maximum(a, b))}, got {show(out)}")
  with case("Maximum.backward where one side is larger"):
    _, grads = run(Maximum, (True, True), (a[:2] + a[3:], b[:2] + b[3:]), gm[[0, 1, 3]])
    check_grads("Maximum", grads, ([0.0, 10.0, 1000.0], [1.0, 0.0, 0.0]))
  with case("Maximum.backward at a tie (x == y: each side gets half)"):
    _, grads = run(Maximum, (True, True), ([2.0], [2.0]), [100.0])
    check_grads("Maximum", grads, ([50.0], [50.0]))
  with case("Maximum.backward, only the first input needs a gradient"):
    _, grads = run(Maximum, (True, False), (a, b), gm)
    expect(isinstance(grads, tuple) and len(grads) == 2 and grads[1] is None, f"expected (gradient, None), got {grads!r}")
  with case("a.sigmoid() and a.maximum(b) on Tensors, values and gradients"):
    x, y, gg = np.array(X), np.array(Y), np.array(G)
    sx = 1 / (1 + np.exp(-x))
    tensors_agree(lambda t, u: t.sigmoid() * u, sx * y, (sx * (1 - sx) * y * gg, sx * gg))
    tensors_agree(lambda t, u: t.maximum(u), np.maximum(x, y), (np.where(x > y, gg, 0), np.where(y > x, gg, 0)))


TASKS = [
  Task("01b.1", "write forward and backward of Mul and Div. forward computes the op on LazyBuffers (their operators: "
       "chapter 2) and keeps what backward needs on self; backward returns one gradient per input, None for an input "
       "that needs none (self.needs_input_grad, set by Function.__init__ from the inputs' requires_grad).",
       "d(x*y) = y dx + x dy; d(x/y) = dx/y - (x/y) dy/y, and x/y is forward's result.", check_mul_div),
  Task("01b.2", "write forward and backward of Sigmoid and Maximum. LazyBuffer has exp2 but no exp (chapter 1b "
       "writes exp(x) as exp2(x/ln 2)), reciprocal, maximum, comparisons (<, ne) and where. Maximum's gradient goes to "
       "the larger input; where x == y, each side gets half.",
       "sigmoid' = sigmoid*(1-sigmoid): keep forward's result on self. For the tie: where(), and a comparison that is true only where x == y.",
       check_sigmoid_maximum),
]
