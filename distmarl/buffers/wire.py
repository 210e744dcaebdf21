"""Sampled batches as one ``bytes`` object, for sending across processes.

A :class:`~distmarl.types.JoinedSample` holds a dozen or more numpy arrays. Ray serialises each
array of a returned value through its own out-of-band buffer path, which costs about as much as
the sampling itself for a 1024-row batch; one ``bytes`` object costs a fraction of that.
:func:`pack_joined` writes it as pickle protocol 5 *in band* (arrays copied into the byte
string once) and :func:`unpack_joined` reads it back as writable arrays.

Only the buffer's own output is packed, and only its reader unpacks it (both sides of one
Ray job): the same trust Ray's pickled task results already rely on.
"""

from __future__ import annotations

import pickle

from distmarl.types import JoinedSample

#: Bumped if the layout changes; a reader refuses bytes of another version.
WIRE_VERSION = 2


def pack_joined(sample: JoinedSample) -> bytes:
    """``sample`` -> bytes."""
    return pickle.dumps((WIRE_VERSION, tuple(sample)), protocol=5)


def unpack_joined(data: bytes) -> JoinedSample:
    """The sample :func:`pack_joined` wrote, as writable numpy arrays."""
    version, item = pickle.loads(data)
    if version != WIRE_VERSION:
        raise ValueError(f"packed batches of wire version {version}; this reader knows "
                         f"{WIRE_VERSION} (the buffer and its readers run different distmarl)")
    return JoinedSample(*item)
