"""grouped_step: several networks' Adam steps on a summed loss equal one step per network."""

from __future__ import annotations

import pytest
import torch

from distmarl.algorithms.common.adam import Adam
from distmarl.algorithms.common.grouped_step import grouped_step


def _nets(seed: int) -> list[torch.nn.Module]:
    gen = torch.Generator().manual_seed(seed)
    nets = [torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
            for _ in range(3)]
    with torch.no_grad():
        for p in (p for n in nets for p in n.parameters()):
            p.copy_(torch.randn(p.shape, generator=gen))
    return nets


def _losses(nets: list[torch.nn.Module], x: torch.Tensor) -> list[torch.Tensor]:
    """Network i's own loss."""
    return [(n(x) - i).pow(2).mean() for i, n in enumerate(nets)]


@pytest.mark.parametrize("max_norm", [0.0, 0.05])
def test_matches_one_step_per_network(max_norm: float) -> None:
    x = torch.randn(16, 5, generator=torch.Generator().manual_seed(1))
    a, b = _nets(0), _nets(0)
    # different rates; the reference steps torch's own Adam, one network at a time
    opts_a = [Adam(a[0].parameters(), lr=1e-2), Adam(a[1].parameters(), lr=1e-3),
              Adam(a[2].parameters(), lr=1e-2, betas=(0.8, 0.99))]
    opts_b = [torch.optim.Adam(b[0].parameters(), lr=1e-2, fused=True),
              torch.optim.Adam(b[1].parameters(), lr=1e-3, fused=True),
              torch.optim.Adam(b[2].parameters(), lr=1e-2, betas=(0.8, 0.99), fused=True)]
    start = [p.detach().clone() for n in a for p in n.parameters()]
    for _ in range(3):
        grouped_step(opts_a, torch.stack(_losses(a, x)).sum(), max_norm)
        _stepwise(b, opts_b, x, max_norm)
    for na, nb in zip(a, b, strict=True):
        for pa, pb in zip(na.parameters(), nb.parameters(), strict=True):
            torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-5, atol=1e-6)
    moved = [p for n in a for p in n.parameters()]
    assert all(not torch.equal(p, p0) for p, p0 in zip(moved, start, strict=True))
    for oa, ob in zip(opts_a, opts_b, strict=True):  # the optimisers' own state, same format
        sa, sb = oa.state_dict()["state"], ob.state_dict()["state"]
        assert sa.keys() == sb.keys()
        for k in sa:
            assert sa[k].keys() == sb[k].keys()
            for key in sa[k]:
                assert sa[k][key].dtype == sb[k][key].dtype, key
                torch.testing.assert_close(sa[k][key], sb[k][key], rtol=1e-5, atol=1e-7)
    if max_norm > 0:  # the clip did something: each network's gradient is at most max_norm
        for net in a:
            norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in net.parameters()]))
            assert norm <= max_norm * (1 + 1e-4)


def _stepwise(nets, optims, x, max_norm: float) -> None:
    """The reference: one network at a time, each on its own loss."""
    for i, (net, opt) in enumerate(zip(nets, optims, strict=True)):
        params = list(net.parameters())
        grads = torch.autograd.grad((net(x) - i).pow(2).mean(), params)  # _losses(nets, x)[i]
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, max_norm)
        opt.step()


def test_a_network_outside_the_group_gets_no_gradient_and_does_not_move() -> None:
    nets = _nets(2)
    x = torch.randn(8, 5)
    opt = Adam(nets[2].parameters(), lr=1e-2)
    frozen = [p.detach().clone() for p in nets[0].parameters()]
    loss = _losses(nets, x)[2] + nets[0](x).mean()  # runs network 0, as an actor's loss a critic
    grouped_step([opt], loss, 0.0)
    assert all(p.grad is None for p in nets[0].parameters())
    assert all(torch.equal(p, f) for p, f in zip(nets[0].parameters(), frozen, strict=True))
    assert all(p.grad is not None for p in nets[2].parameters())
