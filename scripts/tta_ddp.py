#!/usr/bin/python3
"""The PyTorch DDP peer of omgs-train-torch, for time to accuracy (scripts/time-to-accuracy.sh).

Trains the example's CNN (examples/torch_args.cpp: ModelShape, --model cnn or wide_cnn) on
Fashion-MNIST with torch.distributed (gloo) DistributedDataParallel, with the same global
batch, learning rate, momentum, epochs and sample order (every epoch a permutation seeded by
seed + epoch, each rank its contiguous shard of each global batch) as the C++ example, and
one of DDP's communication hooks:

  fp32       DDP's default: bucketed fp32 allreduce (25 MB buckets, 1 MB first)
  fp16       default_hooks.fp16_compress_hook (16-bit allreduce)
  bf16       default_hooks.bf16_compress_hook: fails over gloo in torch 1.13 (gloo has no
             bfloat16: "Invalid scalar type"); fp16 sends the same 2 bytes per entry
  powersgd1  powerSGD_hook, matrix_approximation_rank 1
  powersgd4  powerSGD_hook, matrix_approximation_rank 4

PowerSGD runs plain allreduce for its first --powersgd-start iterations (its warm-up;
default: a tenth of all iterations, at most PowerSGD's own default 1000), in one bucket: with
DDP's two buckets its chained allreduces over gloo were issued in different orders on
different ranks ("op.preamble.length <= op.nbytes" and an abort, torch 1.13).

Run it with Debian's python3 (python3-torch 1.13 installs there), one process per rank: under
mpiexec (RANK and WORLD_SIZE from OMPI_COMM_WORLD_RANK / _SIZE), e.g. on the emulated
cluster (rank 0 on host 1, 10.213.0.1; docs/cluster.md):

  ./scripts/cluster.sh run 4 -- /usr/bin/python3 scripts/tta_ddp.py --hook bf16 \\
      --model wide_cnn --master-addr 10.213.0.1 --ifname eth0 --csv out.csv

Rank 0 writes method,seed,epoch,train_s,test_acc per epoch to --csv (train_s: training wall
time so far, evaluation excluded; the columns of omgs-train-torch --csv).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

# examples/torch_args.cpp model_shape(): channels1, channels2, kernel, padding, hidden.
SHAPES = {"cnn": (16, 32, 5, 0, 128), "wide_cnn": (16, 32, 5, 0, 6144)}


class Net(torch.nn.Module):
    """conv, relu, max-pool 2, twice, then linear, relu, linear (examples/train_torch.cpp)."""

    def __init__(self, model):
        super().__init__()
        c1, c2, k, p, hidden = SHAPES[model]
        side = ((28 - k + 1 + 2 * p) // 2 - k + 1 + 2 * p) // 2
        self.conv1 = torch.nn.Conv2d(1, c1, k, padding=p)
        self.conv2 = torch.nn.Conv2d(c1, c2, k, padding=p)
        self.fc1 = torch.nn.Linear(c2 * side * side, hidden)
        self.fc2 = torch.nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def read_idx(data_dir, name):
    """An IDX file, gzip'd or not (examples/fashion_mnist.cpp reads the same)."""
    path = os.path.join(data_dir, name)
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_split(data_dir, prefix):
    images = read_idx(data_dir, prefix + "-images-idx3-ubyte")
    labels = read_idx(data_dir, prefix + "-labels-idx1-ubyte")
    x = torch.from_numpy(images.copy()).float().div_(255.0).sub_(0.2860).div_(0.3530)
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hook", choices=["fp32", "fp16", "bf16", "powersgd1", "powersgd4"], default="fp32")
    p.add_argument("--model", choices=sorted(SHAPES), default="cnn")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64, help="global, split over the ranks")
    p.add_argument("--max-batches", type=int, default=0, help="per epoch; 0: all")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--test-images", type=int, default=10000,
                   help="the test accuracy on the first N test images")
    p.add_argument("--powersgd-start", type=int, default=-1,
                   help="PowerSGD's start_powerSGD_iter (default: 10%% of all iterations, <= 1000)")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--master-addr", default=os.environ.get("MASTER_ADDR", "127.0.0.1"))
    p.add_argument("--master-port", default=os.environ.get("MASTER_PORT", "29517"))
    p.add_argument("--ifname", default="", help="gloo's interface (GLOO_SOCKET_IFNAME)")
    p.add_argument("--csv", default="")
    return p.parse_args()


def init_process_group(a):
    rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
    size = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = a.master_addr, str(a.master_port)
    if a.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    dist.init_process_group("gloo", rank=rank, world_size=size)
    return rank, size


def bf16_hook(state, bucket):
    """default_hooks.bf16_compress_hook under another name: DDP 1.13 refuses the hook by its
    name unless CUDA 11 and NCCL 2.10 are there, but it runs as well over gloo on the CPU."""
    return default_hooks.bf16_compress_hook(state, bucket)


def register_hook(ddp, a, iters):
    if a.hook == "bf16":
        ddp.register_comm_hook(None, bf16_hook)
    elif a.hook == "fp16":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif a.hook.startswith("powersgd"):
        start = a.powersgd_start if a.powersgd_start >= 0 else min(1000, a.epochs * iters // 10)
        state = powersgd.PowerSGDState(process_group=None,
                                       matrix_approximation_rank=int(a.hook[-1]),
                                       start_powerSGD_iter=max(start, 2), random_seed=a.seed)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)


def test_accuracy(model, x, y, rank, size):
    with torch.no_grad():
        per = (len(x) + size - 1) // size
        begin, end = min(len(x), rank * per), min(len(x), (rank + 1) * per)
        correct = 0
        for b in range(begin, end, 1000):
            e = min(end, b + 1000)
            correct += int(model(x[b:e]).argmax(1).eq(y[b:e]).sum())
        t = torch.tensor([correct], dtype=torch.int64)
        dist.all_reduce(t)
        return 100.0 * float(t.item()) / len(x)


def train_epoch(ddp, opt, a, data, epoch, rank, size, iters):
    x, y = data
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(a.seed + epoch))
    shard = a.batch_size // size
    start = time.perf_counter()
    for it in range(iters):
        base = it * a.batch_size + rank * shard
        idx = perm[base:base + shard]
        loss = F.cross_entropy(ddp(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def main():
    a = parse_args()
    torch.set_num_threads(1)  # one core per rank, as omgs-train-torch
    rank, size = init_process_group(a)
    if a.batch_size % size != 0:
        sys.exit(f"tta_ddp.py: --batch-size {a.batch_size} is not a multiple of {size} ranks")
    train = load_split(a.data_dir, "train")
    test = [t[:a.test_images] for t in load_split(a.data_dir, "t10k")]
    iters = len(train[0]) // a.batch_size
    if a.max_batches > 0:
        iters = min(iters, a.max_batches)
    torch.manual_seed(a.seed)
    model = Net(a.model)
    if a.hook.startswith("powersgd"):  # one bucket (see the top)
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=1024 if a.hook.startswith("powersgd") else 25)
    register_hook(ddp, a, iters)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum)
    out = open(a.csv, "w") if a.csv and rank == 0 else None
    if out:
        out.write("method,seed,epoch,train_s,test_acc\n")
    total = 0.0
    for epoch in range(1, a.epochs + 1):
        total += train_epoch(ddp, opt, a, train, epoch, rank, size, iters)
        acc = test_accuracy(model, test[0], test[1], rank, size)
        if rank == 0:
            print(f"ddp {a.hook}: epoch {epoch} train {total:.2f} s test {acc:.2f}%", flush=True)
            if out:
                out.write(f"ddp_{a.hook},{a.seed},{epoch},{total:.4f},{acc:.2f}\n")
                out.flush()
    if out:
        out.close()
    # destroy_process_group() or the interpreter's exit hung after training on 2 local ranks
    # (gloo, torch 1.13): leave together, at once.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
