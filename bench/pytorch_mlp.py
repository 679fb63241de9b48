#!/usr/bin/env python3
"""The digits MLP step, a network's step and the GEMMs of `systole bench`, in PyTorch, as an
outside anchor for the GPU figures. Prints one JSON object on stdout.

Same shapes, batch sizes and SGD settings as the bench (64-64-10, lr 0.05, momentum 0.9,
softmax cross-entropy with mean reduction); PyTorch's own nn.Linear initialisation (the values do
not change the timing). A step is zero_grad, forward, loss, backward, optimizer.step, in eager
mode, and on a GPU also captured once as a CUDA graph and replayed: what the Systole GPU step,
itself one CUDA graph, is compared with. `--network` takes a model file's JSON (`{"input":
[...], "layers": [...]}`, as `systole train --model` reads it; the bench passes LeNet-5's) and
times its step the same two ways at `--network-batches`.

Timing: warm-up runs, then the median of many, each between two CUDA events (on a GPU) or by
perf_counter (on the CPU). FP32 matmuls run with TF32 disabled, so they are true FP32 like
cuBLAS sgemm in the bench; BF16 matmuls take bf16 operands (torch.matmul returns bf16).

    python3 bench/pytorch_mlp.py --batches 64,1024 --sizes 1024,8192 \
        --network "$(cat lenet.json)" --network-batches 64
"""

import argparse
import json
import statistics
import sys
import time

import torch


def timed(fn, warmup, reps, device):
    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def sequential(spec):
    """The `torch.nn.Sequential` of a model file's layer list (README's loading snippet)."""
    nn = torch.nn
    make = {
        "dense": lambda l: nn.Linear(l["in"], l["out"]),
        "relu": lambda l: nn.ReLU(),
        "conv2d": lambda l: nn.Conv2d(
            l["in"], l["out"], l["kernel"], l.get("stride", 1), l.get("padding", 0)
        ),
        "maxpool2d": lambda l: nn.MaxPool2d(l["kernel"], l.get("stride", l["kernel"])),
        "avgpool2d": lambda l: nn.AvgPool2d(l["kernel"], l.get("stride", l["kernel"])),
        "flatten": lambda l: nn.Flatten(),
    }
    return nn.Sequential(*[make[l["kind"]](l) for l in spec["layers"]])


def training(spec, batch, device):
    """The model file `spec` (its last layer dense: the classes) on `device`, its optimizer and
    loss, and a random batch: everything one SGD step needs."""
    torch.manual_seed(0)
    model = sequential(spec).to(device)
    classes = spec["layers"][-1]["out"]
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.rand(batch, *spec["input"], device=device)
    y = torch.randint(0, classes, (batch,), device=device)
    return model, opt, loss_fn, x, y


def step_timing(spec, batch, device, warmup, reps):
    """One SGD step of the model file `spec`, eager."""
    model, opt, loss_fn, x, y = training(spec, batch, device)
    first = {}

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if "loss" not in first:
            first["loss"] = loss.item()

    ms = timed(step, warmup, reps, device)
    return {"batch": batch, "ms": ms, "reps": reps, "warmup": warmup, "first_loss": first["loss"]}


def graph_step_timing(spec, batch, device, warmup, reps):
    """The same step captured once as a CUDA graph and replayed: PyTorch's whole-network capture
    (warm-up steps on a side stream, then forward, loss, backward and the optimizer's step in
    the graph, gradients allocated by it)."""
    model, opt, loss_fn, x, y = training(spec, batch, device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    ms = timed(graph.replay, warmup, reps, device)
    # The loss of the last replay (the key is the eager timing's, for one reader).
    return {"batch": batch, "ms": ms, "reps": reps, "warmup": warmup, "first_loss": loss.item()}


MLP = {"input": [64], "layers": [
    {"kind": "dense", "in": 64, "out": 64}, {"kind": "relu"},
    {"kind": "dense", "in": 64, "out": 10},
]}


def matmul(m, k, n, dtype, device, warmup, reps):
    a = torch.rand(m, k, device=device, dtype=torch.float32) * 2 - 1
    b = torch.rand(k, n, device=device, dtype=torch.float32) * 2 - 1
    a, b = a.to(dtype), b.to(dtype)
    ms = timed(lambda: torch.matmul(a, b), warmup, reps, device)
    return {"m": m, "k": k, "n": n, "dtype": str(dtype).replace("torch.", ""), "ms": ms, "reps": reps}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", default="64,1024")
    p.add_argument("--sizes", default="1024,8192")
    p.add_argument("--network", default="", help="a model file's JSON")
    p.add_argument("--network-batches", default="")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    out = {"torch": torch.__version__, "device": name, "mlp": [], "mlp_graph": [], "network": [],
           "network_graph": [], "matmul": []}
    for batch in [int(b) for b in args.batches.split(",") if b]:
        out["mlp"].append(step_timing(MLP, batch, device, warmup=20, reps=200))
        if device.type == "cuda":
            out["mlp_graph"].append(graph_step_timing(MLP, batch, device, warmup=20, reps=200))
    if args.network:
        spec = json.loads(args.network)
        for batch in [int(b) for b in args.network_batches.split(",") if b]:
            reps = 200 if device.type == "cuda" else 10
            out["network"].append(step_timing(spec, batch, device, warmup=5, reps=reps))
            if device.type == "cuda":
                out["network_graph"].append(
                    graph_step_timing(spec, batch, device, warmup=5, reps=reps)
                )
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if device.type != "cuda":
        sizes = [s for s in sizes if s <= 1024]  # the CPU would take minutes
    for s in sizes:
        for shape in [(s, s, s)] + ([(64, s, s)] if s > 64 else []):
            for dtype in [torch.float32, torch.bfloat16]:
                reps = 10 if shape[0] * shape[1] * shape[2] > 2**36 else 50
                out["matmul"].append(matmul(*shape, dtype, device, warmup=5, reps=reps))
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
