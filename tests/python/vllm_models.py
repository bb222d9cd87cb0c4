"""Small models written the way vLLM writes its loaders, for dcr.torch tests.

Each family holds serving parameters in vLLM's layout (fused QKV, merged
gate/up, stacked MoE experts) and loads Hugging Face-named checkpoint
tensors through load_weights with a stacked-parameter mapping (and an expert
mapping for MoE). Families:
  llama    BF16, fused qkv and gate_up, tied embeddings (lm_head skipped)
  moe      BF16, fused qkv, experts stacked into w13 [E, 2I, H] and w2 [E, H, I]
  fp32     FP32 serving copy of a BF16 checkpoint: every copy converts dtype,
           and o_proj is held transposed
  gemma    norms loaded as 1 + w (arithmetic the interception cannot map),
           embeddings written with param[...] = w (invisible to torch 1.13's
           function modes): both must fall back, the model must stay exact
The trainer's side (hf_forward) computes the same function from the
canonical tensors, so a training loop can produce real checkpoints.
"""

import math

import torch
import torch.nn as nn

V, H, KV, I, L, E = 64, 32, 16, 48, 2, 4
FAMILIES = ("llama", "moe", "fp32", "gemma")


def canonical_shapes(family):
    shapes = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    for i in range(L):
        p = "model.layers.%d." % i
        shapes[p + "input_layernorm.weight"] = (H,)
        shapes[p + "post_attention_layernorm.weight"] = (H,)
        shapes[p + "self_attn.q_proj.weight"] = (H, H)
        shapes[p + "self_attn.k_proj.weight"] = (KV, H)
        shapes[p + "self_attn.v_proj.weight"] = (KV, H)
        shapes[p + "self_attn.o_proj.weight"] = (H, H)
        if family == "moe":
            shapes[p + "mlp.gate.weight"] = (E, H)
            for e in range(E):
                q = p + "mlp.experts.%d." % e
                shapes[q + "gate_proj.weight"] = (I, H)
                shapes[q + "up_proj.weight"] = (I, H)
                shapes[q + "down_proj.weight"] = (H, I)
        else:
            shapes[p + "mlp.gate_proj.weight"] = (I, H)
            shapes[p + "mlp.up_proj.weight"] = (I, H)
            shapes[p + "mlp.down_proj.weight"] = (H, I)
    shapes["lm_head.weight"] = (V, H)  # in the checkpoint even when tied (vLLM skips it)
    return shapes


def init_masters(family, seed):
    """FP32 master weights with canonical names (the trainer's state)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in canonical_shapes(family).items():
        if name.endswith("norm.weight"):
            out[name] = 1.0 + 0.1 * torch.randn(shape, generator=g)
        else:
            out[name] = torch.randn(shape, generator=g) / math.sqrt(shape[-1])
    if family == "gemma":
        for name in out:
            if name.endswith("norm.weight"):
                out[name] -= 1.0  # stored as w, used as 1 + w
    return out


def _rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def hf_forward(family, w, ids):
    """Logits from canonical tensors (any dtype; computed in FP32)."""
    f = {k: v.float() for k, v in w.items()}
    norm = (lambda n: 1.0 + f[n]) if family == "gemma" else (lambda n: f[n])
    x = f["model.embed_tokens.weight"][ids]
    for i in range(L):
        p = "model.layers.%d." % i
        h = _rms(x, norm(p + "input_layernorm.weight"))
        q = h @ f[p + "self_attn.q_proj.weight"].t()
        k = h @ f[p + "self_attn.k_proj.weight"].t()
        v = h @ f[p + "self_attn.v_proj.weight"].t()
        k = torch.cat([k, k], -1)
        v = torch.cat([v, v], -1)
        att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(H), -1)
        T = ids.shape[-1]
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), 0.0)
        x = x + (att @ v) @ f[p + "self_attn.o_proj.weight"].t()
        h = _rms(x, norm(p + "post_attention_layernorm.weight"))
        if family == "moe":
            route = torch.softmax(h @ f[p + "mlp.gate.weight"].t(), -1)
            y = 0
            for e in range(E):
                q_ = p + "mlp.experts.%d." % e
                a = torch.nn.functional.silu(h @ f[q_ + "gate_proj.weight"].t()) * (h @ f[q_ + "up_proj.weight"].t())
                y = y + route[..., e : e + 1] * (a @ f[q_ + "down_proj.weight"].t())
        else:
            a = torch.nn.functional.silu(h @ f[p + "mlp.gate_proj.weight"].t()) * (h @ f[p + "mlp.up_proj.weight"].t())
            y = a @ f[p + "mlp.down_proj.weight"].t()
        x = x + y
    x = _rms(x, norm("model.norm.weight"))
    head = f["model.embed_tokens.weight"] if family == "llama" else f["lm_head.weight"]
    return x @ head.t()


def _param(shape, dtype):
    return nn.Parameter(torch.zeros(shape, dtype=dtype), requires_grad=False)


class Layer(nn.Module):
    def __init__(self, family, dtype):
        super().__init__()
        self.input_layernorm = _param((H,), dtype)
        self.post_attention_layernorm = _param((H,), dtype)
        self.qkv_proj = _param((H + 2 * KV, H), dtype)
        # The fp32 family holds o_proj transposed ([in, out]), as some
        # runtimes do for their GEMM layout.
        self.o_proj = _param((H, H), dtype)
        if family == "moe":
            self.gate = _param((E, H), dtype)
            self.w13 = _param((E, 2 * I, H), dtype)
            self.w2 = _param((E, H, I), dtype)
        else:
            self.gate_up_proj = _param((2 * I, H), dtype)
            self.down_proj = _param((H, I), dtype)


class ServingModel(nn.Module):
    """vLLM-style serving copy of one family."""

    def __init__(self, family):
        super().__init__()
        self.family = family
        dtype = torch.float32 if family == "fp32" else torch.bfloat16
        self.embed_tokens = _param((V, H), dtype)
        self.layers = nn.ModuleList([Layer(family, dtype) for _ in range(L)])
        self.norm = _param((H,), dtype)
        self.tied = family == "llama"
        self.lm_head = self.embed_tokens if self.tied else _param((V, H), dtype)

    # -- vLLM-style loading ------------------------------------------------
    def _target(self, name):
        """(parameter, loader) for one checkpoint name; None to skip it."""
        if name == "lm_head.weight":
            return None if self.tied else (self.lm_head, self._plain)
        if name == "model.embed_tokens.weight":
            return self.embed_tokens, (self._setitem if self.family == "gemma" else self._plain)
        if name == "model.norm.weight":
            return self.norm, self._norm
        parts = name.split(".")
        layer = self.layers[int(parts[2])]
        rest = ".".join(parts[3:])
        stacked = [
            ("self_attn.q_proj.weight", layer.qkv_proj, "q"),
            ("self_attn.k_proj.weight", layer.qkv_proj, "k"),
            ("self_attn.v_proj.weight", layer.qkv_proj, "v"),
            ("mlp.gate_proj.weight", getattr(layer, "gate_up_proj", None), 0),
            ("mlp.up_proj.weight", getattr(layer, "gate_up_proj", None), 1),
        ]
        for wname, param, shard in stacked:
            if rest == wname:
                return param, lambda p, w, s=shard: self._stacked(p, w, s)
        if rest.startswith("mlp.experts."):
            e = int(parts[5])
            kind = parts[6]
            return (layer.w2 if kind == "down_proj" else layer.w13), lambda p, w: self._expert(p, w, e, kind)
        simple = {
            "input_layernorm.weight": (layer.input_layernorm, self._norm),
            "post_attention_layernorm.weight": (layer.post_attention_layernorm, self._norm),
            "self_attn.o_proj.weight": (layer.o_proj, self._o_proj),
            "mlp.down_proj.weight": (getattr(layer, "down_proj", None), self._plain),
            "mlp.gate.weight": (getattr(layer, "gate", None), self._plain),
        }
        if rest not in simple:
            raise KeyError("no parameter for checkpoint tensor %s" % name)
        return simple[rest]

    def load_weights(self, weights):
        for name, w in weights:
            target = self._target(name)
            if target is None:
                continue
            param, loader = target
            loader(param, w)

    def _plain(self, param, w):  # vLLM's default_weight_loader
        assert param.shape == w.shape
        param.data.copy_(w)

    def _setitem(self, param, w):
        param.data[...] = w.to(param.dtype)

    def _norm(self, param, w):
        if self.family == "gemma":
            param.data.copy_((w.float() + 1.0).to(param.dtype))
        else:
            param.data.copy_(w)

    def _o_proj(self, param, w):
        param.data.copy_(w.t() if self.family == "fp32" else w)

    def _stacked(self, param, w, shard):
        if shard in ("q", "k", "v"):
            off = {"q": 0, "k": H, "v": H + KV}[shard]
            param.data.narrow(0, off, w.shape[0]).copy_(w.to(param.dtype))
        else:
            param.data.narrow(0, shard * I, I).copy_(w)

    def _expert(self, param, w, e, kind):
        if kind == "down_proj":
            param.data[e].copy_(w)
        else:
            off = 0 if kind == "gate_proj" else I
            param.data[e].narrow(0, off, I).copy_(w)

    # -- serving forward (from the serving layout) -------------------------
    def canonical_view(self):
        """The canonical tensors as this model serves them (for logits)."""
        out = {"model.embed_tokens.weight": self.embed_tokens, "model.norm.weight": self.norm}
        for i, layer in enumerate(self.layers):
            p = "model.layers.%d." % i
            out[p + "input_layernorm.weight"] = layer.input_layernorm
            out[p + "post_attention_layernorm.weight"] = layer.post_attention_layernorm
            out[p + "self_attn.q_proj.weight"] = layer.qkv_proj[:H]
            out[p + "self_attn.k_proj.weight"] = layer.qkv_proj[H : H + KV]
            out[p + "self_attn.v_proj.weight"] = layer.qkv_proj[H + KV :]
            out[p + "self_attn.o_proj.weight"] = layer.o_proj.t() if self.family == "fp32" else layer.o_proj
            if self.family == "moe":
                out[p + "mlp.gate.weight"] = layer.gate
                for e in range(E):
                    q = p + "mlp.experts.%d." % e
                    out[q + "gate_proj.weight"] = layer.w13[e, :I]
                    out[q + "up_proj.weight"] = layer.w13[e, I:]
                    out[q + "down_proj.weight"] = layer.w2[e]
            else:
                out[p + "mlp.gate_proj.weight"] = layer.gate_up_proj[:I]
                out[p + "mlp.up_proj.weight"] = layer.gate_up_proj[I:]
                out[p + "mlp.down_proj.weight"] = layer.down_proj
        out["lm_head.weight"] = self.lm_head
        return out

    @torch.no_grad()
    def logits(self, ids):
        w = self.canonical_view()
        if self.family == "gemma":
            w = {k: (v.float() - 1.0 if k.endswith("norm.weight") else v) for k, v in w.items()}
        return hf_forward(self.family, w, ids)


def checkpoint_of(masters):
    """The BF16 checkpoint a trainer publishes from its FP32 masters."""
    return {k: v.detach().to(torch.bfloat16) for k, v in masters.items()}


def state_bits(model):
    """Every parameter's stored bits, by name (for bit-for-bit comparison)."""
    out = {}
    for n, p in model.named_parameters():
        t = p.detach().contiguous()
        out[n] = t.view({2: torch.int16, 4: torch.int32}[t.element_size()]).clone()
    return out


def bits_equal(a, b):
    """Names whose bits differ (empty: identical)."""
    return sorted(n for n in a if not torch.equal(a[n], b[n]))
