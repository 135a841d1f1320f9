#!/usr/bin/env python3
"""Independent ground truth (issue 18, item 5): one Megatron-like GPT training step in plain
PyTorch on one GPU, timed with CUDA events.

The model is read from an eventsim model YAML (hidden, heads, FFN, sequence, vocabulary, decoder
count, dtype) and built as Megatron-LM builds it, without any eventsim code: word + position
embeddings, pre-LayerNorm decoder blocks (QKV Linear, scaled causal softmax over explicit batched
products, attention dropout, projection, MLP with GeLU, dropouts 0.1, residual adds), a final
LayerNorm, a logit layer tied to the word embedding and cross-entropy. Activations are [s, b, h] as
in Megatron. Half-precision models keep fp32 master weights: gradients are copied to them and a
fused AdamW updates them, then the half weights are refreshed (Megatron's mixed precision).
Gradient accumulation over global_batch / micro_batch micro-batches.

  python3 scripts/gpu/torch_step.py MODEL.yaml --micro-batch B --global-batch G [--dtype bf16]
Prints one JSON line: median and mean step time over --steps steps after --warmup steps.
"""
import argparse
import json
import math
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml

DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class Block(nn.Module):
    def __init__(self, h, heads, ffn, p):
        super().__init__()
        self.heads, self.hd, self.p = heads, h // heads, p
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, ffn)
        self.fc2 = nn.Linear(ffn, h)

    def forward(self, x, mask):
        s, b, h = x.shape
        qkv = self.qkv(self.ln1(x)).view(s, b * self.heads, 3 * self.hd)
        q, k, v = qkv.split(self.hd, dim=-1)  # [s, b*heads, hd] each
        q, k, v = (t.transpose(0, 1) for t in (q, k, v))  # [b*heads, s, hd]
        scores = torch.baddbmm(torch.empty(q.shape[0], s, s, dtype=q.dtype, device=q.device),
                               q, k.transpose(1, 2), beta=0.0, alpha=1.0 / math.sqrt(self.hd))
        probs = F.dropout(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1),
                          self.p, self.training)
        ctx = torch.bmm(probs, v).transpose(0, 1).reshape(s, b, h)
        x = x + F.dropout(self.proj(ctx), self.p, self.training)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x + F.dropout(y, self.p, self.training)


class Gpt(nn.Module):
    def __init__(self, cfg, p=0.1):
        super().__init__()
        h = cfg["hidden_size"]
        layers = sum(l.get("count", 1) for l in cfg["layers"] if l["type"] == "decoder")
        self.word = nn.Embedding(cfg["vocab_size"], h)
        self.pos = nn.Embedding(cfg["seq_length"], h)
        self.blocks = nn.ModuleList(
            Block(h, cfg["num_heads"], cfg.get("ffn_hidden_size", 4 * h), p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(h)
        self.p = p

    def forward(self, ids, targets, mask):  # ids, targets: [s, b]
        s = ids.shape[0]
        x = self.word(ids) + self.pos(torch.arange(s, device=ids.device))[:, None, :]
        x = F.dropout(x, self.p, self.training)
        for blk in self.blocks:
            x = blk(x, mask)
        logits = F.linear(self.ln_f(x), self.word.weight)  # tied
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--micro-batch", type=int, required=True)
    ap.add_argument("--global-batch", type=int, required=True)
    ap.add_argument("--dtype", help="override the model file's dtype")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (Inductor fuses masking, softmax, dropout and "
                         "the element-wise ops, as Megatron's fused kernels do)")
    ap.add_argument("--kernel-table", metavar="FILE",
                    help="also profile one step with torch.profiler and write its CUDA kernel "
                         "table (time per kernel name) to FILE")
    a = ap.parse_args()
    cfg = yaml.safe_load(open(a.model))
    dname = a.dtype or cfg.get("dtype", "fp32")
    dtype = DT[dname]
    torch.backends.cuda.matmul.allow_tf32 = False  # eventsim's fp32 GEMMs are true fp32
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = Gpt(cfg).cuda().to(dtype).train()
    params = list(model.parameters())
    forward = torch.compile(model) if a.compile else model
    half = dtype != torch.float32
    master = [p.detach().float().clone().requires_grad_(True) for p in params] if half else params
    opt = torch.optim.AdamW(master, lr=1e-4, weight_decay=0.01, fused=True)
    s, b = cfg["seq_length"], a.micro_batch
    micro = a.global_batch // a.micro_batch
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device="cuda"), 1)
    data = [(torch.randint(0, cfg["vocab_size"], (s, b), device="cuda"),
             torch.randint(0, cfg["vocab_size"], (s, b), device="cuda")) for _ in range(micro)]

    def step():
        for p in params:
            p.grad = None
        for ids, tgt in data:
            (forward(ids, tgt, mask) / micro).backward()
        if half:
            for m, p in zip(master, params):
                m.grad = p.grad.float()
        opt.step()
        if half:
            with torch.no_grad():
                torch._foreach_copy_(params, master)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    if a.kernel_table:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        with open(a.kernel_table, "w") as f:
            f.write(prof.key_averages().table(sort_by="cuda_time_total", row_limit=40,
                                              max_name_column_width=90))
    print(json.dumps({"model": cfg["name"], "dtype": dname, "compiled": a.compile, "micro_batch": b,
                      "global_batch": a.global_batch, "steps": a.steps,
                      "median_ms": statistics.median(times), "mean_ms": statistics.mean(times),
                      "min_ms": min(times), "max_ms": max(times),
                      "parameters": sum(p.numel() for p in params)}))


if __name__ == "__main__":
    main()
