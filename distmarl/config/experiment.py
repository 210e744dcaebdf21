"""``ExperimentConfig``: one pydantic model for a whole run, its sections as models.

Every section is its own model and each component receives only its own section. Unknown keys
are rejected with the closest valid name suggested. ``algorithm`` is a union discriminated on
``algorithm.name``: each algorithm's section carries its own typed hyperparameters
(:mod:`distmarl.config.hparams`), so a misspelled or out-of-range hyperparameter fails here.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import Discriminator, Field, Tag, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from distmarl.config.evolution import (
    EvolutionConfig,
    MultiFrequencyEvolution,
    SyncEvolution,
)
from distmarl.config.hparams import (
    Hyperparameters,
    IPPOHyperparameters,
    MADDPGHyperparameters,
    MAPPOHyperparameters,
    MATD3Hyperparameters,
    check_search_ranges,
    on_policy,
    search_dtypes,
)
from distmarl.config.members import (
    check_group_ranges,
    check_group_tournaments,
    member_algorithms,
    member_hp,
)
from distmarl.config.replay import (
    DEFAULT_N_STEP,
    REPLAY_CAPACITY,
    FragmentRows,
    fragment_rows,
    replay_hp,
)
from distmarl.config.section import UNKNOWN_KEY, ForeignKeyWarning, Section


class EnvConfig(Section):
    spec: str = Field("mpe2:simple_speaker_listener_v4",
                      description="env to build: 'package.module:env' or 'package.module:callable'")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="keyword arguments passed to the env constructor (none: the env's own defaults)")
    wrappers: list[str | dict[str, Any]] = Field(
        default_factory=list,
        description="SuperSuit wrappers applied in order, e.g. [{resize: {x_size: 64, y_size: 64}}, {frame_stack: 4}]")
    num_envs: int = Field(8, ge=1, description="sub-envs per rollout worker")
    vector_mode: Literal["sync", "async"] = Field("sync", description="sub-envs in-process (sync) or in subprocesses (async)")
    nonfinite: Literal["raise", "drop"] = Field("raise", description="NaN/inf observations or rewards: raise, or drop the rows and count them")
    max_episode_steps: int | Literal["auto"] = Field("auto", description="env steps after which an episode still running is cut, in training (its agents truncated, so learners bootstrap) and in every evaluation and league game (a cut game counts as a draw, and cut games are counted in the results). auto: the env's own limit where it declares one (max_cycles, max_steps, spec.max_episode_steps); else, for a turn-based board game, 8 moves per cell of its board or per action, whichever are more (go 5x5: 208); else 10000, with a warning")

    @field_validator("max_episode_steps", mode="before")
    @classmethod
    def _step_limit(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and not isinstance(value, bool)
                               and value >= 1):
            return value
        raise ValueError("must be an int >= 1 or 'auto'")


NET_CONFIG_DESCRIPTION = "network config in AgileRL's form: one for all agents, per group, or per agent"
HP_DESCRIPTION = "initial hyperparameters (AgileRL names); missing ones take the algorithm's defaults"


def _default_net_config() -> dict[str, Any]:
    return {}


class AlgorithmConfig(Section):
    """The members' algorithm: its name, hyperparameters and networks. Each algorithm has its
    own subclass, whose ``hp`` is that algorithm's typed hyperparameters."""

    name: str = Field(description="the members' algorithm")
    hp: Hyperparameters = Field(description=HP_DESCRIPTION)
    net_config: dict[str, Any] = Field(default_factory=_default_net_config,
                                       description=NET_CONFIG_DESCRIPTION)


class MADDPGConfig(AlgorithmConfig):
    name: Literal["MADDPG"] = Field("MADDPG", description="the members' algorithm")
    hp: MADDPGHyperparameters = Field(default_factory=MADDPGHyperparameters, description=HP_DESCRIPTION)


class MATD3Config(AlgorithmConfig):
    name: Literal["MATD3"] = Field("MATD3", description="the members' algorithm")
    hp: MATD3Hyperparameters = Field(default_factory=MATD3Hyperparameters, description=HP_DESCRIPTION)


class IPPOConfig(AlgorithmConfig):
    name: Literal["IPPO"] = Field("IPPO", description="the members' algorithm")
    hp: IPPOHyperparameters = Field(default_factory=IPPOHyperparameters, description=HP_DESCRIPTION)


class MAPPOConfig(AlgorithmConfig):
    name: Literal["MAPPO"] = Field("MAPPO", description="the members' algorithm")
    hp: MAPPOHyperparameters = Field(default_factory=MAPPOHyperparameters, description=HP_DESCRIPTION)


#: Each algorithm's config section, by ``algorithm.name``.
ALGORITHM_CONFIGS: dict[str, type[AlgorithmConfig]] = {
    "MADDPG": MADDPGConfig, "MATD3": MATD3Config, "IPPO": IPPOConfig, "MAPPO": MAPPOConfig,
}
#: The algorithm of a section that names none.
DEFAULT_ALGORITHM = "MADDPG"


def _algorithm_name(value: Any) -> Any:
    """The discriminator: ``name`` of a mapping (MADDPG when it names none) or of a model."""
    if isinstance(value, Mapping):
        return value.get("name", DEFAULT_ALGORITHM)
    return value.name if isinstance(value, AlgorithmConfig) else None


#: The ``algorithm`` section: one of :data:`ALGORITHM_CONFIGS`, chosen by its ``name``.
AnyAlgorithmConfig = Annotated[
    Annotated[MADDPGConfig, Tag("MADDPG")] | Annotated[MATD3Config, Tag("MATD3")]
    | Annotated[IPPOConfig, Tag("IPPO")] | Annotated[MAPPOConfig, Tag("MAPPO")],
    Discriminator(_algorithm_name),
]


class MemberGroupConfig(Section):
    algorithm: str = Field(description="these members' algorithm (MADDPG, MATD3, IPPO, MAPPO)")
    count: int = Field(1, ge=1, description="how many members run it")
    hp: dict[str, Any] = Field(default_factory=dict, description="their hyperparameters over the algorithm section's (those their algorithm has)")


class PopulationConfig(Section):
    size: int = Field(4, ge=1, description="number of population members")
    workers_per_member: int = Field(1, ge=1, description="rollout workers per member")
    members_per_learner: Annotated[int, Field(ge=1)] | Literal["auto"] = Field("auto", description="members whose learners share one process, learning together (members of one network shape updated as one stacked computation); the population is split into groups of at most this many, in member order. auto: on a cluster with GPUs for learners, as many learners as the GPUs take at resources.num_gpus_per_learner each, the members spread over them; on CPU, one learner per core, the members spread over them; in one process (--local), all members in one stack")
    members: list[MemberGroupConfig] | None = Field(None, description="a population of mixed algorithms of one family: groups of members, in member order ({algorithm: MATD3, count: 2}); their counts add up to size. None: every member runs the algorithm section")
    cross_algorithm: Literal["refuse", "convert"] = Field("refuse", description="a mixed population's copies: refuse (tournaments within each algorithm, a member copies only its own algorithm's) or convert (tournaments over all members; a member whose winner runs another algorithm is rebuilt for it and takes its state)")


class BufferConfig(Section):
    capacity: int = Field(REPLAY_CAPACITY, ge=1, description="rows the shared buffer holds (a row: one env step of every agent). Left out: 100000 for members that replay (MADDPG, MATD3); for IPPO and MAPPO twice the rows of the fragments that can wait unread (members x (workers_per_member + 1) x learn_step x env.num_envs), which is all they need")
    snapshot_interval_s: float = Field(0.0, ge=0, description="seconds between buffer snapshots for recovery (0: off)")
    shards: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(1, description="replay shards: buffer actors that each hold about 1/N of every member's rows (each rollout worker writes its chunks to them in turn) and sample side by side; a learner reads every shard, each granting the updates its rows earned, prioritised replay keeping each shard's priorities. The capacity, replay.learning_starts, replay.learning_delay and the writers' wait are divided among them. auto: one per node of the cluster (one with --local). At most members x workers_per_member")


class ReplayConfig(Section):
    """How members that learn from replayed rows (MADDPG, MATD3) read and write the buffer;
    the section exists for them only (IPPO and MAPPO read their own fragments once)."""

    replay_ratio: float | None = Field(None, gt=0, lt=1, description="None: replay only (uniform, or by priority with prioritized_replay); r: share of replayed rows per batch, the rest each learner's newest unseen rows (members may override and evolve it: algorithm.hp.replay_ratio)")
    learning_starts: int = Field(1_000, ge=0, description="rows stored before learners sample")
    learning_delay: int = Field(0, ge=0, description="env steps per member before learning starts")
    max_policy_lag: int = Field(4, ge=0, description="how far a learner may fall behind its member's data, in weight versions (times training.weight_sync_updates updates), beyond the round of updates it reads at once: past that the member's workers wait for it, which bounds how many versions a chunk's policy lags its learner's newest")
    samples_per_insert: float | None = Field(None, gt=0, description="rate limit: sampled rows per inserted row")
    error_buffer: float | None = Field(None, gt=0, description="rate limit tolerance in sampled rows")
    n_step: int = Field(DEFAULT_N_STEP, ge=1, description="each row spans up to n env steps (its n rewards, undiscounted, and the observation n steps on), cut at episode ends and at each agent's termination; learners discount with their own gamma and bootstrap with gamma ** n")
    prioritized_replay: bool = Field(True, description="replay rows in proportion to each learner's own TD errors (a sum-tree per learner), with importance weights in its critic losses")
    prioritized_replay_alpha: float = Field(0.6, ge=0, description="prioritised replay: priority exponent (0: uniform, 1: proportional to |TD error|); members may override and evolve it (algorithm.hp)")
    prioritized_replay_beta: float = Field(0.4, ge=0, le=1, description="prioritised replay: importance-weight exponent (1: full correction); members may override and evolve it (algorithm.hp)")
    prioritized_replay_eps: float = Field(1e-6, gt=0, description="prioritised replay: added to every |TD error|, so no row's priority is 0")

    @property
    def prioritized(self) -> dict[str, float] | None:
        """Prioritised replay's ``{alpha, beta, eps}`` (the buffer's ``prioritized``
        argument), None when it is off."""
        if not self.prioritized_replay:
            return None
        return {"alpha": self.prioritized_replay_alpha, "beta": self.prioritized_replay_beta,
                "eps": self.prioritized_replay_eps}


#: keys that moved to the replay section: where they were -> where they are
MOVED_TO_REPLAY = {
    **{f"buffer.{k}": f"replay.{k}" for k in (
        "replay_ratio", "learning_starts", "samples_per_insert", "error_buffer", "n_step",
        "prioritized_replay", "prioritized_replay_alpha", "prioritized_replay_beta",
        "prioritized_replay_eps")},
    "training.learning_delay": "replay.learning_delay",
    "training.max_policy_lag": "replay.max_policy_lag",
}


class TrainingConfig(Section):
    RENAMED: ClassVar[dict[str, str]] = {"max_steps": "max_steps_per_member"}

    max_steps_per_member: int = Field(300_000, ge=1, description="env steps of each member: the run ends when every member has taken this many (the population takes population.size times this; the progress bar counts the population's)")
    target: float | None = Field(None, description="stop when the best fitness reaches this")
    weight_sync_updates: int = Field(8, ge=1, description="learner updates between weight publishes (off-policy; on-policy learners publish after every fragment)")
    chunk_steps: int = Field(16, ge=1, description="vectorised env steps per rollout-worker call (one buffer write); on-policy workers send whole fragments of learn_step steps instead")


class ResourceConfig(Section):
    num_gpus_per_learner: float = Field(0.0, ge=0, description="GPUs per learner (fractions allowed); used when the cluster has GPUs")
    num_cpus_per_learner: float = Field(1.0, ge=0, description="CPUs reserved per learner")
    num_cpus_per_worker: float = Field(1.0, ge=0, description="CPUs reserved per rollout worker")
    num_cpus_buffer: float = Field(0.0, ge=0, description="CPUs reserved for the buffer actor")
    learner_step: Literal["auto", "eager", "compiled", "graph"] = Field("auto", description="how an off-policy learner runs its update step: eager (operation by operation), compiled (torch.compile, once per network shape and padded batch size: batches are padded to 8, 12, 16, 24, 32, 48, ... rows), graph (captured once per shape as a CUDA graph and replayed: GPU learners only). A compilation or capture that fails warns once and runs eagerly. auto: eager on CPU, graph on a GPU (the faster on each, as measured). On-policy learners run eagerly")
    colocate: bool | Literal["auto"] = Field("auto", description="run each member's first rollout worker in its learner's process (one process per member fewer: each process imports torch and builds the networks). auto: where the cluster has fewer CPUs than a learner and a worker per member, whose processes could not all run at once anyway")


class TrackingConfig(Section):
    RENAMED: ClassVar[dict[str, str]] = {"keep_last": "keep_checkpoints"}

    mlflow: bool = Field(True, description="track the run in MLflow")
    mlflow_uri: str | None = Field(None, description="tracking server URI (None: a local store in the run directory, or MLFLOW_TRACKING_URI)")
    experiment_name: str | None = Field(None, description="MLflow experiment (None: the config's name)")
    parent_run: str | None = Field(None, description="an MLflow run id (in the same store and experiment) to nest this run's parent run under; distmarl sweep sets it to the sweep's run")
    tags: dict[str, str] = Field(default_factory=dict, description="more tags on the run's MLflow parent run (distmarl sweep adds distmarl.sweep and distmarl.arm)")
    directory: str = Field("runs", description="where run directories are created (the run is written there as it goes)")
    storage: str | None = Field(None, description="where runs are kept: a shared folder, or an object store's URI (s3://bucket/runs, gs://bucket/runs, hdfs://host/runs; credentials and endpoints from the environment, as pyarrow reads them). Each run's folder is copied to <storage>/<run name>: every checkpoint once written (its manifest last, so a half-copied one is never read), the rest at the end; --resume, evaluate, play, export and buffer-info read from it. None: the run directory only")
    write_interval: int | Literal["auto"] = Field("auto", description="env steps per member between metric writes ('auto': training.max_steps_per_member / 100; <= 0 disables)")
    checkpoint_interval: int | Literal["auto"] = Field("auto", description="env steps per member between checkpoints ('auto': training.max_steps_per_member / 10; <= 0 disables)")
    keep_checkpoints: int = Field(3, ge=1, description="checkpoints kept: the last so many, and the best (taken at the highest fitness of any member's latest evaluation); checkpoints are written in the background, so training goes on meanwhile")
    videos: bool = Field(True, description="at the end of a tracked run, GIFs of the elite's greedy episode (the final evaluation's first seed) in the run folder and in MLflow under videos/, where the env renders rgb_array frames: elite.gif (a league with sides: each side's elite against the others'; a symmetric game: the elite against random moves), and in a league <side>_vs_<reference>.gif (symmetric: elite_vs_<reference>.gif) for each reference but random")
    video_every_generations: int = Field(0, ge=0, description="during a tracked run with videos on, the current elite's elite.gif every so many generations as videos/generation_<g>.gif (0: only at the end)")
    log_buffer: bool = Field(False, description="upload the last checkpoint's replay buffer to MLflow with the rest of it (the checkpoint on disk keeps it either way; it can be gigabytes for image envs)")


#: how far ``league.opponents``' shares may sum from 1
OPPONENT_SHARE_TOLERANCE = 1e-6


class OpponentConfig(Section):
    source: Literal["current", "snapshot", "reference"] = Field(description="current: the members playing the opponent's side now; snapshot: their frozen copies (taken every snapshot_every generations); reference: the references (league.references)")
    share: float = Field(ge=0, le=1, description="share of a learner's training games against this source")
    weighting: Literal["hard", "variance", "uniform"] = Field("hard", description="how PFSP weighs the source's players by the learner's win rate p against them: hard (1 - p)^2 (the ones it loses to), variance p (1 - p) (the closest results), uniform (all alike: a beaten reference stays in play)")


def _default_opponents() -> list[OpponentConfig]:
    return [OpponentConfig(source="current", share=0.5),
            OpponentConfig(source="snapshot", share=0.5)]


class LeagueConfig(Section):
    sides: dict[str, list[str]] | None = Field(None, description="a competitive or mixed game's sides: side name -> agent groups (simple_tag: {predators: [adversary], prey: [agent]}); each side has its own population of population.size members")
    symmetric: bool = Field(False, description="a game whose seats all play the same role (connect four, tictactoe, rps): one population takes every seat")
    snapshot_every: int = Field(2, ge=1, description="generations between snapshots of every member joining the league as frozen opponents")
    max_snapshots: int = Field(8, ge=1, description="snapshots the league holds (the oldest leave first)")
    opponents: list[OpponentConfig] = Field(default_factory=_default_opponents, description="where a learner's training opponents come from: a list of sources, each at most once, their shares summing to 1; a game draws a source by share, then one of its players by PFSP. A source with no player passes its games on: snapshot, before the first is taken, to the current members; current, for a learner with no other member, to the snapshots (with neither, the learner plays itself); reference, on a side no reference plays, to the other sources in proportion to their shares. Default: half the games against current members, half against snapshots (the references are evaluation opponents only)")
    opponent_epsilon: float = Field(0.0, ge=0, le=1, description="probability that an opponent's move in a training game is replaced by a uniformly random legal one (evaluation games never are): strong opponents rarely leave the positions weak play reaches, such as two of a line left open, so a learner trained only against them may never learn to answer those. 0: opponents play their own moves")
    references: list[str] = Field(default_factory=lambda: ["random"], description="reference opponents: random (its rating never moves: the scale's 0), minimax (tictactoe), lookahead (connect four), flee (simple_tag's prey); the others are rated with the league")
    win_above: dict[str, float] | None = Field(None, description="mixed games whose scores do not oppose: one side and a threshold; that side wins a game when its agents' summed return is above it, every other side otherwise (simple_tag: {predators: 0}, a catch). None: the side with the highest score wins")
    eval_games: int = Field(20, ge=2, description="evaluation games of every member against each reference and each other member per generation (seats alternate)")

    @model_validator(mode="after")
    def _opponent_sources(self) -> LeagueConfig:
        """Each source listed once, a reference source only with references, the shares
        summing to 1 (within ``OPPONENT_SHARE_TOLERANCE``); each error located at its item
        (``league.opponents.1.source``) or at the list (the sum)."""
        problems: list[InitErrorDetails] = []

        def problem(loc: tuple[str | int, ...], message: str, value: Any) -> None:
            problems.append(InitErrorDetails(type=PydanticCustomError("league_opponents", message),
                                             loc=loc, input=value))

        first: dict[str, int] = {}
        for i, o in enumerate(self.opponents):
            if o.source in first:
                problem(("opponents", i, "source"),
                        f"listed already as opponents[{first[o.source]}]", o.source)
            first.setdefault(o.source, i)
            if o.source == "reference" and not self.references and self.enabled:
                problem(("opponents", i, "source"),
                        "a reference source needs league.references, which is empty", o.source)
        shares = [o.share for o in self.opponents]
        if abs(sum(shares) - 1.0) > OPPONENT_SHARE_TOLERANCE:
            problem(("opponents",), f"the shares sum to {sum(shares):g}, not 1", shares)
        if problems:
            raise ValidationError.from_exception_data(type(self).__name__, problems)
        return self

    @property
    def enabled(self) -> bool:
        """Whether the game is competitive (sides or symmetric set): fitness is a rating."""
        return bool(self.sides) or self.symmetric


class ExperimentConfig(Section):
    MOVED: ClassVar[dict[str, str]] = MOVED_TO_REPLAY

    @classmethod
    def _moved(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """The keys of :data:`MOVED_TO_REPLAY` moved to ``replay``; for members without replay
        (IPPO, MAPPO), ``training``'s (which they ignored) dropped with a warning saying so,
        and ``buffer``'s an error naming the key."""
        name = _algorithm_name(data.get("algorithm", {}))
        if not (name in ALGORITHM_CONFIGS and on_policy(name)):
            return super()._moved(data)
        out = dict(data)
        for old, new in cls.MOVED.items():
            section, key = old.split(".")
            if not (isinstance(out.get(section), Mapping) and key in out[section]):
                continue
            if section == "buffer":
                raise PydanticCustomError(
                    UNKNOWN_KEY, "'{key}' (now '{new}') is a replay setting: {name} members "
                    "read their own fragments once and have none (remove it)",
                    {"key": old, "new": new, "name": name})
            out[section] = {k: v for k, v in out[section].items() if k != key}
            warnings.warn(f"config key '{old}' (now '{new}') does nothing for {name} members, "
                          "which read their own fragments once: ignored",
                          ForeignKeyWarning, stacklevel=2)
        return out

    name: str = Field("distmarl", description="run name")
    seed: int = Field(0, description="seed of every random generator of the run")
    env: EnvConfig = Field(default_factory=EnvConfig)
    algorithm: AnyAlgorithmConfig = Field(default_factory=MADDPGConfig,
                                          description="the members' algorithm, hyperparameters and networks")
    population: PopulationConfig = Field(default_factory=PopulationConfig)
    evolution: EvolutionConfig = Field(default_factory=SyncEvolution, description="evaluation, selection and mutation; the keys besides the common ones depend on evolution.mode")
    buffer: BufferConfig = Field(default_factory=BufferConfig)
    replay: ReplayConfig | None = Field(None, description="replay settings of members that learn from replayed rows (MADDPG, MATD3; filled with its defaults for them when left out); IPPO and MAPPO, which read their own fragments once, have none")
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    resources: ResourceConfig = Field(default_factory=ResourceConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    league: LeagueConfig = Field(default_factory=LeagueConfig, description="competitive and mixed games: sides, snapshots, opponents and ratings (absent: a cooperative game)")

    @property
    def num_members(self) -> int:
        """Members of the run: ``population.size``, per side in a league with named sides."""
        return self.population.size * (len(self.league.sides) if self.league.sides else 1)

    @property
    def row_steps(self) -> int:
        """Env steps a buffer row spans: ``replay.n_step``, 1 for members without replay."""
        return 1 if self.replay is None else self.replay.n_step

    def fragment_rows(self) -> FragmentRows:
        """What on-policy members can have waiting unread in the buffer, with the largest
        ``learn_step`` they may reach (configured, per member group, or searched)."""
        searched = self.evolution.hp_config.get("learn_step")
        steps = [self.algorithm.hp.learn_step, *(() if searched is None else (searched.max,)),
                 *(g.hp.get("learn_step") for g in self.population.members or [])]
        return fragment_rows(self.num_members, self.population.workers_per_member, steps,
                             self.env.num_envs)

    @model_validator(mode="after")
    def _cross_checks(self) -> ExperimentConfig:
        # members are of the algorithm section's family (population.members: _check_groups)
        replays = not on_policy(self.algorithm.name)
        if replays and self.replay is None:
            self.replay = ReplayConfig()
        if not replays and self.replay is not None:
            raise ValueError(f"replay: {self.algorithm.name} members read their own fragments "
                             "once, in order: they have no replay settings (remove the replay "
                             "section)")
        if "capacity" not in self.buffer.model_fields_set and not replays:
            self.buffer = self.buffer.model_copy(
                update={"capacity": self.fragment_rows().capacity})
        writers = self.num_members * self.population.workers_per_member
        if isinstance(self.buffer.shards, int) and self.buffer.shards > writers:
            raise ValueError(f"buffer.shards {self.buffer.shards} is more than the {writers} "
                             "rollout workers that write to them (members x "
                             "population.workers_per_member): a shard would hold no rows")
        evo = self.evolution
        if isinstance(evo, SyncEvolution) and evo.tournament.size > self.population.size:
            raise ValueError(f"evolution.tournament.size {evo.tournament.size} is larger "
                             f"than population.size {self.population.size}")
        if self.league.sides and self.league.symmetric:
            raise ValueError("league: set either sides or symmetric: true, not both")
        if self.league.enabled and self.evolution.mode == "multi_frequency":
            raise ValueError("evolution.mode multi_frequency: a league copies members only "
                             "within their side, and sub-populations would mix the sides "
                             "(use sync or async)")
        self._check_subpopulations()
        self._fill_search_dtypes()
        ranges = {n: (p.min, p.max) for n, p in self.evolution.hp_config.items()}
        if self.population.members is not None:  # the section is the groups' base
            self._check_groups(set(ranges))
            return self
        try:
            check_search_ranges(self.algorithm.name, ranges)
        except ValueError as err:
            raise ValueError(f"evolution.hp_config: {err}") from None
        filled = replay_hp(self.algorithm.name, self.algorithm.hp.as_dict(), self.replay,
                           set(ranges))
        if filled:
            hp = self.algorithm.hp.model_copy(update=filled)
            self.algorithm = self.algorithm.model_copy(update={"hp": hp})
        return self

    def _fill_search_dtypes(self) -> None:
        """Each ``evolution.hp_config`` range's ``dtype``, from its hyperparameter's type in the
        members' algorithms (:func:`~distmarl.config.hparams.search_dtypes`)."""
        algorithms = [a for a in (self.algorithm.name,
                                  *(g.algorithm for g in self.population.members or []))
                      if a in ALGORITHM_CONFIGS]  # unknown names: the groups' check says so
        ranges = self.evolution.hp_config
        for name, dtype in search_dtypes(algorithms, {n: p.dtype for n, p in ranges.items()}
                                         ).items():
            if ranges[name].dtype != dtype:
                ranges[name] = ranges[name].model_copy(update={"dtype": dtype})

    def _check_subpopulations(self) -> None:
        if not isinstance(self.evolution, MultiFrequencyEvolution):
            return
        subs = self.evolution.subpopulations
        if len(subs) < 2:
            raise ValueError("evolution.subpopulations: multi_frequency needs at least 2")
        if sum(s.size for s in subs) != self.population.size:
            raise ValueError(f"evolution.subpopulations: sizes {[s.size for s in subs]} add up "
                             f"to {sum(s.size for s in subs)}, population.size is "
                             f"{self.population.size}")
        steps = [s.evo_steps for s in subs]
        if steps != sorted(set(steps)):
            raise ValueError(f"evolution.subpopulations: evo_steps {steps} must increase "
                             "(fastest first), each its own")
        if self.population.members is not None:
            raise ValueError("evolution.mode multi_frequency migrates weights between "
                             "sub-populations, which a mixed population's algorithms cannot "
                             "share: population.members go with evolution.mode sync or async")

    def member_evo_steps(self) -> list[int]:
        """Each member's env steps between its evolution steps (multi_frequency: its
        sub-population's; members numbered through the sub-populations in order)."""
        evo = self.evolution
        if not isinstance(evo, MultiFrequencyEvolution):
            return [evo.evo_steps] * self.num_members
        return [s.evo_steps for s in evo.subpopulations for _ in range(s.size)]

    def _check_groups(self, searched: set[str]) -> None:
        groups = [g.model_dump() for g in self.population.members or []]
        member_algorithms(groups, self.population.size)
        if on_policy(groups[0]["algorithm"]) != on_policy(self.algorithm.name):
            raise ValueError(f"algorithm.name {self.algorithm.name} is not of the family of "
                             f"population.members ({groups[0]['algorithm']}): the algorithm "
                             "section is the members' base (hyperparameters, net_config); name "
                             "one of their algorithms")
        if self.league.enabled:
            raise ValueError("population.members: a league's population runs the algorithm "
                             "section (mixed algorithms are for cooperative games)")
        check_group_ranges(groups, {n: (p.min, p.max)
                                    for n, p in self.evolution.hp_config.items()})
        evo = self.evolution
        if self.population.cross_algorithm == "refuse" and isinstance(evo, SyncEvolution):
            check_group_tournaments(groups, evo.tournament.size)
        for i, _ in enumerate(groups):
            self.group_algorithm(i, searched)

    def group_algorithm(self, index: int, searched: set[str] | None = None) -> AlgorithmConfig:
        """The algorithm section of ``population.members[index]``'s members (see
        :mod:`distmarl.config.members`)."""
        group = (self.population.members or [])[index]
        where = f"population.members[{index}]"
        hp = member_hp(self.algorithm.hp.as_dict(), group.algorithm, group.hp, where)
        hp.update(replay_hp(group.algorithm, hp, self.replay,
                            searched or set(self.evolution.hp_config)))
        return ALGORITHM_CONFIGS[group.algorithm].model_validate(
            {"name": group.algorithm, "hp": hp, "net_config": self.algorithm.net_config})

    def member_algorithm_configs(self) -> list[AlgorithmConfig]:
        """Each member's algorithm section, in member order (every side's in a league)."""
        if self.population.members is None:
            return [self.algorithm] * self.num_members
        return [self.group_algorithm(i) for i, g in enumerate(self.population.members)
                for _ in range(g.count)]

    def to_yaml(self) -> str:
        return str(yaml.safe_dump(json.loads(self.model_dump_json()), sort_keys=False))

    def flat(self) -> dict[str, Any]:
        """Every leaf as ``section.key`` -> value (for MLflow params)."""
        return flatten_dict(json.loads(self.model_dump_json()))


def flatten_dict(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out |= flatten_dict(v, key + ".")
        else:
            out[key] = v
    return out
