"""Every kind of bad input, one row each, through the public entry points: a clear error of
the expected type whose message names the field, value or file, and (where something is
stored) nothing stored changes. Add a row to grow the list.

A row is ``Row(case, trigger, error, names, stored)``:

* ``trigger(ctx)`` feeds the bad input to a real entry point (config loading, ``distmarl``'s
  ``main``, env stepping, buffer, checkpoint loading);
* ``error`` is the exception it must raise (``CliExit`` for a ``distmarl`` command that exits
  non-zero; None for a setting that must *not* raise, whose trigger returns a report instead);
* ``names`` is a regex the message (or report) must match;
* ``stored(ctx)``, when given, puts something in place first and returns a function whose value
  must be the same before and after the trigger.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import torch

from distmarl.buffers import MultiAgentReplayBuffer
from distmarl.buffers.io import read_state
from distmarl.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from distmarl.cli import main
from distmarl.config import ConfigError, load_config
from distmarl.envs import NonFiniteError, make_vector_env
from distmarl.factory import preflight
from distmarl.runtime.actors.buffer import BufferShell
from tests.fakes import AGENTS, FIELDS, rows
from tests.test_resume_check import saved_run

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "configs" / "tiny.yaml"
CONNECT_FOUR = ROOT / "examples" / "configs" / "connect_four_ippo.yaml"  # an IPPO config
TICTACTOE = ROOT / "examples" / "configs" / "tictactoe_ippo_league.yaml"
TOY = "tests.envs.toy_envs"
NET = "speaker: {encoder_config: {hidden_size: [8]}}"  # a net_config entry for group "speaker"


class CliExit(Exception):
    """``distmarl ARGS`` exited with a non-zero code; the message is what it printed on stderr."""

    def __init__(self, code: int, stderr: str) -> None:
        super().__init__(f"exit {code}: {stderr}")
        self.code = code


def cli(*argv: str) -> str:
    """Run ``distmarl ARGV`` in-process; its stdout, or :class:`CliExit`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    if code != 0:
        raise CliExit(code, err.getvalue())
    return out.getvalue()


class Ctx:
    """One row's scratch space: ``tmp`` and whatever ``stored`` put in place."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runs = tmp / "runs"
        self.buffer: Any = None
        self.checkpoint: Path | None = None
        self.bad_file: Path | None = None


@dataclass(frozen=True)
class Row:
    case: str
    trigger: Callable[[Ctx], Any]
    error: type[BaseException] | None
    names: str
    stored: Callable[[Ctx], Callable[[], Any]] | None = None


# ---------------------------------------------------------------------------------- what is stored
def tree(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path`` (empty when it does not exist)."""
    if not path.exists():
        return {}
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def buffer_fingerprint(buf: MultiAgentReplayBuffer) -> str:
    state = buf.state_dict()
    h = hashlib.sha256(repr(state["meta"]).encode())
    for name in sorted(state["columns"]):
        h.update(name.encode() + np.ascontiguousarray(state["columns"][name]).tobytes())
    return h.hexdigest()


def filled_buffer() -> MultiAgentReplayBuffer:
    buf = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=0)
    buf.add(rows(np.arange(30)), member=1)
    buf.read(4, "learner-0")
    return buf


def runs_dir(ctx: Ctx) -> Callable[[], Any]:
    """The run folder a ``distmarl train`` would write into (it must stay as it is: absent)."""
    return lambda: tree(ctx.runs)


def buffer_in_place(ctx: Ctx) -> Callable[[], Any]:
    ctx.buffer = filled_buffer()
    return lambda: buffer_fingerprint(ctx.buffer)


def buffer_actor_in_place(ctx: Ctx) -> Callable[[], Any]:
    """The buffer actor's plain class holding 30 rows (a failed load must change nothing)."""
    ctx.buffer = BufferShell({"memory_size": 50, "field_names": FIELDS, "agent_ids": AGENTS,
                              "seed": 0})
    ctx.buffer.buffer.add(rows(np.arange(30)), member=1)
    return lambda: buffer_fingerprint(ctx.buffer.buffer)


def checkpoint_spoiled(how: str) -> Callable[[Ctx], Callable[[], Any]]:
    """A saved checkpoint, then ``how`` ("flip": one byte of member-1.pt, "cut": member-0.pt
    truncated); the checkpoint folder must stay as it is after the failed load."""

    def stored(ctx: Ctx) -> Callable[[], Any]:
        members = [{"algo": {"w": torch.full((4, 3), float(i))}, "updates": i} for i in range(2)]
        ctx.checkpoint = save_checkpoint(ctx.tmp / "checkpoints", 100, {"generation": 1},
                                         members, [filled_buffer().state_dict()])
        target = ctx.checkpoint / ("member-1.pt" if how == "flip" else "member-0.pt")
        data = bytearray(target.read_bytes())
        if how == "flip":
            data[len(data) // 2] ^= 0xFF
        else:
            del data[len(data) // 2:]
        target.write_bytes(bytes(data))
        return lambda: tree(ctx.checkpoint)

    return stored


def buffer_file(how: str) -> Callable[[Ctx], Callable[[], Any]]:
    """A buffer in place (``ctx.buffer``, the actor's plain class) and a bad buffer file
    (``ctx.bad_file``): "schema" drops a column, "cut" truncates it, "agents" is a good file of
    a buffer of other agents."""

    def stored(ctx: Ctx) -> Callable[[], Any]:
        snapshot = buffer_actor_in_place(ctx)
        path = ctx.tmp / "bad.arrow"
        if how == "agents":
            other = MultiAgentReplayBuffer(50, FIELDS, ["speaker_0", "ghost_0"], seed=0)
            chunk = rows(np.arange(10))
            for field in FIELDS:
                chunk[field]["ghost_0"] = chunk[field].pop("listener_0")
            other.add(chunk)
            other.save(path)
        else:
            filled_buffer().save(path)
        if how == "schema":
            table = pa.ipc.open_file(pa.py_buffer(path.read_bytes())).read_all()
            table = table.drop_columns(["listener_0/obs"])
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
                w.write_table(table)
        elif how == "cut":
            path.write_bytes(path.read_bytes()[:200])
        ctx.bad_file = path
        return snapshot

    return stored


# ---------------------------------------------------------------------------------- triggers
def config_file(ctx: Ctx, text: str) -> Path:
    path = ctx.tmp / "bad.yaml"
    path.write_text(text)
    return path


def base_cycle(ctx: Ctx) -> Path:
    """Two config files, each the other's base; returns the first."""
    (ctx.tmp / "two.yaml").write_text("base: one.yaml\n")
    path = ctx.tmp / "one.yaml"
    path.write_text("base: two.yaml\nname: x\n")
    return path


def uniform_update() -> None:
    buf = MultiAgentReplayBuffer(10, FIELDS, AGENTS)
    buf.add(rows(np.arange(4)))
    buf.update_priorities("c", np.array([0]), np.array([1.0]))


def train_cli(ctx: Ctx, *sets: str) -> str:
    """``distmarl train tiny.yaml --set ...`` writing (if it ever got that far) under ctx.runs."""
    args = ["train", str(TINY), "--quiet", "--no-mlflow", "--set", f"tracking.directory={ctx.runs}"]
    for item in sets:
        args += ["--set", item]
    return cli(*args)


def step_env(spec: str, nonfinite: str, steps: int, **kwargs: Any) -> Any:
    """``steps`` steps of 2 sub-envs of ``spec`` (toy envs: 2 agents, 4 discrete actions)."""
    venv = make_vector_env(spec, 2, mode="sync", nonfinite=nonfinite, **kwargs)
    venv.reset(seed=0)
    try:
        for _ in range(steps):
            venv.step({a: np.zeros(2, dtype=np.int64) for a in venv.agents})
        return venv
    finally:
        venv.close()


def dropped_report(ctx: Ctx) -> str:
    venv = step_env(f"{TOY}:NonFiniteEnv", "drop", 4)
    return f"dropped {venv.dropped_nonfinite} rows"


def wrong_env_action(ctx: Ctx) -> None:
    venv = make_vector_env(f"{TOY}:DyingEnv", 2, mode="sync", deaths=(9, 9))
    venv.reset(seed=0)
    try:
        venv.step({"d_0": np.zeros(3, dtype=np.int64), "d_1": np.zeros(2, dtype=np.int64)})
    finally:
        venv.close()


def wrong_buffer_action(ctx: Ctx) -> None:
    chunk = rows(np.arange(100, 108))
    chunk["action"]["speaker_0"] = np.zeros((8, 4), dtype=np.float32)
    ctx.buffer.add(chunk)


ROWS: list[Row] = [
    # config: unknown keys (closest one suggested), values out of range, hp bounds
    Row("unknown key in a config file",
        lambda c: load_config(config_file(c, "buffer: {capacty: 5}\n")),
        ConfigError, r"bad\.yaml(.|\n)*buffer\.capacty: unknown key 'capacty'; did you mean 'capacity'"),
    Row("a CUDA graph step for learners without a GPU, distmarl train --local",
        lambda c: cli("train", str(TINY), "--local", "--quiet", "--no-mlflow", "--set",
                      f"tracking.directory={c.runs}", "--set", "resources.learner_step=graph"),
        CliExit, r"exit 2: (.|\n)*resources\.learner_step=graph captures the update step as a "
                 r"CUDA graph, which needs GPU learners, but there is no GPU for them",
        runs_dir),
    Row("unknown key in --set",
        lambda c: load_config(TINY, ["training.max_step=5"]),
        ConfigError, r"tiny\.yaml(.|\n)*training\.max_step: unknown key 'max_step'; did you mean 'max_steps_per_member'"),
    Row("unknown key, distmarl train",
        lambda c: train_cli(c, "evolution.mutation.rl_hpp=0.1"),
        CliExit, r"exit 2: (.|\n)*unknown key 'rl_hpp'; did you mean 'rl_hp'", runs_dir),
    Row("unknown key: misspelled hyperparameter in a config file",
        lambda c: load_config(config_file(c, "algorithm: {name: MADDPG, hp: {lr_actr: 0.001}}\n")),
        ConfigError, r"bad\.yaml(.|\n)*algorithm\.hp\.lr_actr: unknown key 'lr_actr'; "
                     r"did you mean 'lr_actor'\?"),
    Row("unknown key: hyperparameter of another algorithm, distmarl train",
        lambda c: train_cli(c, "algorithm.name=IPPO", "algorithm.hp.lr_actor=0.001"),
        CliExit, r"exit 2: (.|\n)*algorithm\.hp\.lr_actor: unknown key 'lr_actor'", runs_dir),
    Row("hyperparameter out of range in --set",
        lambda c: load_config(TINY, ["algorithm.hp.gamma=1.5"]),
        ConfigError, r"tiny\.yaml(.|\n)*algorithm\.hp\.gamma: must be within \[0, 1\] \(got 1\.5\)"),
    Row("hyperparameter of the wrong type, distmarl train",
        lambda c: train_cli(c, "algorithm.hp.batch_size=many"),
        CliExit, r"exit 2: (.|\n)*algorithm\.hp\.batch_size: must be an int >= 1 \(got 'many'\)",
        runs_dir),
    Row("base: file that does not exist",
        lambda c: load_config(config_file(c, "base: nope.yaml\nname: x\n")),
        ConfigError, r"config file .*nope\.yaml \(the base of .*bad\.yaml\) does not exist"),
    Row("base: files that form a cycle, distmarl config show",
        lambda c: cli("config", "show", str(base_cycle(c))),
        CliExit, r"exit 2: (.|\n)*cycle of base: keys: .*one\.yaml -> .*two\.yaml -> .*one\.yaml"),
    Row("value out of range",
        lambda c: load_config(TINY, ["buffer.capacity=-1"]),
        ConfigError, r"buffer\.capacity: Input should be greater than or equal to 1 \(got -1\)"),
    Row("ratio out of range, distmarl train",
        lambda c: train_cli(c, "replay.replay_ratio=1.5"),
        CliExit, r"replay\.replay_ratio: Input should be less than 1 \(got 1\.5\)", runs_dir),
    Row("hyperparameter bounds min > max",
        lambda c: load_config(TINY, ["evolution.hp_config.lr_actor.min=0.1",
                                     "evolution.hp_config.lr_actor.max=0.01"]),
        ConfigError, r"evolution\.hp_config\.lr_actor: min 0\.1 is greater than max 0\.01"),
    Row("prioritised replay alpha < 0",
        lambda c: load_config(TINY, ["replay.prioritized_replay=true",
                                     "replay.prioritized_replay_alpha=-0.5"]),
        ConfigError, r"replay\.prioritized_replay_alpha: Input should be greater than or equal "
                     r"to 0 \(got -0\.5\)"),
    Row("prioritised replay on an on-policy algorithm",
        lambda c: load_config(CONNECT_FOUR, ["replay.prioritized_replay=true"]),
        ConfigError, r"replay: IPPO members read their own fragments once, in order: they have "
                     r"no replay settings"),
    Row("a mutation range for a replay setting the run lacks, distmarl train",
        lambda c: train_cli(c, "replay.prioritized_replay=false",
                            "evolution.hp_config.prioritized_replay_beta.min=0.4",
                            "evolution.hp_config.prioritized_replay_beta.max=1"),
        CliExit, r"evolution\.hp_config\.prioritized_replay_beta: set "
                 r"replay\.prioritized_replay: true first", runs_dir),
    Row("league opponent sources whose shares do not sum to 1",
        lambda c: load_config(TICTACTOE, ["league.opponents=[{source: current, share: 0.5}, "
                                          "{source: snapshot, share: 0.25}]"]),
        ConfigError, r"league\.opponents: the shares sum to 0\.75, not 1 "
                     r"\(got \[0\.5, 0\.25\]\)"),
    Row("league opponent share above 1",
        lambda c: load_config(TICTACTOE, ["league.opponents=[{source: current, share: 0.5}, "
                                          "{source: snapshot, share: 1.5}]"]),
        ConfigError, r"league\.opponents\.1\.share: Input should be less than or equal to 1 "
                     r"\(got 1\.5\)"),
    Row("league opponent source listed twice",
        lambda c: load_config(TICTACTOE, ["league.opponents=[{source: current, share: 0.5}, "
                                          "{source: current, share: 0.5}]"]),
        ConfigError, r"league\.opponents\.1\.source: listed already as opponents\[0\] "
                     r"\(got 'current'\)"),
    Row("league reference opponents with no references",
        lambda c: load_config(TICTACTOE, ["league.references=[]",
                                          "league.opponents=[{source: reference, share: 1}]"]),
        ConfigError, r"league\.opponents\.0\.source: a reference source needs "
                     r"league\.references, which is empty"),
    Row("a removed league knob",
        lambda c: load_config(TICTACTOE, ["league.reference_share=0.25"]),
        ConfigError, r"league\.reference_share: unknown key 'reference_share'; did you mean "
                     r"'references'\?"),
    Row("league opponents' random-move probability above 1",
        lambda c: load_config(TICTACTOE, ["league.opponent_epsilon=1.5"]),
        ConfigError, r"league\.opponent_epsilon: Input should be less than or equal to 1 "
                     r"\(got 1\.5\)"),
    Row("a mutation range for a setting the member's algorithm lacks",
        lambda c: load_config(CONNECT_FOUR, ["evolution.hp_config.replay_ratio.min=0.1",
                                             "evolution.hp_config.replay_ratio.max=0.9"]),
        ConfigError, r"\['replay_ratio'\] are not hyperparameters of IPPO"),
    Row("a mutated replay_ratio with no starting value",
        lambda c: load_config(TINY, ["replay.replay_ratio=null",
                                     "evolution.hp_config.replay_ratio.min=0.1",
                                     "evolution.hp_config.replay_ratio.max=0.9"]),
        ConfigError, r"evolution\.hp_config\.replay_ratio: members need a starting value"),
    Row("mixed population whose counts miss population.size",
        lambda c: load_config(TINY, ["population.members=[{algorithm: MADDPG, count: 1}]"]),
        ConfigError, r"population\.members: counts 1 = 1 members, but population\.size is 2"),
    Row("mixed population of two families",
        lambda c: load_config(TINY, ["population.members=[{algorithm: MADDPG, count: 1}, "
                                     "{algorithm: IPPO, count: 1}]",
                                     "evolution.tournament.size=1"]),
        ConfigError, r"population\.members\[1\]\.algorithm IPPO is not of the family of "
                     r"MADDPG"),
    Row("mixed population naming an unknown algorithm",
        lambda c: load_config(TINY, ["population.members=[{algorithm: MADDPG, count: 1}, "
                                     "{algorithm: MATD4, count: 1}]"]),
        ConfigError, r"population\.members\[1\]\.algorithm: unknown algorithm 'MATD4'"),
    Row("a mutation range a mixed population's algorithm lacks",
        lambda c: load_config(TINY, ["population.members=[{algorithm: MADDPG, count: 1}, "
                                     "{algorithm: MATD3, count: 1}]",
                                     "evolution.tournament.size=1",
                                     "evolution.hp_config.policy_freq={min: 1, max: 4}"]),
        ConfigError, r"evolution\.hp_config \(for population\.members\[0\], MADDPG\): "
                     r"hyperparameter\(s\) \['policy_freq'\] are not hyperparameters of MADDPG"),
    Row("a tournament larger than an algorithm's group",
        lambda c: load_config(TINY, ["population.members=[{algorithm: MADDPG, count: 1}, "
                                     "{algorithm: MATD3, count: 1}]"]),
        ConfigError, r"evolution\.tournament\.size 2 is larger than "
                     r"population\.members\[0\]\.count 1 \(MADDPG\)"),
    Row("a group's bad hyperparameter",
        lambda c: load_config(TINY, ["population.members=[{algorithm: MATD3, count: 2, "
                                     "hp: {policy_freq: 0}}]"]),
        ConfigError, r"population\.members\[0\]\.hp: MATD3 hyperparameter policy_freq must be "
                     r"an int >= 1, got 0"),
    Row("multi_frequency sub-populations that miss population.size",
        lambda c: load_config(TINY, ["evolution.mode=multi_frequency",
                                     "evolution.subpopulations=[{size: 1, evo_steps: 100}, "
                                     "{size: 2, evo_steps: 400}]"]),
        ConfigError, r"evolution\.subpopulations: sizes \[1, 2\] add up to 3, "
                     r"population\.size is 2"),
    Row("multi_frequency with a mixed population",
        lambda c: load_config(TINY, ["evolution.mode=multi_frequency",
                                     "evolution.subpopulations=[{size: 1, evo_steps: 100}, "
                                     "{size: 1, evo_steps: 400}]",
                                     "population.members=[{algorithm: MADDPG, count: 1}, "
                                     "{algorithm: MATD3, count: 1}]"]),
        ConfigError, r"population\.members go with evolution\.mode sync or async"),
    Row("n_step < 1",
        lambda c: load_config(TINY, ["replay.n_step=0"]),
        ConfigError, r"replay\.n_step: Input should be greater than or equal to 1 \(got 0\)"),
    Row("an old buffer key on an on-policy algorithm",
        lambda c: load_config(CONNECT_FOUR, ["buffer.n_step=3"]),
        ConfigError, r"'buffer\.n_step' \(now 'replay\.n_step'\) is a replay setting: IPPO "
                     r"members read their own fragments once and have none \(remove it\)"),
    Row("prioritised replay's update on a uniform buffer",
        lambda c: uniform_update(),
        ValueError, r"update_priorities needs a prioritized buffer"),
    # what only the env and the algorithm can check (preflight, before Ray starts)
    Row("unknown env",
        lambda c: preflight(load_config(TINY, ["env.spec=mpe2:nothing_v1"])),
        ConfigError, r"env\.spec 'mpe2:nothing_v1'.*has no 'nothing_v1'"),
    Row("unknown env, distmarl train",
        lambda c: train_cli(c, "env.spec=mpe2:nothing_v1"),
        CliExit, r"exit 2: .*env\.spec 'mpe2:nothing_v1'", runs_dir),
    Row("net_config for no such agent or group",
        lambda c: preflight(load_config(TINY, [f"algorithm.net_config={{{NET}, {NET.replace('speaker', 'listener')}, {NET.replace('speaker', 'bob')}}}"])),
        ConfigError, r"net_config keys \['bob'\] match no agent or group(.|\n)*"
                     r"agents: \['speaker_0', 'listener_0'\]"),
    Row("net_config missing an agent's group",
        lambda c: preflight(load_config(TINY, [f"algorithm.net_config={{{NET}}}"])),
        ConfigError, r"net_config has no entry for agent 'listener_0' \(nor its group 'listener'\)"),
    Row("net_config mismatch, distmarl train",
        lambda c: train_cli(c, "algorithm.net_config.bob.encoder_config.hidden_size=[3]"),
        CliExit, r"exit 2: .*net_config mixes network keys \['encoder_config'\] with agent/group "
                 r"keys \['bob'\]", runs_dir),
    Row("hp_config names no hyperparameter, distmarl train",
        lambda c: train_cli(c, "evolution.hp_config.lr_actr.min=0.1", "evolution.hp_config.lr_actr.max=1"),
        CliExit, r"\['lr_actr'\] are not hyperparameters of MADDPG", runs_dir),
    # envs: non-finite values (by config: raise naming sub-env and agent, or drop and count)
    Row("NaN observation, nonfinite=raise",
        lambda c: step_env(f"{TOY}:NonFiniteEnv", "raise", 2),
        NonFiniteError, r"sub-env 0 returned a non-finite \(NaN / inf\) observation for agent 'd_1'"),
    Row("inf reward, nonfinite=raise",
        lambda c: step_env(f"{TOY}:InfRewardEnv", "raise", 1),
        NonFiniteError, r"sub-env 0 returned a non-finite \(NaN / inf\) reward for agent 'd_0'"),
    Row("NaN observation and inf reward, nonfinite=drop",
        dropped_report, None, r"^dropped 4 rows$"),  # 2 sub-envs x (1 observation + 1 reward)
    # actions of the wrong shape
    Row("env action of the wrong shape",
        wrong_env_action,
        ValueError, r"actions\['d_0'\] has shape \(3,\), expected \(2,\)"),
    Row("buffer action of the wrong shape",
        wrong_buffer_action,
        ValueError, r"speaker_0(.|\n)*action(.|\n)*\(8, 4\)", buffer_in_place),
    # checkpoints
    Row("corrupted checkpoint",
        lambda c: load_checkpoint(c.checkpoint),
        CheckpointError, r"checksum mismatch in checkpoint file .*member-1\.pt",
        checkpoint_spoiled("flip")),
    Row("truncated checkpoint",
        lambda c: load_checkpoint(c.checkpoint.parent),  # the run's checkpoints/ root: latest
        CheckpointError, r"checkpoint file .*member-0\.pt is truncated or changed: \d+ bytes, "
                         r"manifest says \d+", checkpoint_spoiled("cut")),
    Row("corrupted checkpoint, distmarl evaluate",
        lambda c: cli("evaluate", str(c.checkpoint)),
        CliExit, r"exit 2: distmarl: checksum mismatch .*member-1\.pt", checkpoint_spoiled("flip")),
    # buffer files
    Row("buffer file with the wrong schema",
        lambda c: MultiAgentReplayBuffer.load(c.bad_file),
        ValueError, r"buffer file .*bad\.arrow has the wrong schema: missing columns "
                    r"\['listener_0/obs'\]", buffer_file("schema")),
    Row("truncated buffer file",
        lambda c: MultiAgentReplayBuffer.load(c.bad_file),
        ValueError, r"buffer file .*bad\.arrow is not a readable Arrow/Parquet file",
        buffer_file("cut")),
    Row("buffer file of other agents",
        lambda c: c.buffer.load_state_dict(read_state(c.bad_file)),
        ValueError, r"buffer state has agent_ids \['speaker_0', 'ghost_0'\], this buffer "
                    r"\['speaker_0', 'listener_0'\]", buffer_file("agents")),
    Row("buffer file with the wrong schema, distmarl buffer-info",
        lambda c: cli("buffer-info", str(c.bad_file)),
        CliExit, r"exit 2: .*bad\.arrow has the wrong schema", buffer_file("schema")),
    # CLI paths that do not exist
    Row("config file that does not exist, distmarl train",
        lambda c: cli("train", str(c.tmp / "nope.yaml"), "--no-mlflow"),
        CliExit, r"exit 2: distmarl: config file .*nope\.yaml does not exist"),
    Row("run directory that does not exist, distmarl train --resume",
        lambda c: cli("train", str(TINY), "--resume", str(c.tmp / "no-run")),
        CliExit, r"exit 2: distmarl: run directory .*no-run does not exist"),
    Row("checkpoint that does not exist, distmarl evaluate",
        lambda c: cli("evaluate", str(c.tmp / "no-ckpt")),
        CliExit, r"exit 2: distmarl: checkpoint .*no-ckpt does not exist"),
    Row("buffer file that does not exist, distmarl buffer-info",
        lambda c: cli("buffer-info", str(c.tmp / "none.arrow")),
        CliExit, r"exit 2: distmarl: buffer file .*none\.arrow does not exist"),
    Row("config file that does not exist, distmarl config show",
        lambda c: cli("config", "show", str(c.tmp / "nope.yaml")),
        CliExit, r"exit 2: distmarl: config file .*nope\.yaml does not exist"),
    Row("frame_skip range written as two positional values",
        lambda c: preflight(load_config(TINY, ["env.wrappers=[{frame_skip: [2, 4]}]"])),
        ConfigError, r"env\.wrappers\[0\] frame_skip: \[2, 4\] would be num_frames=2, "
                     r"default_action=4; write a range as \{frame_skip: \{num_frames: \[2, 4\]\}\}"),
    Row("checkpoint of another population size, distmarl train --resume",
        lambda c: cli("train", str(TINY), "--quiet", "--no-mlflow", "--resume", str(c.tmp / "run")),
        CliExit, r"exit 2: distmarl: --resume .*run: the config does not fit checkpoint "
                 r"step-000000000400:\n  population\.size: the checkpoint has 4 members, the "
                 r"config 2\n$", lambda c: saved_run(c.tmp / "run", members=4)),
    Row("float dtype forced on an integer hyperparameter's mutation range",
        lambda c: load_config(TINY, ["evolution.hp_config.learn_step={min: 1, max: 16, "
                                     "dtype: float}"]),
        ConfigError, r"evolution\.hp_config\.learn_step: dtype float, but learn_step is an "
                     r"integer hyperparameter of MADDPG; leave dtype out"),
    Row("episode step limit out of range",
        lambda c: load_config(TINY, ["env.max_episode_steps=0"]),
        ConfigError, r"env\.max_episode_steps: must be an int >= 1 or 'auto' \(got 0\)"),
    Row("Sequence observation (knights_archers_zombies vector-sequence)",
        lambda c: preflight(load_config(TINY, [
            "env.spec=pettingzoo.butterfly:knights_archers_zombies_v11",
            "env.kwargs={obs_method: vector-sequence}", "algorithm.net_config={}"])),
        ConfigError, r"agent 'archer_0''s observation is Sequence\(.*obs_method 'vector'"),
    Row("channels_last that is not a bool",
        lambda c: preflight(load_config(TINY, ["algorithm.net_config={channels_last: maybe}"])),
        ConfigError, r"net_config\['channels_last'\] must be true or false .*got 'maybe'"),
    Row("buffer larger than the machine's memory",
        lambda c: preflight(load_config(TINY, [
            "env.spec=tests.envs.toy_envs:CrowdEnv", "env.kwargs={n_agents: 4}",
            "algorithm.net_config={}", "buffer.capacity=1000000000"])),
        ConfigError, r"buffer\.capacity 1000000000 rows x about .* KB per row \(one env step "
                     r"of 4 agents\) = .* TB, more than this machine's memory"),
    Row("env that fails on reset (preflight's random steps)",
        lambda c: preflight(load_config(TINY, [f"env.spec={TOY}:BrokenEnv",
                                               "env.kwargs={fails_on: reset}"])),
        ConfigError, r"^env\.spec 'tests\.envs\.toy_envs:BrokenEnv': the env failed on reset: "
                     r"RuntimeError: simulator broke on reset$"),
    Row("env that aborts its process on step",
        lambda c: preflight(load_config(TINY, [f"env.spec={TOY}:BrokenEnv",
                                               "env.kwargs={fails_on: step, how: abort}"])),
        ConfigError, r"the env failed on step: killed its process \(SIGABRT"),
    Row("old version of a PettingZoo env",
        lambda c: preflight(load_config(TINY, ["env.spec=pettingzoo.butterfly:pistonball_v5"])),
        ConfigError, r"^env\.spec 'pettingzoo\.butterfly:pistonball_v5': 'pistonball_v5' is an "
                     r"old version .*use 'pettingzoo\.butterfly:pistonball_v6'"),
    Row("PettingZoo MPE env under its old package",
        lambda c: preflight(load_config(TINY, ["env.spec=pettingzoo.mpe:simple_speaker_listener_v3"])),
        ConfigError, r"moved to the 'mpe2' package: use 'mpe2:simple_speaker_listener_v4'"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.case for r in ROWS])
def test_bad_input_is_named_and_changes_nothing(row: Row, tmp_path: Path) -> None:
    ctx = Ctx(tmp_path)
    snapshot = row.stored(ctx) if row.stored is not None else None
    before = snapshot() if snapshot is not None else None
    if row.error is None:
        message = str(row.trigger(ctx))
    else:
        with pytest.raises(row.error) as err:
            row.trigger(ctx)
        message = str(err.value)
    assert re.search(row.names, message), f"{row.names!r} not in: {message}"
    if snapshot is not None:
        assert snapshot() == before, "something stored changed"


def test_every_kind_of_bad_input_has_a_row() -> None:
    """Each kind of bad input the project promises to refuse is matched by at least one row."""
    items = ["unknown key", "out of range", "unknown env", "net_config", "min > max",
             "NaN observation", "inf reward", "nonfinite=drop", "action of the wrong shape",
             "corrupted checkpoint", "truncated checkpoint", "buffer file with the wrong schema",
             "does not exist"]
    cases = [r.case for r in ROWS]
    assert [i for i in items if not any(i in c for c in cases)] == []
