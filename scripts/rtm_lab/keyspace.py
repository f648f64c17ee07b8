"""A skewed key space both engines are fed, and where each engine sends each key.

The engine comparison sends events whose user is drawn from KEYS users with Zipf skew (exponent ZIPF_S): user0 is the
most frequent, user9999 the least. The draw is a pure function of the event's sequence number and SEED, so every run
at one rate and duration sends the same users in the same order, to either engine.

Where a key goes is each engine's own partitioner, written out here so every run can record each task's share:
- Spark's shuffle (the aggregation's exchange): `pmod(murmur3(key), numPartitions)`, Spark's Murmur3Hash with seed 42
  over the key's UTF-8 bytes (Murmur3_x86_32.hashUnsafeBytes, which mixes each trailing byte on its own).
- Flink's keyed exchange (a SQL GROUP BY): the key is a BinaryRowData of the grouping columns; its hashCode is
  MurmurHashUtil.hashByWords over the row's bytes; MathUtils.murmurHash of that picks a key group out of
  maxParallelism, and the key group picks the operator: keyGroup * parallelism // maxParallelism.
"""

import bisect
import itertools
import random
import struct
from collections import Counter
from collections.abc import Iterable
from functools import cache

KEYS = 10_000
ZIPF_S = 1.0  # the Zipf exponent: key k (from 1) has weight 1 / k**ZIPF_S
SEED = 20260101
ENRICHED_KEYS = 1_000  # rows of the enrichment table: a seeded sample of the key space, not its hottest keys
TIER_NAMES = ("gold", "silver", "bronze")
SPARK_HASH_SEED = 42
FLINK_DEFAULT_MAX_PARALLELISM = 128  # Flink's default for an operator of parallelism <= 85


def user(rank: int) -> str:
    return f"user{rank}"


@cache
def _cumulative() -> list[float]:
    return list(itertools.accumulate(1.0 / (k**ZIPF_S) for k in range(1, KEYS + 1)))


def _uniform(seq: int) -> float:
    """A number in [0, 1) fixed by SEED and `seq` (splitmix64): no generator state to share between processes."""
    z = (seq * 0x9E3779B97F4A7C15 + SEED) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53)


def user_of(seq: int) -> str:
    """The user of event `seq`: a Zipf draw over KEYS users."""
    cumulative = _cumulative()
    return user(min(bisect.bisect_right(cumulative, _uniform(seq) * cumulative[-1]), KEYS - 1))


@cache
def enrichment_table() -> tuple[tuple[str, str], ...]:
    """ENRICHED_KEYS (user, tier) rows: a seeded sample of the users, so the share of events that match is the
    sample's Zipf weight, recorded per run rather than chosen."""
    ranks = sorted(random.Random(SEED).sample(range(KEYS), ENRICHED_KEYS))
    return tuple((user(rank), TIER_NAMES[rank % len(TIER_NAMES)]) for rank in ranks)


def describe() -> dict:
    return {
        "keys": KEYS,
        "zipf_exponent": ZIPF_S,
        "seed": SEED,
        "enrichment_rows": ENRICHED_KEYS,
        "enrichment_sample": "seeded random sample of the users (random.Random(seed).sample)",
    }


# ---------------------------------------------------------------- 32-bit arithmetic as the JVM does it


def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def _rotl(x: int, r: int) -> int:
    x &= 0xFFFFFFFF
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _mix_k1(k1: int) -> int:
    return (_rotl(k1 * 0xCC9E2D51, 15) * 0x1B873593) & 0xFFFFFFFF


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF


def _fmix(h1: int, length: int) -> int:
    h1 = (h1 ^ length) & 0xFFFFFFFF
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & 0xFFFFFFFF
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & 0xFFFFFFFF
    return h1 ^ (h1 >> 16)


def _words(data: bytes, seed: int) -> int:
    h1 = seed & 0xFFFFFFFF
    for (word,) in struct.iter_unpack("<i", data[: len(data) - len(data) % 4]):
        h1 = _mix_h1(h1, _mix_k1(word))
    return h1


# ---------------------------------------------------------------- Spark


def spark_hash(key: str | int) -> int:
    """Spark's `hash(key)` for a string or a bigint (Murmur3Hash, seed 42): what HashPartitioning takes the pmod of."""
    if isinstance(key, int):  # hashLong: the low word, then the high word
        return _i32(_fmix(_words(struct.pack("<q", key), SPARK_HASH_SEED), 8))
    data = key.encode()
    h1 = _words(data, SPARK_HASH_SEED)
    for byte in data[len(data) - len(data) % 4 :]:
        h1 = _mix_h1(h1, _mix_k1(_i32(byte - 256 if byte > 127 else byte)))  # a signed byte, as Platform.getByte
    return _i32(_fmix(h1, len(data)))


def spark_partition(key: str | int, partitions: int) -> int:
    return spark_hash(key) % partitions  # Python's % is already a pmod


# ---------------------------------------------------------------- Flink


def flink_row_bytes(key: str | int) -> bytes:
    """The BinaryRowData of a one-column row (STRING or BIGINT): 8 bytes of header and null bits, one 8-byte field
    slot, and strings over 7 bytes in a variable part padded to 8 bytes (shorter ones sit in the slot, length | 0x80
    last)."""
    header = bytes(8)  # RowKind INSERT (0), no nulls
    if isinstance(key, int):
        return header + struct.pack("<q", key)
    data = key.encode()
    if len(data) <= 7:
        return header + data.ljust(7, b"\0") + bytes([0x80 | len(data)])
    slot = struct.pack("<q", (16 << 32) | len(data))  # offset of the variable part, then the length
    return header + slot + data.ljust(-(-len(data) // 8) * 8, b"\0")


def flink_key_hash(key: str | int) -> int:
    """BinaryRowData.hashCode: MurmurHashUtil.hashByWords (seed 42) over the whole row."""
    row = flink_row_bytes(key)
    return _i32(_fmix(_words(row, 42), len(row)))


def _flink_murmur(code: int) -> int:
    """MathUtils.murmurHash: one Murmur3 round of an int, made non-negative."""
    h = _fmix(_mix_h1(0, _mix_k1(code)), 4)
    signed = _i32(h)
    if signed >= 0:
        return signed
    return -signed if signed != -(1 << 31) else 0


def flink_operator(key: str | int, parallelism: int, max_parallelism: int = FLINK_DEFAULT_MAX_PARALLELISM) -> int:
    key_group = _flink_murmur(flink_key_hash(key)) % max_parallelism
    return key_group * parallelism // max_parallelism


# ---------------------------------------------------------------- shares


def task_counts(keys: Iterable, place) -> dict[int, int]:
    """How many of `keys` (one per event) each task gets, by `place(key) -> task`."""
    per_key = Counter(keys)
    counts: Counter = Counter()
    for key, n in per_key.items():
        counts[place(key)] += n
    return dict(sorted(counts.items()))


def shares(counts: dict[int, int], tasks: int) -> list[float]:
    total = sum(counts.values()) or 1
    return [round(counts.get(task, 0) / total, 4) for task in range(tasks)]
