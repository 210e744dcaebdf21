"""Would members that share an architecture train faster as one batched computation?

N members' critics (speaker-listener's MADDPG critic shape: the joint observation and action,
22 inputs, three 64-wide layers, one output) each take one gradient step on their own batch:

* ``loop``: N modules, N ``torch.optim.Adam``, one forward / backward / step after another (what
  N learners do, one member each, when they share a device);
* ``vmap``: the N members' parameters stacked along a leading axis (``torch.func.
  stack_module_state``), one ``vmap(grad(loss))`` over them, and one Adam over the stacked
  tensors with each member's own learning rate (what JAX trainers do to a population);
* ``graph`` (on CUDA only): ``vmap``'s whole step (gradients and Adam) captured once as a CUDA
  graph over fixed input buffers and replayed, so a step costs one launch instead of one per
  kernel (what a static-shape update could gain on a GPU).

Both variants compute the same update (``same_update`` checks it); the figure is network steps
per second over all members, and the ratio vmap / loop, per population size and batch size, on
the device given (``cuda`` where torch sees a GPU, else ``cpu``) and with ``--threads`` torch
threads on CPU.

    .venv/bin/python -m benchmarks.micro.member_vmap [--sizes 4 8 16] [--batches 256 1024]
        [--device cpu] [--threads 1] [--seconds 2] [--json vmap.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

IN_DIM, HIDDEN = 22, (64, 64, 64)
BETAS, EPS = (0.9, 0.999), 1e-8


def make_members(n: int, seed: int = 0, device: str = "cpu") -> list[nn.Module]:
    """``n`` critic-shaped MLPs with different initial weights."""
    torch.manual_seed(seed)
    members: list[nn.Module] = []
    for _ in range(n):
        layers: list[nn.Module] = []
        width = IN_DIM
        for h in HIDDEN:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        members.append(nn.Sequential(*layers).to(device))
    return members


def make_data(n: int, batch: int, seed: int = 1, device: str = "cpu"
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``[n, batch, 22]`` and regression targets ``[n, batch, 1]``: one batch per member."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, batch, IN_DIM, generator=g)
    return x.to(device), x.sum(-1, keepdim=True).sin().to(device)


class LoopTrainer:
    """One module and one Adam per member, stepped one after another."""

    def __init__(self, members: Sequence[nn.Module], lrs: Sequence[float]) -> None:
        self.members = list(members)
        self.opts = [torch.optim.Adam(m.parameters(), lr=lr, betas=BETAS, eps=EPS)
                     for m, lr in zip(self.members, lrs)]

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        for i, (model, opt) in enumerate(zip(self.members, self.opts)):
            loss = (model(x[i]) - y[i]).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    def params(self) -> list[dict[str, torch.Tensor]]:
        return [{k: v.detach().clone() for k, v in m.named_parameters()} for m in self.members]


class VmapTrainer:
    """Stacked parameters ``[n, ...]``, one vmapped gradient, one Adam with per-member lr."""

    def __init__(self, members: Sequence[nn.Module], lrs: Sequence[float]) -> None:
        params, _ = stack_module_state(list(members))
        self.params = {k: v.detach() for k, v in params.items()}
        base = copy.deepcopy(members[0]).to("meta")
        device = next(iter(self.params.values())).device
        self.lr = torch.tensor(list(lrs), device=device)
        self.m = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.v = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.t = 0

        def loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            return (functional_call(base, p, (xi,)) - yi).pow(2).mean()

        self._grads: Callable[..., dict[str, torch.Tensor]] = vmap(grad(loss))

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        grads = self._grads(self.params, x, y)
        self.t += 1
        b1, b2 = BETAS
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        for k, g in grads.items():
            m, v, p = self.m[k], self.v[k], self.params[k]
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            lr = self.lr.view(-1, *([1] * (p.dim() - 1)))
            p.sub_(lr / c1 * m / (v.sqrt() / c2 ** 0.5 + EPS))

    def member_params(self, i: int) -> dict[str, torch.Tensor]:
        return {k: v[i].clone() for k, v in self.params.items()}


class GraphTrainer(VmapTrainer):
    """:class:`VmapTrainer`'s step captured as one CUDA graph: the step count lives on the GPU
    (bias corrections as tensors), inputs are copied into fixed buffers before each replay."""

    def __init__(self, members: Sequence[nn.Module], lrs: Sequence[float], x: torch.Tensor,
                 y: torch.Tensor, warmup: int = 3) -> None:
        super().__init__(members, lrs)
        self.x, self.y = x.clone(), y.clone()
        self.steps = torch.zeros((), device=x.device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # capture needs warmed-up kernels, off the main stream
            for _ in range(warmup):
                self._step()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    def _step(self) -> None:
        grads = self._grads(self.params, self.x, self.y)
        self.steps += 1
        b1, b2 = BETAS
        c1, c2 = 1 - b1 ** self.steps, (1 - b2 ** self.steps).sqrt()
        for k, g in grads.items():
            m, v, p = self.m[k], self.v[k], self.params[k]
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            lr = self.lr.view(-1, *([1] * (p.dim() - 1)))
            p.sub_(lr / c1 * m / (v.sqrt() / c2 + EPS))

    def step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x.copy_(x)
        self.y.copy_(y)
        self.graph.replay()


def same_graph_update(n: int = 3, batch: int = 32, steps: int = 5) -> float:
    """Largest absolute difference between ``graph`` and ``vmap`` parameters after the same
    number of steps from the same start (on CUDA)."""
    lrs = [1e-3 * (i + 1) for i in range(n)]
    x, y = make_data(n, batch, device="cuda")
    graph = GraphTrainer(make_members(n, device="cuda"), lrs, x, y, warmup=3)
    vm = VmapTrainer(make_members(n, device="cuda"), lrs)
    for _ in range(3 + steps):
        vm.step(x, y)
    for _ in range(steps):
        graph.step(x, y)
    return max((graph.member_params(i)[k] - vm.member_params(i)[k]).abs().max().item()
               for i in range(n) for k in vm.params)


def same_update(n: int = 3, batch: int = 32, steps: int = 5, tol: float = 1e-5) -> float:
    """Largest absolute difference between the two variants' parameters after ``steps`` steps
    from the same start with different per-member learning rates (asserted below ``tol``)."""
    lrs = [1e-3 * (i + 1) for i in range(n)]
    loop = LoopTrainer(make_members(n), lrs)
    vm = VmapTrainer(make_members(n), lrs)
    x, y = make_data(n, batch)
    for _ in range(steps):
        loop.step(x, y)
        vm.step(x, y)
    worst = max((a[k] - vm.member_params(i)[k]).abs().max().item()
                for i, a in enumerate(loop.params()) for k in a)
    assert worst < tol, f"vmap and loop updates differ by {worst:.2e}"
    return worst


def rate(trainer: LoopTrainer | VmapTrainer | GraphTrainer, x: torch.Tensor, y: torch.Tensor,
         seconds: float) -> float:
    """Network steps per second over all members, after 5 warm-up steps."""
    def sync() -> None:
        if x.is_cuda:
            torch.cuda.synchronize()
    for _ in range(5):
        trainer.step(x, y)
    sync()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        trainer.step(x, y)
        calls += 1
    sync()
    return calls * x.shape[0] / (time.perf_counter() - start)


def measure(sizes: Sequence[int], batches: Sequence[int], device: str,
            seconds: float) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        for b in batches:
            lrs = [1e-3] * n
            x, y = make_data(n, b, device=device)
            loop = rate(LoopTrainer(make_members(n, device=device), lrs), x, y, seconds)
            vm = rate(VmapTrainer(make_members(n, device=device), lrs), x, y, seconds)
            row: dict[str, Any] = {"members": n, "batch": b, "device": device,
                                   "loop_steps_s": loop, "vmap_steps_s": vm, "ratio": vm / loop}
            line = (f"{n:>3} members, batch {b:>5}, {device}: loop {loop:9,.0f} steps/s, "
                    f"vmap {vm:9,.0f} steps/s, vmap/loop {vm / loop:.2f}x")
            if device.startswith("cuda"):
                row["graph_steps_s"] = rate(GraphTrainer(make_members(n, device=device), lrs,
                                                         x, y), x, y, seconds)
                line += (f", graph {row['graph_steps_s']:9,.0f} steps/s, graph/vmap "
                         f"{row['graph_steps_s'] / vm:.2f}x")
            rows.append(row)
            print(line, flush=True)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"vmap and loop agree to {same_update():.1e}")
    if args.device.startswith("cuda"):
        print(f"graph and vmap agree to {same_graph_update():.1e}")
    rows = measure(args.sizes, args.batches, args.device, args.seconds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
