"""Start-up: every actor process imports its module; what it does not need stays out (numba
is for the buffer's prioritised replay only, matplotlib for plots only, torch for learners and
acting, not the buffer), since each import is paid once per process and a run starts many."""

from __future__ import annotations

import json
import subprocess
import sys


def test_actor_modules_leave_numba_and_matplotlib_unimported() -> None:
    code = ("import json, sys\n"
            "import distmarl.runtime.actors.learner, distmarl.runtime.actors.rollout\n"
            "import distmarl.runtime.actors.buffer, distmarl.runtime.coordinator.run\n"
            "print(json.dumps(sorted(m for m in ('numba', 'matplotlib') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_buffer_actor_and_the_envs_leave_torch_unimported() -> None:
    code = ("import json, sys\n"
            "import distmarl.runtime.actors.buffer, distmarl.envs, distmarl.tree\n"
            "print(json.dumps('torch' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) is False


def test_the_first_tree_compiles_the_kernels_once() -> None:
    from distmarl.buffers import sumtree

    a, b = sumtree.SumTree(8), sumtree.SumTree(16)
    assert a._k is b._k
    a.set([0, 3], [1.0, 3.0])
    assert a.find([0.5, 1.5])[0] == 0 and a.find([1.5])[0] == 3
