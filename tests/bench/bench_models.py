#!/usr/bin/python3
"""The benchmark's models, made with the host's torch 1.13 (random, seeded weights, eval mode).

    bench_models.py OUT_DIR [NAME ...]

For each model writes OUT_DIR/<name>.pt (traced TorchScript, what Kiln and libtorch load) and
OUT_DIR/<name>.onnx (torch.onnx.export of that same traced module, opset 14, batch dimension
dynamic: what ONNX Runtime loads). A model whose two files exist is skipped.

Models: torchvision resnet18, resnet50, mobilenet_v2, efficientnet_b0, vit_b_16 (built as the
parity zoo builds them: BatchNorm statistics calibrated, zero heads given small weights), and
bert_like, a BERT-base shaped encoder written out here (no transformers package on the host).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
TORCHVISION = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "vit_b_16"]
MODELS = TORCHVISION + ["bert_like"]
ONNX_OPSET = 14
BERT_VOCAB, BERT_SEQ = 30522, 128


class BertLayer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ffn)
        self.ff2 = nn.Linear(ffn, d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, h):
        b, s, d = h.shape
        q, k, v = self.qkv(h).chunk(3, dim=-1)

        def split(t):
            return t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(q), split(k), split(v)
        a = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1) @ v
        h = self.ln1(h + self.out(a.transpose(1, 2).reshape(b, s, d)))
        return self.ln2(h + self.ff2(F.gelu(self.ff1(h))))


class BertLike(nn.Module):
    """BERT-base shape: 12 layers, hidden 768, 12 heads, FFN 3072, sequence 128, int64 input_ids."""

    def __init__(self, vocab=BERT_VOCAB, d=768, layers=12, heads=12, ffn=3072, seq=BERT_SEQ):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList([BertLayer(d, heads, ffn) for _ in range(layers)])

    def forward(self, input_ids):
        h = self.ln(self.tok(input_ids) + self.pos)
        for layer in self.layers:
            h = layer(h)
        return h


def make_bert_like(path):
    """Traces BertLike (seeded) into `path`, with `path`.json declaring input_ids INT64 (a traced
    file does not say that its input holds integers). Returns the sample input."""
    torch.manual_seed(0)
    m = BertLike().eval()
    ids = torch.randint(0, BERT_VOCAB, (1, BERT_SEQ))
    with torch.no_grad():
        torch.jit.trace(m, ids).save(path)
    with open(path + ".json", "w") as f:
        f.write('{"inputs": [{"name": "input_ids", "datatype": "INT64", "dims": [-1, %d]}]}'
                % BERT_SEQ)
    return {"input_ids": ids.numpy()}


def input_spec(name):
    """(dtype, shape after the batch dimension, name) of the model's one input."""
    if name == "bert_like":
        return "i64", (BERT_SEQ,), "input_ids"
    return "f32", (3, 224, 224), "x"


def make_torchvision(name, path):
    sys.path.insert(0, os.path.join(HERE, "..", "parity"))
    from gen_zoo import build  # noqa: E402  (the parity zoo's builder: calibrated, seeded)
    torch.manual_seed(TORCHVISION.index(name))
    model, shape, _ = build(name)
    # Traced with autograd on: under no_grad, nn.MultiheadAttention (vit_b_16) takes its fused
    # fast path, aten::_native_multi_head_attention, which torch.onnx cannot export. This way every
    # engine runs the same decomposed attention. (The trace check would re-trace under no_grad,
    # take the fast path and report the difference: it is off.)
    torch.jit.trace(model, torch.randn(*shape), check_trace=False).save(path)


def export_onnx(name, pt_path, onnx_path):
    """The traced file itself, exported: ONNX Runtime runs exactly the weights Kiln runs."""
    dtype, shape, input_name = input_spec(name)
    module = torch.jit.load(pt_path).eval()
    x = (torch.randint(0, BERT_VOCAB, (2, *shape)) if dtype == "i64" else torch.randn(2, *shape))
    with torch.no_grad():
        torch.onnx.export(module, (x,), onnx_path, opset_version=ONNX_OPSET,
                          input_names=[input_name], output_names=["output0"],
                          dynamic_axes={input_name: {0: "batch"}, "output0": {0: "batch"}})


def make(name, out_dir):
    pt, onnx = os.path.join(out_dir, f"{name}.pt"), os.path.join(out_dir, f"{name}.onnx")
    if os.path.exists(pt) and os.path.exists(onnx):
        return
    print(f"making {name}.pt and {name}.onnx", file=sys.stderr, flush=True)
    if name == "bert_like":
        make_bert_like(pt)
    else:
        make_torchvision(name, pt)
    export_onnx(name, pt, onnx + ".partial")
    os.replace(onnx + ".partial", onnx)  # written last: its presence means the pair is complete


def main():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR [NAME ...]")
    os.makedirs(sys.argv[1], exist_ok=True)
    for name in sys.argv[2:] or MODELS:
        make(name, sys.argv[1])


if __name__ == "__main__":
    main()
