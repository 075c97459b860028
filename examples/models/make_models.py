#!/usr/bin/env python3
"""Write the bundled model descriptions used by omgs examples and tests.

Output: one CSV per model in this script's directory (or --out-dir):

    resnet50.csv  vgg16.csv  bert_base.csv  gpt2_small.csv      (today's four)
    gpt2_xl.csv   llama_7b.csv  vit_l16.csv                     (the scale study's)

Format: header `name,numel,backward_s`, then one row per gradient tensor in
FORWARD order (row 0 = the first parameter the forward pass uses). The backward
pass visits the rows from the last to the first. Names are the reference
framework's `named_parameters()` names: torchvision for ResNet-50 and VGG-16,
HuggingFace transformers for BERT-base-uncased (BertModel: with pooler,
without MLM head) and GPT-2 small (GPT2LMHeadModel; lm_head.weight is tied to
transformer.wte.weight and is therefore not a separate gradient).

Shapes are facts, taken from the architectures (the script asserts the known
parameter totals). Times are ESTIMATES, computed as follows.

backward_s estimate
-------------------
  backward_s(tensor) = backward FLOPs charged to the tensor / THROUGHPUT
  THROUGHPUT         = a named GPU's peak x a sustained fraction (--gpu, --mfu),
                       or --tflops. Without --gpu / --tflops today's four models
                       keep 15e12 FLOP/s (a V100-class fp32 figure, the CSVs that
                       the tests pin) and the scale study's three take --gpu h100
                       (GPUS below); every time scales with 1/THROUGHPUT.

  Batches (per GPU): ResNet-50 and VGG-16: batch 32 at 224x224 (ImageNet);
           BERT-base: batch 32, sequence 128 (4096 tokens);
           GPT-2 small and GPT-2 XL: batch 8, sequence 1024 (8192 tokens);
           LLaMA-7B: batch 4, sequence 2048 (8192 tokens);
           ViT-L/16: batch 32 at 224x224 (197 tokens each: 196 patches + [CLS]).

  Weight-owning ops (all backward time of the layer goes on its weight):
    conv   forward FLOPs = 2*Cin*Cout*kh*kw*Hout*Wout*batch
    linear forward FLOPs = 2*in*out*tokens   (tokens = batch for CNN heads)
    backward FLOPs = 2 x forward (dX and dW, each as costly as the forward),
    except the very first conv of a CNN, whose input is the data and needs no
    dX: backward = 1 x forward.
  Bias of a conv / linear: BIAS_FLOPS_PER_ELEM (1) per output activation
    element (db is a sum of dY over batch and space / tokens).
  Norm layers (BatchNorm, LayerNorm): the weight gets NORM_WEIGHT_FLOPS_PER_ELEM
    (8) per normalized activation element (dgamma reduction plus dX), the bias
    NORM_BIAS_FLOPS_PER_ELEM (1) (dbeta = sum of dY).
  Embeddings: EMBED_FLOPS_PER_ELEM (2) per tokens*hidden element (scatter-add
    of dY rows into the table), no dX.
  Parameter-free work that lies between two weight tensors in the backward
  pass is charged to the weight tensor whose backward follows it, so that the
  time at which each gradient becomes ready is right:
    - transformer attention core (Q K^T and softmax(.) V: forward
      4*seq*seq*hidden*batch FLOPs, backward 2x) is charged to the first of
      the Q/K/V projection weights visited in backward (BERT: value.weight,
      GPT-2: attn.c_attn.weight);
    - GPT-2's tied LM head (forward 2*hidden*vocab*tokens, backward 2x) runs
      before every other backward op; it is charged to the last row,
      transformer.ln_f.bias, the first gradient backward visits.
  Not modelled (treated as free): activations (ReLU, GELU), pooling, softmax
  of the loss, dropout, residual additions, the optimizer. Elementwise work is
  memory bound on real GPUs, so real norm / bias times are larger than these
  FLOP counts say; FLOP-bound layers dominate the totals either way.

These times are MODELLED (FLOPs / an assumed rate), never measured.

Usage: python3 make_models.py [--out-dir DIR] [--gpu h100|h200|a100|v100]
                              [--mfu 0.4] [--tflops 15] [--models a,b] [--check]
Python 3 standard library only.
"""

import argparse
import csv
import io
import math
import os
import sys

# The shapes and FLOP charges live beside this script; it may run from any directory.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from architectures import MODELS  # noqa: E402

THROUGHPUT_DEFAULT_TFLOPS = 15.0


# Named GPUs: (peak dense FLOP/s of the tensor cores in the training precision, source).
# The sustained rate is peak x --mfu (default MFU_DEFAULT). Why 0.40: the PaLM paper
# (Chowdhery et al. 2022, Table 3) lists model FLOP utilisations of 21.3% (GPT-3), 30.2%
# (Megatron-Turing NLG), 32.5% (Gopher) and 46.2% (PaLM) for large-model training; 0.40 is
# an assumption in that range, not a measurement of these models.
GPUS = {
    "h100": (989.4e12, "NVIDIA H100 SXM5 bf16 dense (datasheet: 1,979 TFLOP/s with 2:4 sparsity)"),
    "h200": (989.4e12, "NVIDIA H200 SXM bf16 dense (datasheet: 1,979 TFLOP/s with 2:4 sparsity)"),
    "a100": (312e12, "NVIDIA A100 SXM4 bf16 dense (datasheet: 312 TFLOP/s)"),
    "v100": (125e12, "NVIDIA V100 SXM2 fp16 tensor core (datasheet: 125 TFLOP/s)"),
}
MFU_DEFAULT = 0.40


def check(m, total, count):
    names = [r[0] for r in m.rows]
    assert len(names) == count, "%s: %d tensors, expected %d" % (m.name, len(names), count)
    assert len(set(names)) == len(names), "%s: duplicate names" % m.name
    numel = sum(r[1] for r in m.rows)
    assert numel == total, "%s: %d parameters, expected %d" % (m.name, numel, total)
    for name, n, flops in m.rows:
        assert n > 0, "%s: %s has numel %d" % (m.name, name, n)
        assert math.isfinite(flops) and flops > 0, "%s: %s has cost %r" % (m.name, name, flops)


def render(m, throughput, note):
    f = io.StringIO()
    if note:  # the scale study's models say how their times were made
        f.write("# " + note + "\n")
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["name", "numel", "backward_s"])
    for name, n, flops in m.rows:
        w.writerow([name, n, "%.9e" % (flops / throughput)])
    return f.getvalue()


def rate(args, legacy):
    """(FLOP/s, the note written into the CSV; "" keeps today's four files unchanged)."""
    if args.tflops is not None:
        return args.tflops * 1e12, "backward_s MODELLED: FLOPs / %g TFLOP/s (--tflops)" % args.tflops
    gpu = args.gpu if args.gpu is not None else (None if legacy else "h100")
    if gpu is None:
        return THROUGHPUT_DEFAULT_TFLOPS * 1e12, ""
    peak, source = GPUS[gpu]
    return peak * args.mfu, ("backward_s MODELLED, not measured: FLOPs / (%.4g TFLOP/s peak x "
                             "%.2f sustained) of %s" % (peak / 1e12, args.mfu, source))


def check_published(name, total, published, source):
    """The issue's test: the shapes give the published parameter count within 1%."""
    err = abs(total - published) / published
    assert err <= 0.01, "%s: %d parameters, %.1f%% from the published %.4g (%s)" % (
        name, total, 100 * err, published, source)
    return err


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--gpu", choices=sorted(GPUS), default=None,
                    help="device whose peak x --mfu times every model (default: 15 TFLOP/s "
                         "for today's four, h100 for the scale study's three)")
    ap.add_argument("--mfu", type=float, default=MFU_DEFAULT,
                    help="sustained fraction of the GPU's peak (default %(default)s)")
    ap.add_argument("--tflops", type=float, default=None,
                    help="effective throughput in TFLOP/s (overrides --gpu)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated subset of: " + ", ".join(MODELS))
    ap.add_argument("--check", action="store_true",
                    help="check every model (tensor counts, parameter totals within 1%% of "
                         "the published ones, the CSVs in --out-dir equal to what this writes); "
                         "write nothing")
    args = ap.parse_args(argv)
    assert args.tflops is None or args.tflops > 0
    assert 0 < args.mfu <= 1, "--mfu must be in (0, 1]"
    names = args.models.split(",")
    for name in names:
        assert name in MODELS, "unknown model '%s' (known: %s)" % (name, ", ".join(MODELS))
    if not args.check:
        os.makedirs(args.out_dir, exist_ok=True)
    for name in names:
        build, published, source, legacy = MODELS[name]
        m, total, count = build()
        check(m, total, count)
        err = check_published(name, total, published, source)
        throughput, note = rate(args, legacy)
        backward = sum(r[2] for r in m.rows) / throughput
        path = os.path.join(args.out_dir, name + ".csv")
        text = render(m, throughput, note)
        if args.check:
            # The committed CSVs must be what the script writes (they are not edited by hand).
            if os.path.exists(path) and args.gpu is None and args.tflops is None:
                with open(path, newline="") as f:
                    assert f.read() == text, "%s differs from what the script writes" % path
            print("%-11s %4d tensors %11d params (%.2f%% from published %.4g)  backward %.4f s"
                  % (name, len(m.rows), total, 100 * err, published, backward))
            continue
        with open(path, "w", newline="") as f:
            f.write(text)
        print("%-14s %4d tensors %11d params  backward %.4f s  -> %s"
              % (m.name, len(m.rows), total, backward, path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
