"""Rate limiting, state_dict and Arrow / Parquet files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from distmarl.buffers import MultiAgentReplayBuffer, SampleToInsertRatio
from distmarl.types import ReadSpec
from tests.fakes import AGENTS, FIELDS, check_aligned, rows


def test_rate_limiter_holds_samples_per_insert() -> None:
    buf = MultiAgentReplayBuffer(10_000, FIELDS, AGENTS, seed=0, learning_starts=100,
                                 samples_per_insert=4, error_buffer=256)
    buf.add(rows(np.arange(100)))
    sampled = 0
    while (batch := buf.read(64)) is not None:
        sampled += len(batch.indices)
    # offset = 4 * 100 = 400; sampling stops once inserts * 4 - samples < 400 - 256
    assert 400 - 256 - 64 < 100 * 4 - sampled <= 400 - 256 + 64
    assert sampled == 256  # 4 batches of 64
    # writers are refused when they run too far ahead of samplers
    assert buf.can_insert(10)
    assert not buf.can_insert(200)  # (300 * 4 - 256) > 400 + 256
    buf.add(rows(np.arange(100, 132)))  # 32 more rows allow 128 more sampled rows
    extra = 0
    while (batch := buf.read(64)) is not None:
        extra += len(batch.indices)
    assert extra == 128


def test_rate_limiter_keeps_the_ratio_over_a_long_run() -> None:
    limiter = SampleToInsertRatio(samples_per_insert=2.0, error_buffer=100, min_size_to_sample=50)
    rng = np.random.default_rng(0)
    size = 0
    for _ in range(5000):
        if rng.random() < 0.7 and limiter.can_insert(10, size):  # a fast writer
            limiter.record_insert(10)
            size += 10
        elif limiter.can_sample(32, size):
            limiter.record_sample(32)
    ratio = limiter.samples / limiter.inserts
    assert abs(limiter.diff() - 100) <= 100 + 32
    assert 1.9 < ratio <= 2.0


def test_state_dict_round_trip_restores_rows_cursors_and_rng() -> None:
    a = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=3, replay_ratio=0.5)
    a.add(rows(np.arange(70)), member=2)
    a.read(10, "x")
    b = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=99, replay_ratio=0.5)
    b.load_state_dict(a.state_dict())
    assert (len(b), b.counter) == (50, 70)
    assert b.consumers["x"].cursor == a.consumers["x"].cursor
    for _ in range(3):
        sa, sb = a.read(16, "x"), b.read(16, "x")
        np.testing.assert_array_equal(sa.indices, sb.indices)
        check_aligned(sb.data)
    a.add(rows(np.arange(70, 75)))
    b.add(rows(np.arange(70, 75)))
    np.testing.assert_array_equal(a.read(8, "y").indices, b.read(8, "y").indices)


def test_state_with_consumers_without_skipped_counts_loads() -> None:
    """Saved states whose consumers carry no ``skipped`` counter load with zero skipped."""
    a = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=3)
    a.register("x", ReadSpec.stream())
    a.add(rows(np.arange(30)))
    a.read(10, "x")
    state = a.state_dict()
    assert state["meta"]["consumers"]["x"] == {"cursor": 10, "received_new": 10, "dropped": 0,
                                               "skipped": 0}
    del state["meta"]["consumers"]["x"]["skipped"]
    b = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=3)
    b.load_state_dict(state)  # its consumers' registered reads come with it
    assert b.consumers["x"] == a.consumers["x"]
    np.testing.assert_array_equal(b.read(32, "x").indices, np.arange(10, 30))


@pytest.mark.parametrize("suffix", [".arrow", ".parquet"])
def test_save_load_round_trip(tmp_path, suffix) -> None:
    a = MultiAgentReplayBuffer(40, FIELDS, AGENTS, seed=3, replay_ratio=0.25, learning_starts=5)
    a.add(rows(np.arange(30)), member=1)
    a.add(rows(np.arange(30, 55)), member=4)
    a.read(10, "learner-0")
    path = a.save(tmp_path / f"buf{suffix}")
    b = MultiAgentReplayBuffer.load(path)
    assert b.config() == a.config()
    assert (len(b), b.counter, b.consumers["learner-0"]) == (40, 55, a.consumers["learner-0"])
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["meta"] == sb["meta"]
    for key in sa["columns"]:
        np.testing.assert_array_equal(sa["columns"][key], sb["columns"][key], err_msg=key)
        assert sa["columns"][key].dtype == sb["columns"][key].dtype
    np.testing.assert_array_equal(a.read(16, "learner-0").indices,
                                  b.read(16, "learner-0").indices)
    assert not list(tmp_path.glob(".*tmp*"))  # atomic write left no temporary file


def test_saved_file_reads_with_pandas(tmp_path) -> None:
    buf = MultiAgentReplayBuffer(40, FIELDS, AGENTS, seed=3)
    buf.add(rows(np.arange(12)), member=7)
    path = buf.save(tmp_path / "buf.arrow")
    with pa.memory_map(str(path)) as src:
        table = pa.ipc.open_file(src).read_all()
    df = table.to_pandas()
    assert list(df.columns[:2]) == ["speaker_0/obs", "listener_0/obs"]
    assert len(df) == 12 and (df["__member__"] == 7).all()
    np.testing.assert_array_equal(np.stack(df["listener_0/obs"])[:, 0], np.arange(12) + 1)
    meta = json.loads(table.schema.metadata[b"distmarl.buffer"])
    assert meta["counter"] == 12


def test_empty_buffer_round_trip(tmp_path) -> None:
    a = MultiAgentReplayBuffer(10, FIELDS, AGENTS, seed=0)
    b = MultiAgentReplayBuffer.load(a.save(tmp_path / "empty.arrow"))
    assert len(b) == 0 and b.read(4) is None
    b.add(rows(np.arange(3)))
    assert len(b) == 3


def _table_with(path, table, like=None):
    if like is not None:  # keep the original file's metadata: only the columns are wrong
        table = table.replace_schema_metadata(like.schema.metadata)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def test_buffer_file_with_wrong_schema(tmp_path) -> None:
    buf = MultiAgentReplayBuffer(10, FIELDS, AGENTS, seed=0)
    buf.add(rows(np.arange(5)))
    path = buf.save(tmp_path / "buf.arrow")
    with pa.memory_map(str(path)) as src:
        table = pa.ipc.open_file(src).read_all()
    renamed = table.rename_columns(["speaker_0/obz", *table.column_names[1:]])
    _table_with(tmp_path / "renamed.arrow", renamed, like=table)
    with pytest.raises(ValueError, match=r"wrong schema: missing columns \['speaker_0/obs'\], unknown columns \['speaker_0/obz'\]"):
        MultiAgentReplayBuffer.load(tmp_path / "renamed.arrow")
    retyped = table.set_column(2, "speaker_0/action", pa.array(np.zeros(5, np.int64)))
    _table_with(tmp_path / "retyped.arrow", retyped, like=table)
    with pytest.raises(ValueError, match="column 'speaker_0/action'"):
        MultiAgentReplayBuffer.load(tmp_path / "retyped.arrow")
    _table_with(tmp_path / "foreign.arrow", pa.table({"x": [1, 2]}))
    with pytest.raises(ValueError, match=r"no 'distmarl\.buffer' metadata"):
        MultiAgentReplayBuffer.load(tmp_path / "foreign.arrow")
    (tmp_path / "junk.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(ValueError, match=r"junk\.arrow is not a readable"):
        MultiAgentReplayBuffer.load(tmp_path / "junk.arrow")
    with pytest.raises(FileNotFoundError, match=r"nothere\.arrow"):
        MultiAgentReplayBuffer.load(tmp_path / "nothere.arrow")


def test_load_state_into_mismatched_buffer_changes_nothing() -> None:
    a = MultiAgentReplayBuffer(10, FIELDS, AGENTS, seed=0)
    a.add(rows(np.arange(5)))
    other = MultiAgentReplayBuffer(10, FIELDS, ["speaker_0"], seed=0)
    with pytest.raises(ValueError, match="agent_ids"):
        other.load_state_dict(a.state_dict())
    assert other.counter == 0
    state = a.state_dict()
    state["columns"]["listener_0/obs"] = state["columns"]["listener_0/obs"][:, :5]
    b = MultiAgentReplayBuffer(10, FIELDS, AGENTS, seed=0)
    b.add(rows(np.arange(100, 103)))
    with pytest.raises(ValueError, match="column 'listener_0/obs' has shape"):
        b.load_state_dict(state)
    assert b.counter == 3 and b.read(3).indices.max() <= 2


#: A prioritised buffer file written before consumers registered their reads (each asked with
#: its settings in every call), and the next three reads of each consumer it gave then.
BEFORE_SPECS = Path(__file__).parent / "data" / "buffer_before_read_specs.arrow"


def test_a_buffer_written_before_reads_were_registered_reads_on_as_it_did() -> None:
    """Its consumers register what they used to ask for in each call and get the very rows,
    new / replay split and importance weights they got then (cursors, trees and the
    generator all came back)."""
    expected = json.loads(BEFORE_SPECS.with_suffix(".json").read_text())
    buf = MultiAgentReplayBuffer.load(BEFORE_SPECS)
    assert sorted(buf.consumers) == sorted(expected)
    specs = {"learner-0": ReadSpec.mixin(0.25, alpha=0.8, beta=0.5),
             "ippo-1": ReadSpec.stream(member=1), "replay-0": ReadSpec.replay(member=0)}
    for name, spec in specs.items():
        buf.register(name, spec)
    for name, reads in expected.items():  # "default" reads as the buffer's replay_ratio says
        for want in reads:
            got = buf.read(6, name)
            assert got is not None and want is not None
            indices, num_new, weights = want
            assert got.indices.tolist() == indices and got.num_new == num_new, name
            if weights is None:
                assert got.weights is None
            else:
                np.testing.assert_allclose(got.weights, weights, atol=1e-6)


def test_a_file_of_a_buffer_whose_default_was_streaming_loads(tmp_path) -> None:
    """Written when ``replay_ratio=0`` meant streaming: it loads with replay only as the
    default, its consumers' places kept; a streaming consumer registers its stream."""
    a = MultiAgentReplayBuffer(50, FIELDS, AGENTS, seed=3)
    a.add(rows(np.arange(30)))
    a.register("x", ReadSpec.stream())
    a.read(10, "x")
    state = a.state_dict()
    state["meta"]["config"]["replay_ratio"] = 0.0
    del state["meta"]["readers"]
    from distmarl.buffers.io import write_state

    b = MultiAgentReplayBuffer.load(write_state(state, tmp_path / "old.arrow"))
    assert b.replay_ratio is None and b.consumers["x"].cursor == 10
    b.register("x", ReadSpec.stream())
    np.testing.assert_array_equal(b.read(32, "x").indices, np.arange(10, 30))

