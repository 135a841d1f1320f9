#!/usr/bin/env python3
"""Regenerates tests/data/kineto/tiny_gpt_cpu_step.json: a PyTorch profiler (Kineto) trace of one
training step of configs/models/tiny-gpt.yaml (GPT: hidden 64, 4 heads, FFN 256, 4 decoder layers,
seq 32, vocabulary 512, fp32, learned positions, LM head tied to the embedding, as eventsim counts it) with micro-batch 2,
on the CPU, forward + backward + Adam, recorded with record_shapes=True; then trimmed to the CPU
ops and the optimizer's annotation, with only the arguments `eventsim import-kineto` reads.

  python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch
  /tmp/torchvenv/bin/python scripts/kineto/make_fixture.py tests/data/kineto/tiny_gpt_cpu_step.json

The step profiled is the third (two warm-up steps first). Times differ run to run; the test
checks the import against the file's own numbers."""

import json
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

HIDDEN, HEADS, FFN, LAYERS, SEQ, VOCAB, BATCH = 64, 4, 256, 4, 32, 512, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN)
        self.proj = nn.Linear(HIDDEN, HIDDEN)
        self.ln2 = nn.LayerNorm(HIDDEN)
        self.fc1 = nn.Linear(HIDDEN, FFN)
        self.fc2 = nn.Linear(FFN, HIDDEN)
        self.drop = nn.Dropout(0.1)

    def attention(self, x):
        b, s, _ = x.shape
        d = HIDDEN // HEADS
        q, k, v = self.qkv(x).split(HIDDEN, dim=-1)
        q, k, v = (t.view(b, s, HEADS, d).transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        probs = self.drop(torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1))
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, HIDDEN)
        return self.drop(self.proj(out))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class TinyGpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.pos = nn.Parameter(torch.zeros(SEQ, HIDDEN))
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(HIDDEN)
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied: eventsim's Adam counts the table once
        self.drop = nn.Dropout(0.1)

    def forward(self, tokens):
        x = self.drop(self.embed(tokens) + self.pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def step(model, optimizer, tokens, labels):
    optimizer.zero_grad(set_to_none=True)
    logits = model(tokens)
    loss = F.cross_entropy(logits.view(-1, VOCAB), labels.view(-1))
    loss.backward()
    optimizer.step()


def trim(trace):
    """CPU ops and the optimizer's annotation only, with the arguments the import reads."""
    keep_args = ("Input Dims", "Input Strides", "Input type", "correlation")
    events = []
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation"):
            continue
        if e["cat"] == "user_annotation" and not e["name"].startswith("Optimizer.step"):
            continue
        args = {k: v for k, v in e.get("args", {}).items() if k in keep_args}
        events.append({"ph": "X", "cat": e["cat"], "name": e["name"], "pid": e["pid"],
                       "tid": e["tid"], "ts": e["ts"], "dur": e["dur"], "args": args})
    return {"schemaVersion": trace.get("schemaVersion", 1),
            "deviceProperties": trace.get("deviceProperties", []),
            "traceName": "tiny-gpt b=2 one training step, CPU (scripts/kineto/make_fixture.py)",
            "traceEvents": events}


def main(out):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TinyGpt()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    for _ in range(2):
        step(model, optimizer, tokens, labels)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        step(model, optimizer, tokens, labels)
    raw = out + ".raw.json"
    prof.export_chrome_trace(raw)
    with open(raw) as f:
        trace = trim(json.load(f))
    with open(out, "w") as f:
        json.dump(trace, f, separators=(",", ":"))
        f.write("\n")
    params = sum(p.numel() for p in model.parameters())
    print(f"{out}: {len(trace['traceEvents'])} events, {params} parameters, torch {torch.__version__}")


if __name__ == "__main__":
    main(sys.argv[1])
