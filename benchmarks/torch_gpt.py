"""The GPT of chapter 12 (tinylit/models/gpt.py) written in torch, its module names matching tinylit's state dict so
that one model's weights load into the other; and its generation loop with a KV cache. The torch reference of
bench_gpt.py and bench_nanogpt.py. It imports torch alone, not tinylit: a process that runs only the torch side
(bench_nanogpt.py measures each side's peak memory in a process of its own) holds nothing of tinylit's.

`cfg` is anything with GPTConfig's fields (vocab_size, n_layers, n_heads, dim, max_context, norm_eps, head_dim)."""
import torch
import torch.nn.functional as TF


class TorchBlock(torch.nn.Module):
  def __init__(self, cfg):
    super().__init__()
    self.cfg = cfg
    self.ln_1, self.ln_2 = torch.nn.LayerNorm(cfg.dim, eps=cfg.norm_eps), torch.nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
    self.attn = torch.nn.Module()
    self.attn.c_attn, self.attn.c_proj = torch.nn.Linear(cfg.dim, 3 * cfg.dim), torch.nn.Linear(cfg.dim, cfg.dim)
    self.mlp = torch.nn.Module()
    self.mlp.c_fc, self.mlp.c_proj = torch.nn.Linear(cfg.dim, 4 * cfg.dim), torch.nn.Linear(4 * cfg.dim, cfg.dim)
  def attention(self, x, start_pos, cache):
    bsz, seqlen, dim = x.shape
    q, k, v = self.attn.c_attn(x).view(bsz, seqlen, 3, self.cfg.n_heads, self.cfg.head_dim).unbind(2)
    mask = None
    if cache is not None:
      cache[:, :, start_pos:start_pos + seqlen] = torch.stack([k, v])
      k, v = cache[0, :, :start_pos + seqlen], cache[1, :, :start_pos + seqlen]
      if seqlen > 1: mask = torch.ones(seqlen, start_pos + seqlen, dtype=torch.bool).tril(start_pos)
    out = TF.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                                          is_causal=cache is None)
    return self.attn.c_proj(out.transpose(1, 2).reshape(bsz, seqlen, dim))
  def forward(self, x, start_pos=0, cache=None):
    h = x + self.attention(self.ln_1(x), start_pos, cache)
    return h + self.mlp.c_proj(TF.gelu(self.mlp.c_fc(self.ln_2(h)), approximate="tanh"))


class TorchGPT(torch.nn.Module):
  def __init__(self, cfg):
    super().__init__()
    self.cfg = cfg
    self.wte, self.wpe = torch.nn.Embedding(cfg.vocab_size, cfg.dim), torch.nn.Embedding(cfg.max_context, cfg.dim)
    self.h = torch.nn.ModuleList([TorchBlock(cfg) for _ in range(cfg.n_layers)])
    self.ln_f = torch.nn.LayerNorm(cfg.dim, eps=cfg.norm_eps)
    self.lm_head = torch.nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
  def forward(self, tokens, start_pos=0, caches=None):
    x = self.wte(tokens) + self.wpe(torch.arange(start_pos, start_pos + tokens.shape[1]))
    for i, block in enumerate(self.h): x = block(x, start_pos, None if caches is None else caches[i])
    return self.lm_head(self.ln_f(x))


def torch_generate(model: TorchGPT, prompt: list[int], n: int, temperature: float, top_k: int) -> list[int]:
  "The same loop as tinylit's Generator: the prompt at 0, then one token per step through a KV cache."
  c = model.cfg
  caches = [torch.zeros(2, 1, c.max_context, c.n_heads, c.head_dim) for _ in range(c.n_layers)]
  out, start_pos, pending = list(prompt), 0, list(prompt)
  with torch.no_grad():
    for _ in range(n):
      if start_pos + len(pending) > c.max_context: start_pos, pending = 0, out[-(c.max_context // 2):]
      logits = model(torch.tensor([pending]), start_pos, caches)[:, -1, :] / temperature
      kth = logits.topk(top_k, dim=-1).values[:, -1:]
      token = int(torch.multinomial(logits.masked_fill(logits < kth, float("-inf")).softmax(-1), 1))
      start_pos, pending = start_pos + len(pending), [token]
      out.append(token)
  return out


def torch_uncached_generate(model: TorchGPT, prompt: list[int], n: int) -> list[int]:
  "No cache: the whole window again for every token (greedy, so that only the model's time counts)."
  out = list(prompt)
  with torch.no_grad():
    for _ in range(n): out.append(int(model(torch.tensor([out[-model.cfg.max_context:]]))[0, -1].argmax()))
  return out
