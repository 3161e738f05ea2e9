"""Caches that cannot lie: the per-user key (suite/core/keyed.py), the golden store
(suite/harness/goldens.py) and the QNN context cache (targets/batching.py ContextCache).

Nothing read from disk is unpickled, and an entry this user's key did not authenticate
(forged, damaged, moved, written under another key) is ignored: it never changes a verdict."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import pickle
import stat
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from suite.core import keyed
from suite.core.keyed import KeyProblem, mac, user_key, verify
from suite.harness import goldens as gmod
from suite.harness.goldens import GoldenStore, folder_of, golden_version
from targets.batching import CONTEXT_FORMAT, ContextCache

D1 = "0123456789abcdef"
D2 = "fedcba9876543210"
SCHEME = "tflite-ref-double"


@pytest.fixture(autouse=True)
def own_key_file(tmp_path, monkeypatch):
    """Every test reads and makes its key under tmp_path, never the user's ~/.cache/qconform/key."""
    path = tmp_path / "keys" / "key"
    monkeypatch.setenv(keyed.KEY_ENV, str(path))
    return path


@pytest.fixture
def key(own_key_file) -> bytes:
    return user_key()


def _entry(store: GoldenStore, digest: str) -> Path:
    return store.path_of(digest)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ----------------------------------------------------------------------------- the key file

def test_the_key_file_is_made_once_with_mode_0600_and_reused(own_key_file):
    assert keyed.key_path() == own_key_file and not own_key_file.exists()
    k = user_key()
    st = os.stat(own_key_file)
    assert len(k) == 32 and stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert user_key() == k == user_key(own_key_file)
    assert own_key_file.read_bytes() == k
    assert [p.name for p in own_key_file.parent.iterdir()] == ["key"]    # no temporary file left
    # a creator that loses the race keeps the winner's key (the link to an existing name fails)
    keyed._create_key(own_key_file)
    assert user_key() == k and [p.name for p in own_key_file.parent.iterdir()] == ["key"]


def _key_of(path: str) -> bytes:
    return user_key(Path(path))


def test_processes_making_the_key_at_once_all_get_the_same_key(tmp_path):
    path = tmp_path / "race" / "key"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        keys = pool.map(_key_of, [str(path)] * 16)
    assert len(set(keys)) == 1 and keys[0] == path.read_bytes() and len(keys[0]) == 32


@pytest.mark.parametrize("make, why", [
    (lambda p: (p.write_bytes(os.urandom(32)), p.chmod(0o644)), "mode 0644"),
    (lambda p: (p.write_bytes(os.urandom(32)), p.chmod(0o620)), "mode 0620"),
    (lambda p: p.mkdir(), "not a regular file"),
    (lambda p: os.mkfifo(p, 0o600), "not a regular file"),
    (lambda p: ((p.parent / "elsewhere").write_bytes(os.urandom(32)), (p.parent / "elsewhere").chmod(0o600),
                p.symlink_to(p.parent / "elsewhere")), "symbolic link"),
    (lambda p: (p.write_bytes(b"short"), p.chmod(0o600)), "holds 5 bytes"),
    (lambda p: (p.write_bytes(os.urandom(64)), p.chmod(0o600)), "holds 33+ bytes"),
])
def test_an_unsafe_key_file_is_refused_and_the_stores_are_off(own_key_file, tmp_path, make, why):
    own_key_file.parent.mkdir(parents=True)
    make(own_key_file)
    with pytest.raises(KeyProblem) as err:
        user_key()
    assert why in str(err.value) and str(own_key_file) in str(err.value)
    before = sorted(own_key_file.parent.iterdir())
    store = GoldenStore(tmp_path / "golden")
    assert not store.enabled and len(store.problems) == 1
    assert "key unsafe" in store.problems[0] and why in store.problems[0]
    store.put(D1, {SCHEME: [np.arange(3, dtype=np.int8)]})
    assert store.get(D1) is None and not (tmp_path / "golden").exists()
    cache = ContextCache(tmp_path / "qnn")
    assert not cache.enabled and "key unsafe" in cache.problems[0]
    assert cache.dump_path("k") is None and cache.lookup("k") == (None, None, None)
    cache.store_failure("k", "no")
    assert not (tmp_path / "qnn").exists()
    assert sorted(own_key_file.parent.iterdir()) == before      # the unsafe file is left as it was


def test_a_key_file_of_another_user_is_refused(own_key_file):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    own_key_file.parent.mkdir(parents=True)
    own_key_file.write_bytes(os.urandom(32))
    own_key_file.chmod(0o600)
    os.chown(own_key_file, 4242, -1)
    with pytest.raises(KeyProblem, match="owned by uid 4242"):
        user_key()


def test_the_mac_covers_part_boundaries_and_verify_is_strict():
    k = os.urandom(32)
    assert mac(k, "ab", "c") != mac(k, "a", "bc") != mac(k, "abc")
    assert mac(k, "x", b"y") == mac(k, b"x", memoryview(b"y")) == mac(k, "x", np.frombuffer(b"y", np.uint8))
    tag = mac(k, "a", b"b")
    assert verify(k, tag, "a", b"b") and verify(k, tag.upper(), "a", b"b")
    assert not verify(os.urandom(32), tag, "a", b"b") and not verify(k, tag, "a", b"c")
    assert not verify(k, hashlib.sha256(b"ab").hexdigest(), "a", b"b")
    for junk in ("", "zz", tag[:-1], tag + "0", "é" * 64, None, 3):
        assert verify(k, junk, "a", b"b") is False


# ----------------------------------------------------------------------------- the golden store

def _every_dtype() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [
        rng.integers(-128, 128, (3, 4), dtype=np.int8),
        rng.integers(0, 256, (5,), dtype=np.uint8),
        rng.integers(-2**15, 2**15, (2, 3, 2), dtype=np.int16),
        rng.integers(0, 2**16, (7,), dtype=np.uint16),
        rng.integers(-2**31, 2**31, (4, 1), dtype=np.int32),
        rng.integers(-8, 8, (9,), dtype=np.int8),                            # int4 codes as int8
        np.array([0.5, -0.0, np.inf, -np.inf, np.nan, 1e-45], dtype=np.float32),
        np.array([[1 / 3, -2.5e300], [np.nan, 5e-324]], dtype=np.float64),   # the "exact" scheme
        np.array(-7, dtype=np.int8),                                         # 0-d
        np.array(2.25, dtype=np.float64),                                    # 0-d float
        np.zeros((0,), dtype=np.int32),                                      # empty
        np.zeros((2, 0, 3), dtype=np.uint8),                                 # empty, 3-d
        np.arange(12, dtype=np.int16).reshape(3, 4).T,                       # not C-contiguous
        np.array([True, False]),
        rng.integers(0, 2**32, (3,), dtype=np.uint32),
        rng.integers(-2**63, 2**63 - 1, (3,), dtype=np.int64),
        rng.integers(0, 2**64 - 1, (2,), dtype=np.uint64),
        np.array([1.5, -np.inf, 6e-8], dtype=np.float16),
        np.array([1 + 2j, np.nan - 1j], dtype=np.complex64),
        np.array([[1e300 - 1j]], dtype=np.complex128),
        np.arange(5, dtype=">i4"),                                           # big-endian, kept as such
        np.array(0.1, dtype=">f8"),
        np.arange(7, dtype=np.int8)[1:],                                     # an offset view
    ]


def _parse(path: Path) -> tuple[dict, bytes]:
    """The JSON header and the payload of the entry file at ``path``."""
    data = path.read_bytes()
    assert data.startswith(gmod.MAGIC)
    nl = data.index(b"\n", len(gmod.MAGIC))
    assert (nl + 1) % gmod.ALIGN == 0
    return json.loads(data[len(gmod.MAGIC):nl]), data[nl + 1:]


def _write_line(path: Path, header: bytes, payload: bytes = b"") -> None:
    """An entry file with exactly this header line (padded as the store pads it) and payload."""
    line = gmod.MAGIC + header
    line += b" " * (-(len(line) + 1) % gmod.ALIGN) + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(line + payload)


def _write_raw(path: Path, head, payload: bytes = b"") -> None:
    """An entry file with exactly this header (any JSON) and payload."""
    _write_line(path, json.dumps(head).encode(), payload)


def _write_entry(path: Path, arrays: dict[str, np.ndarray], tag: str) -> None:
    """A well-formed entry file holding ``arrays`` with the MAC ``tag``, as the store writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gmod._encode(arrays, tag))


def _signed(store: GoldenStore, digest: str, arrays: dict[str, np.ndarray], key: bytes) -> str:
    return mac(key, *gmod.mac_parts(store.version, digest, arrays))


def test_every_dtype_and_shape_comes_back_bit_exact(tmp_path, key):
    outs = _every_dtype()
    store = GoldenStore(tmp_path, key)
    assert store.get(D1) is None and store.misses == 1
    store.put(D1, {SCHEME: outs, "exact": [outs[7]]})
    again = GoldenStore(tmp_path)           # a later run: the user's key read from the file
    got = again.get(D1)
    assert set(got) == {SCHEME, "exact"} and len(got[SCHEME]) == len(outs)
    assert all(_same(a, b) for a, b in zip(got[SCHEME], outs)), [(a.dtype, a.shape) for a in got[SCHEME]]
    assert _same(got["exact"][0], outs[7])
    assert again.hits == 1 and again.misses == 0 and again.problems == [] == store.problems
    # handed out read-only (views of the bytes read, aligned), never to be changed in place
    for a in got[SCHEME]:
        assert not a.flags.writeable and a.flags.aligned
        if a.size:
            with pytest.raises(ValueError):
                a.reshape(-1)[0] = 0
    path = _entry(store, D1)
    assert path == tmp_path / golden_version() / D1[:2] / f"{D1}.qg"
    # plain data: the magic line, the header (names, dtypes, shapes, offsets, sizes, the MAC), the bytes
    head, payload = _parse(path)
    assert sorted(head) == ["arrays", "mac"] and len(head["mac"]) == 64
    names = [r[0] for r in head["arrays"]]
    assert names == sorted(names) and f"{SCHEME}/0" in names and f"{SCHEME}/{len(outs) - 1}" in names
    flat = {f"{SCHEME}/{k}": a for k, a in enumerate(outs)} | {"exact/0": outs[7]}
    for name, dts, shape, off, n in head["arrays"]:
        a = flat[name]
        assert (dts, tuple(shape), n) == (a.dtype.str, a.shape, a.nbytes) and off % gmod.ALIGN == 0
        assert payload[off:off + n] == a.tobytes()
    assert head["mac"] == _signed(store, D1, flat, key)       # the MAC covers mac_parts
    assert not list(tmp_path.rglob("*.tmp"))


def test_puts_merge_schemes_and_a_scheme_put_again_replaces_its_outputs(tmp_path, key):
    a = GoldenStore(tmp_path, key)
    a.put(D1, {SCHEME: [np.arange(4, dtype=np.int8)]})
    a.put(D1, {"exact": [np.linspace(0, 1, 3)], "onnx-ref": [np.array(1, np.uint8), np.zeros(0, np.uint8)]})
    got = a.get(D1)
    assert sorted(got) == ["exact", "onnx-ref", SCHEME] and got[SCHEME][0].tolist() == [0, 1, 2, 3]
    a.put(D1, {SCHEME: [np.array([9], np.int8)]})
    got = a.get(D1)
    assert got[SCHEME][0].tolist() == [9] and len(got["onnx-ref"]) == 2
    assert got["exact"][0].tolist() == [0, 0.5, 1] and got["onnx-ref"][0].shape == ()
    assert a.get(D2) is None and a.problems == []
    # ten outputs of a scheme: "s/10" sorts before "s/2" in the file, the outputs keep their order
    a.put(D2, {SCHEME: [np.array(k, np.int16) for k in range(11)]})
    assert [int(x) for x in a.get(D2)[SCHEME]] == list(range(11))


def test_two_stores_writing_the_same_case_merge_in_turn(tmp_path, key):
    one, two = GoldenStore(tmp_path, key), GoldenStore(tmp_path, key)
    one.put(D1, {"s1": [np.arange(3, dtype=np.int8)]})
    two.put(D1, {"s2": [np.arange(3, dtype=np.uint16)]})
    got = GoldenStore(tmp_path, key).get(D1)
    assert sorted(got) == ["s1", "s2"] and got["s2"][0].dtype == np.uint16


def _hammer(folder: str, key_file: str, scheme: str, n: int) -> list[str]:
    store = GoldenStore(Path(folder), user_key(Path(key_file)))
    for i in range(n):
        store.put(D1, {scheme: [np.full((64, 64), i % 100, np.int32)]})
        got = store.get(D1)     # the last writer's merge: whole, if not ours (it may lack our scheme)
        assert got is not None and all(len(v) == 1 and v[0].shape == (64, 64) and (v[0] == v[0][0, 0]).all()
                                       for v in got.values())
    return store.problems


def test_processes_writing_the_same_case_at_once_never_leave_a_torn_file(tmp_path, own_key_file, key):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(3) as pool:
        jobs = [pool.apply_async(_hammer, (str(tmp_path / "g"), str(own_key_file), f"s{j}", 40)) for j in range(3)]
        reader = GoldenStore(tmp_path / "g", key)
        seen = 0
        while not all(j.ready() for j in jobs):
            got = reader.get(D1)          # None only before the first write
            assert got is None or all((v[0] == v[0][0, 0]).all() for v in got.values())
            seen += got is not None
        problems = [j.get() for j in jobs]
    assert problems == [[], [], []] and reader.problems == []
    final = GoldenStore(tmp_path / "g", key).get(D1)
    assert final is not None and set(final) <= {"s0", "s1", "s2"} and final    # the last writer's merge
    assert not list((tmp_path / "g").rglob("*.tmp"))


def test_an_entry_with_wrong_values_and_a_recomputed_checksum_is_ignored(tmp_path, key, monkeypatch):
    store = GoldenStore(tmp_path, key)
    store.put(D1, {SCHEME: [np.arange(4, dtype=np.int8)]})
    path = _entry(store, D1)
    wrong = {f"{SCHEME}/0": np.array([0, 1, 2, 99], np.int8)}
    # 1. the forger recomputes a plain SHA-256 over exactly what the MAC covers
    h = hashlib.sha256()
    for part in gmod.mac_parts(store.version, D1, wrong):
        part = part.encode() if isinstance(part, str) else bytes(part)
        h.update(len(part).to_bytes(8, "big") + part)
    _write_entry(path, wrong, h.hexdigest())
    fresh = GoldenStore(tmp_path, key)
    assert fresh.get(D1) is None and fresh.misses == 1
    assert len(fresh.problems) == 1 and str(path) in fresh.problems[0] and "forged" in fresh.problems[0]
    # 2. ... or signs it with a key of its own (a complete, well-formed entry)
    GoldenStore(tmp_path, os.urandom(32)).put(D1, {SCHEME: [wrong[f"{SCHEME}/0"]]})
    fresh = GoldenStore(tmp_path, key)
    assert fresh.get(D1) is None and str(path) in fresh.problems[0] and "forged" in fresh.problems[0]
    # 3. ... or edits a value of a genuine entry and keeps its MAC
    store.put(D1, {SCHEME: [np.arange(4, dtype=np.int8)]})
    genuine = path.read_bytes()
    tag = _parse(path)[0]["mac"]
    assert GoldenStore(tmp_path, key).get(D1)[SCHEME][0].tolist() == [0, 1, 2, 3]
    _write_entry(path, wrong, tag)
    assert GoldenStore(tmp_path, key).get(D1) is None
    path.write_bytes(genuine.replace(np.arange(4, dtype=np.int8).tobytes(), wrong[f"{SCHEME}/0"].tobytes()))
    assert len(path.read_bytes()) == len(genuine) and GoldenStore(tmp_path, key).get(D1) is None
    _write_entry(path, {f"{SCHEME}/0": np.arange(4, dtype=np.int16)}, tag)   # same values, other dtype
    assert GoldenStore(tmp_path, key).get(D1) is None
    _write_entry(path, {f"{SCHEME}/0": np.arange(4, dtype=np.int8).reshape(2, 2)}, tag)   # same bytes
    assert GoldenStore(tmp_path, key).get(D1) is None
    _write_entry(path, {f"{SCHEME}/0": np.arange(4, dtype=np.uint8)}, tag)   # same bytes, other dtype
    assert GoldenStore(tmp_path, key).get(D1) is None
    _write_entry(path, {"exact/0": np.arange(4, dtype=np.int8)}, tag)        # same bytes, other scheme
    assert GoldenStore(tmp_path, key).get(D1) is None
    # 4. ... or copies a genuine entry of another case to this case's path
    store.put(D2, {SCHEME: [np.array([0, 1, 2, 99], np.int8)]})
    path.write_bytes(_entry(store, D2).read_bytes())
    fresh = GoldenStore(tmp_path, key)
    assert fresh.get(D1) is None and "forged" in fresh.problems[0]
    assert fresh.get(D2)[SCHEME][0].tolist() == [0, 1, 2, 99]
    # 5. ... or keeps an entry of another golden version (stale: signed by this key for other code)
    _write_entry(path, wrong, mac(key, *gmod.mac_parts("e" * 24, D1, wrong)))
    assert GoldenStore(tmp_path, key).get(D1) is None
    # 6. ... and the MAC of the right content under the right key does verify (the test can fail)
    _write_entry(path, wrong, _signed(store, D1, wrong, key))
    assert GoldenStore(tmp_path, key).get(D1)[SCHEME][0].tolist() == [0, 1, 2, 99]
    # and the harness's next put replaces a forgery
    _write_entry(path, wrong, tag)
    fresh.put(D1, {SCHEME: [np.arange(4, dtype=np.int8)]})
    assert GoldenStore(tmp_path, key).get(D1)[SCHEME][0].tolist() == [0, 1, 2, 3]


class _Payload:
    """Unpickling this creates the file ``marker`` (as a harmful payload would run code)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_pickle_payloads_in_the_cache_folder_never_run(tmp_path, key, monkeypatch):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Payload(marker))
    probe = tmp_path / "probe"
    pickle.loads(pickle.dumps(_Payload(probe))).close()     # the payload does run when unpickled
    assert probe.exists()

    def never(*a, **k):
        raise AssertionError("the golden store loads with pickle or np.load")
    for mod, name in [(pickle, "load"), (pickle, "loads"), (pickle, "Unpickler"), (np, "load")]:
        monkeypatch.setattr(mod, name, never)
    folder = tmp_path / "golden"
    store = GoldenStore(folder, key)
    path = _entry(store, D1)
    path.parent.mkdir(parents=True)
    vdir = folder / store.version
    places = [path, path.with_suffix(".pkl"), path.with_suffix(".npz"), vdir / f"{D2[:2]}" / f"{D2}.pkl",
              vdir / f"{D2[:2]}" / f"{D2}.npz", folder / f"{store.version}.pkl",
              folder / "cases-0123.pkl", folder / "x.npz", vdir / "x.npz"]
    for p in places:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(payload)
    assert store.get(D1) is None and str(path) in store.problems[0] and "damaged" in store.problems[0]
    assert store.get(D2) is None and len(store.problems) == 1     # an .npz or .pkl is never read
    # an .npz whose member is a pickled object array, and a zip whose member is the bare pickle,
    # under the entry's name: not an entry (the same problem, kept once)
    with open(path, "wb") as f:
        np.savez(f, **{f"{SCHEME}/0": np.array([_Payload(marker)], dtype=object)})
    assert store.get(D1) is None
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{SCHEME}/0.npy", payload)
    assert store.get(D1) is None and len(store.problems) == 1
    # an entry whose header names a pickled (object) dtype, or any dtype not kept, with the pickle
    # as its bytes and a MAC this user's key made over them: refused before any MAC or array
    for dts in ["|O", "O", "|O8", "<U1", "|S1", "|V8", "<M8[ns]", "[('a', 'O')]", "(2,)i4", "i4", "<i4 "]:
        head = {"mac": "", "arrays": [[f"{SCHEME}/0", dts, [len(payload)], 0, len(payload)]]}
        head["mac"] = mac(key, gmod.FORMAT, store.version, D1, f"{SCHEME}/0 {dts} {len(payload)}", payload)
        _write_raw(path, head, payload)
        assert store.get(D1) is None
        assert "damaged" in store.problems[-1] and repr(dts) in store.problems[-1], dts
    assert len(store.problems) == 1 + 11 and all(str(path) in ln for ln in store.problems)
    # a new version folder prunes the old one, payloads and all, without reading them
    week_ago = time.time() - 8 * 86400
    os.utime(vdir, (week_ago, week_ago))
    monkeypatch.setattr(gmod, "_VERSION", "d" * 24)
    other = GoldenStore(folder, key)
    other.put(D2, {SCHEME: [np.arange(2, dtype=np.int8)]})
    assert other.get(D2) is not None and not vdir.exists() and (folder / "x.npz").exists()
    assert not marker.exists()


def test_entries_of_the_old_npz_format_are_never_read(tmp_path, key):
    store = GoldenStore(tmp_path, key)
    old = _entry(store, D1).with_suffix(".npz")
    old.parent.mkdir(parents=True)
    with open(old, "wb") as f:       # a format-2 entry, even one placed in this version's folder
        np.savez(f, **{f"{SCHEME}/0": np.arange(3, dtype=np.int8), "__mac__": np.array("0" * 64)})
    before = old.read_bytes()
    assert store.get(D1) is None and store.problems == [] and store.misses == 1
    store.put(D1, {SCHEME: [np.arange(4, dtype=np.int8)]})
    assert store.get(D1)[SCHEME][0].tolist() == [0, 1, 2, 3] and old.read_bytes() == before
    assert "npz" not in gmod.FORMAT and golden_version() != ""


def _damage(path: Path, damage: str, store: GoldenStore, key: bytes) -> None:
    """Damage the genuine entry at ``path`` (one int32 array of 1000 under SCHEME)."""
    raw = path.read_bytes()
    head, payload = _parse(path)
    rec = head["arrays"][0]
    a = np.arange(1000, dtype=np.int32)

    def signed(arrays):     # a MAC this user's key made: only the layout check can refuse it
        return _signed(store, D1, arrays, key)
    if damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "truncated header":
        path.write_bytes(raw[:len(gmod.MAGIC) + 20])
    elif damage == "random":
        path.write_bytes(np.random.default_rng(1).bytes(len(raw)))
    elif damage == "random after the magic":
        path.write_bytes(gmod.MAGIC + np.random.default_rng(1).bytes(len(raw)))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "a folder":
        path.unlink()
        path.mkdir()
    elif damage == "a symbolic link":           # to a genuine entry: not followed
        target = path.parent / "elsewhere"
        path.rename(target)
        path.symlink_to(target)
    elif damage == "a fifo":
        path.unlink()
        os.mkfifo(path)
    elif damage == "trailing bytes":
        path.write_bytes(raw + bytes(gmod.ALIGN))
    elif damage == "header not JSON":
        _write_line(path, b"{not json", payload)
    elif damage == "header not ASCII":
        _write_line(path, json.dumps(head).encode().replace(b"mac", "m\u00e4c".encode("latin-1")), payload)
    elif damage == "deep JSON":
        _write_line(path, b"[" * 100_000 + b"]" * 100_000, payload)
    elif damage == "header not padded":
        path.write_bytes(raw.replace(b"]]}", b"]]} ", 1))
    elif damage == "header a list":
        _write_raw(path, [head["mac"], head["arrays"]], payload)
    elif damage == "no mac field":
        _write_raw(path, {"arrays": head["arrays"]}, payload)
    elif damage == "extra field":
        _write_raw(path, {**head, "pickle": "x"}, payload)
    elif damage == "no arrays":
        _write_raw(path, {"mac": head["mac"], "arrays": []}, b"")
    elif damage == "record too short":
        _write_raw(path, {"mac": head["mac"], "arrays": [rec[:4]]}, payload)
    elif damage == "offset out of range":
        _write_raw(path, {"mac": head["mac"], "arrays": [[*rec[:3], 1 << 40, rec[4]]]}, payload)
    elif damage == "negative offset":
        _write_raw(path, {"mac": head["mac"], "arrays": [[*rec[:3], -16, rec[4]]]}, payload)
    elif damage == "offset not in place":     # the same bytes, further on: the MAC alone would pass it
        _write_raw(path, {"mac": head["mac"], "arrays": [[*rec[:3], gmod.ALIGN, rec[4]]]},
                   bytes(gmod.ALIGN) + payload)
    elif damage == "sizes do not add up":
        _write_raw(path, {"mac": head["mac"], "arrays": [[*rec[:4], rec[4] - 4]]}, payload[:-4])
    elif damage == "shape does not match the size":
        _write_raw(path, {"mac": head["mac"], "arrays": [[rec[0], rec[1], [999], *rec[3:]]]}, payload)
    elif damage == "negative shape":
        _write_raw(path, {"mac": head["mac"], "arrays": [[rec[0], rec[1], [-1000], *rec[3:]]]}, payload)
    elif damage == "float shape":
        _write_raw(path, {"mac": head["mac"], "arrays": [[rec[0], rec[1], [1000.0], *rec[3:]]]}, payload)
    elif damage == "huge empty shape":
        _write_raw(path, {"mac": head["mac"], "arrays": [[rec[0], rec[1], [0, 1 << 63], 0, 0]]})
    elif damage == "65 dimensions":
        _write_raw(path, {"mac": head["mac"], "arrays": [[rec[0], rec[1], [0] * 65, 0, 0]]})
    elif damage == "bool size":
        _write_raw(path, {"mac": head["mac"], "arrays": [[rec[0], "|b1", [1], 0, True]]}, b"\x01")
    elif damage == "outputs not 0..n-1":
        arrays = {f"{SCHEME}/1": a}
        _write_entry(path, arrays, signed(arrays))
    elif damage == "output 01":
        _write_raw(path, {"mac": head["mac"], "arrays": [[f"{SCHEME}/01", *rec[1:]]]}, payload)
    elif damage == "not a scheme name":
        arrays = {"../x/0": a}
        tag = mac(key, *gmod.mac_parts(store.version, D1, arrays))
        _write_raw(path, {"mac": tag, "arrays": [["../x/0", *rec[1:]]]}, payload)
    elif damage == "a name twice":
        _write_raw(path, {"mac": head["mac"], "arrays": [rec, [*rec[:3], 4000, rec[4]]]}, payload + payload)
    elif damage == "names out of order":
        tag = signed({f"{SCHEME}/0": a, f"{SCHEME}/1": a})
        _write_raw(path, {"mac": tag, "arrays": [[f"{SCHEME}/1", *rec[1:]], [f"{SCHEME}/0", *rec[1:3], 4000, 4000]]},
                   payload + payload)
    elif damage == "non-native dtype text":
        _write_raw(path, {"mac": head["mac"], "arrays": [[rec[0], "=i4", *rec[2:]]]}, payload)
    else:
        raise AssertionError(damage)


DAMAGES = ["truncated", "truncated header", "random", "random after the magic", "empty", "a folder",
           "a symbolic link", "a fifo", "trailing bytes", "header not JSON", "header not ASCII", "deep JSON", "header not padded",
           "header a list", "no mac field", "extra field", "no arrays", "record too short",
           "offset out of range", "negative offset", "offset not in place", "sizes do not add up",
           "shape does not match the size", "negative shape", "float shape", "huge empty shape",
           "65 dimensions", "bool size",
           "outputs not 0..n-1", "output 01", "not a scheme name", "a name twice", "names out of order",
           "non-native dtype text"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_entry_is_ignored_and_the_next_put_replaces_it(tmp_path, key, damage):
    store = GoldenStore(tmp_path, key)
    store.put(D1, {SCHEME: [np.arange(1000, dtype=np.int32)]})
    path = _entry(store, D1)
    _damage(path, damage, store, key)
    fresh = GoldenStore(tmp_path, key)
    assert fresh.get(D1) is None and fresh.misses == 1
    assert len(fresh.problems) == 1 and str(path) in fresh.problems[0] and "damaged" in fresh.problems[0]
    assert fresh.get(D1) is None and len(fresh.problems) == 1          # one line per problem
    if damage == "a folder":
        path.rmdir()
    fresh.put(D1, {SCHEME: [np.arange(5, dtype=np.int32)]})
    assert GoldenStore(tmp_path, key).get(D1)[SCHEME][0].tolist() == [0, 1, 2, 3, 4]
    assert stat.S_ISREG(os.lstat(path).st_mode)
    if damage == "a symbolic link":            # the link was replaced, not the file it pointed to
        assert (path.parent / "elsewhere").read_bytes().startswith(gmod.MAGIC)


def test_whatever_the_bytes_get_returns_the_genuine_goldens_or_none(tmp_path, key):
    store = GoldenStore(tmp_path, key)
    outs = {SCHEME: [np.arange(10, dtype=np.int16), np.array(1.5)], "exact": [np.zeros((2, 0)), np.ones(3, bool)]}
    store.put(D1, outs)
    path = _entry(store, D1)
    genuine = path.read_bytes()
    rng = np.random.default_rng(7)
    kept = 0
    for i in range(400):
        data = bytearray(genuine)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(data)))
            if i % 3 == 0:
                data[at] ^= 1 << int(rng.integers(0, 8))
            elif i % 3 == 1:
                data[at] = int(rng.choice(list(b' 0123456789,[]{}"-.eE/\n\t')))
            else:
                del data[at:at + int(rng.integers(1, 9))]
        path.write_bytes(bytes(data))
        fresh = GoldenStore(tmp_path, key)
        got = fresh.get(D1)                 # never raises
        if got is None:
            assert len(fresh.problems) == 1 and str(path) in fresh.problems[0]
        else:                               # only changes the MAC does not cover (padding, spacing)
            kept += 1
            assert sorted(got) == sorted(outs) and all(
                _same(a, b) for s in outs for a, b in zip(got[s], outs[s], strict=True))
    assert kept < 400


def test_an_entry_bigger_than_any_entry_is_not_read(tmp_path, key, monkeypatch):
    store = GoldenStore(tmp_path, key)
    store.put(D1, {SCHEME: [np.arange(1000, dtype=np.int32)]})
    monkeypatch.setattr(gmod, "MAX_ENTRY_BYTES", 1000)
    assert store.get(D1) is None and "more than an entry holds" in store.problems[0]
    monkeypatch.undo()
    assert store.get(D1)[SCHEME][0].shape == (1000,)


def test_a_read_only_folder_does_not_stop_the_run(tmp_path, key):
    folder = tmp_path / "ro"
    store = GoldenStore(folder, key)
    store.put(D1, {SCHEME: [np.arange(3, dtype=np.int8)]})
    vdir = folder / store.version
    for p in [vdir, *vdir.iterdir()]:
        p.chmod(0o555)
    try:
        if os.access(vdir / D1[:2], os.W_OK):
            pytest.skip("chmod does not stop this user's writes (root)")
        store.put(D1, {"exact": [np.ones(2)]})
        store.put(D2, {SCHEME: [np.ones(2, np.int8)]})
        assert any(str(_entry(store, D1).parent) in ln and "cannot write" in ln for ln in store.problems)
        assert any(str(_entry(store, D2).parent) in ln for ln in store.problems)
        assert sorted(store.get(D1)) == [SCHEME] and store.get(D2) is None
    finally:
        for p in [vdir, *vdir.iterdir()]:
            p.chmod(0o755)


def test_a_folder_that_cannot_be_made_or_a_full_disk_do_not_stop_the_run(tmp_path, key, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = GoldenStore(blocker / "golden", key)           # ENOTDIR, even for root
    assert store.get(D1) is None
    store.put(D1, {SCHEME: [np.arange(3, dtype=np.int8)]})
    assert store.get(D1) is None
    assert len(store.problems) == 1 and "cannot write" in store.problems[0]
    assert str(_entry(store, D1)) in store.problems[0]
    # a full disk: the write fails half-way; no temporary file is left, the old entry stays
    ok = GoldenStore(tmp_path / "g", key)
    ok.put(D1, {SCHEME: [np.arange(3, dtype=np.int8)]})

    def full(fd, data):
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(gmod, "_write_fd", full)
    ok.put(D1, {"exact": [np.ones(3)]})
    monkeypatch.undo()
    assert "No space left on device" in ok.problems[0] and str(_entry(ok, D1)) in ok.problems[0]
    assert not list((tmp_path / "g").rglob("*.tmp")) and sorted(ok.get(D1)) == [SCHEME]


def test_a_new_version_folder_prunes_version_folders_unused_for_a_week(tmp_path, key):
    now = time.time()
    old, recent = tmp_path / ("a" * 24), tmp_path / ("b" * 24)
    keep = [recent, tmp_path / "notes", tmp_path / "cases-1.pkl", tmp_path / ("c" * 24 + ".pkl")]
    for p in (old, recent, tmp_path / "notes"):
        (p / "ab").mkdir(parents=True)
        (p / "ab" / "x.npz").write_bytes(b"x")
    for p in keep[2:]:
        p.write_bytes(b"x")
    for p in (old, tmp_path / "notes", *keep[2:]):
        os.utime(p, (now - 8 * 86400, now - 8 * 86400))
    os.utime(recent, (now - 6 * 86400, now - 6 * 86400))
    store = GoldenStore(tmp_path, key)
    store.put(D1, {SCHEME: [np.arange(2, dtype=np.int8)]})
    assert not old.exists() and all(p.exists() for p in keep)
    # an existing version folder prunes nothing
    os.utime(recent, (now - 8 * 86400, now - 8 * 86400))
    GoldenStore(tmp_path, key).put(D2, {SCHEME: [np.arange(2, dtype=np.int8)]})
    assert recent.exists()


def test_callers_mistakes_raise(tmp_path, key):
    store = GoldenStore(tmp_path, key)
    for bad in ("../etc", "ABCDEF12", "", "0123/456"):
        with pytest.raises(ValueError):
            store.get(bad)
    with pytest.raises(ValueError):
        store.put(D1, {"a/b": [np.ones(1)]})
    with pytest.raises(TypeError):
        store.put(D1, {SCHEME: [np.array([object()], dtype=object)]})
    with pytest.raises(TypeError):
        store.put(D1, {SCHEME: np.ones(3)})
    assert not list(tmp_path.rglob("*.qg"))


def test_folder_of(monkeypatch, tmp_path):
    monkeypatch.delenv(gmod.ENV, raising=False)
    assert folder_of(None) == Path.home() / ".cache" / "qconform" / "golden"
    monkeypatch.setenv(gmod.ENV, str(tmp_path))
    assert folder_of(None) == tmp_path and folder_of("off") is None and folder_of("~/x") == Path.home() / "x"
    monkeypatch.setenv(gmod.ENV, "off")
    assert folder_of(None) is None


def test_the_version_hashes_the_golden_source():
    files = {p.relative_to(gmod.ROOT).as_posix() for p in gmod.golden_files()}
    assert "reference/registry.py" in files and "reference/native_dot.c" in files
    assert "suite/core/dtypes.py" in files and "suite/core/keyed.py" in files
    assert not any("__pycache__" in f or f.startswith("suite/harness") for f in files)
    v = golden_version()
    assert len(v) == 24 and int(v, 16) >= 0


# ----------------------------------------------------------------------------- the QNN context cache

def _stored(tmp_path, key) -> tuple[ContextCache, str]:
    cache = ContextCache(tmp_path / "qnn", key)
    k = cache.key(b"model", "v1")
    dump = cache.dump_path(k)
    dump.write_bytes(b"ctx-bytes")
    assert cache.store(k, dump, {"placement": [{"QNNExecutionProvider": ["Add"]}], "cases": 1})
    return cache, k


def test_context_cache_round_trip(tmp_path, key):
    cache, k = _stored(tmp_path, key)
    ctx, meta, fail = cache.lookup(k)
    assert ctx == cache.paths(k)[0] and ctx.read_bytes() == b"ctx-bytes" and fail is None
    assert meta == {"placement": [{"QNNExecutionProvider": ["Add"]}], "cases": 1}
    assert cache.lookup_bytes(k) == (b"ctx-bytes", meta, None)
    again = ContextCache(tmp_path / "qnn")             # the user's key, read from the file
    assert again.lookup_bytes(k)[0] == b"ctx-bytes" and again.problems == []
    cache.store_failure(k, "QNN says no")
    assert cache.lookup(k)[2]["reason"] == "QNN says no" and cache.problems == []
    cache.forget(k)
    assert cache.lookup(k) == (None, None, None) and not list((tmp_path / "qnn").iterdir())


@pytest.mark.parametrize("forgery", ["placement edited", "context edited", "another key", "no mac",
                                     "old format", "moved from another key", "damaged json", "deep json"])
def test_a_forged_context_entry_is_ignored_and_compiled_again(tmp_path, key, forgery):
    cache, k = _stored(tmp_path, key)
    ctx, side, _ = cache.paths(k)
    doc = json.loads(side.read_text())
    if forgery == "placement edited":      # the forger claims the case ran on the CPU: a false skip
        doc["meta"]["placement"] = [{"CPUExecutionProvider": ["Add"]}]
        side.write_text(json.dumps(doc))
    elif forgery == "context edited":
        ctx.write_bytes(b"evil-ctx")
    elif forgery == "another key":
        other = ContextCache(tmp_path / "qnn", os.urandom(32))
        dump = other.dump_path(k)
        dump.write_bytes(b"evil-ctx")
        other.store(k, dump, {"placement": [{"CPUExecutionProvider": ["Add"]}]})
    elif forgery == "no mac":
        del doc["mac"]
        side.write_text(json.dumps(doc))
    elif forgery == "old format":
        side.write_text(json.dumps(doc["meta"]))
    elif forgery == "moved from another key":
        k2 = cache.key(b"model", "v2")
        os.rename(ctx, cache.paths(k2)[0])
        os.rename(side, cache.paths(k2)[1])
        k, (ctx, side, _) = k2, cache.paths(k2)
    elif forgery == "deep json":
        side.write_text("[" * 100_000 + "]" * 100_000)
    else:
        side.write_text("{not json")
    fresh = ContextCache(tmp_path / "qnn", key)
    assert fresh.lookup(k) == (None, None, None) and fresh.lookup_bytes(k) == (None, None, None)
    assert len(fresh.problems) == 1 and str(side) in fresh.problems[0]
    # compiled again: the new entry replaces the forged one
    dump = fresh.dump_path(k)
    dump.write_bytes(b"ctx-bytes")
    assert fresh.store(k, dump, {"placement": [{"QNNExecutionProvider": ["Add"]}]})
    assert ContextCache(tmp_path / "qnn", key).lookup_bytes(k)[0] == b"ctx-bytes"


@pytest.mark.parametrize("forgery", ["another key", "plain record", "moved from another key", "edited"])
def test_a_forged_failure_record_never_makes_a_case_unsupported(tmp_path, key, forgery):
    root = tmp_path / "qnn"
    cache = ContextCache(root, key)
    k = cache.key(b"model", "v1")
    fail = cache.paths(k)[2]
    if forgery == "another key":
        ContextCache(root, os.urandom(32)).store_failure(k, "QNN HTP cannot run the whole model")
    elif forgery == "plain record":      # what the cache wrote before it was authenticated
        root.mkdir()
        fail.write_text(json.dumps({"reason": "QNN HTP cannot run the whole model", "time": 1.0}))
    elif forgery == "moved from another key":
        k2 = cache.key(b"model", "v2")
        cache.store_failure(k2, "QNN HTP cannot run the whole model")
        os.rename(cache.paths(k2)[2], fail)
    else:
        cache.store_failure(k, "a transient failure")
        doc = json.loads(fail.read_text())
        doc["record"]["reason"] = "QNN HTP cannot run the whole model"
        fail.write_text(json.dumps(doc))
    fresh = ContextCache(root, key)
    assert fresh.lookup(k) == (None, None, None)
    assert len(fresh.problems) == 1 and str(fail) in fresh.problems[0] and "forged" in fresh.problems[0]
    # with a context compiled for the key, the context is used and the forged record removed
    dump = fresh.dump_path(k)
    dump.write_bytes(b"ctx-bytes")
    assert fresh.store(k, dump, {"placement": None})
    assert fresh.lookup_bytes(k) == (b"ctx-bytes", {"placement": None}, None) and not fail.exists()
    # the genuine record still counts
    fresh.store_failure(k, "QNN says no")
    assert ContextCache(root, key).lookup(k)[2]["reason"] == "QNN says no"
    doc = json.loads(fail.read_text())
    assert doc["format"] == CONTEXT_FORMAT and len(doc["mac"]) == 64


def test_htp_runs_a_case_whose_refusal_record_is_forged(tmp_path, own_key_file, key):
    pytest.importorskip("onnxruntime_qnn")
    from suite.cases.generate import generate
    from targets import get_target
    from targets.base import Timing
    root = tmp_path / "qnn"
    t = get_target("htp", cache_dir=str(root))
    ok, why = t.availability()
    if not ok:
        pytest.skip(f"htp unavailable: {why}")
    case = next(c for c in generate(["ADD"], 1, 3) if not t.unsupported(c))
    fast = Timing(warmup=0, repeats=1)
    assert t.run([case], fast)[0].status == "ok"
    (k,) = [p.stem for p in root.glob("*.onnx")]
    # a forged refusal (another key) and a forged placement: ignored, compiled again, still ok
    ContextCache(root, os.urandom(32)).store_failure(k, "QNN HTP cannot run the whole model (forged)")
    side = root / f"{k}.json"
    doc = json.loads(side.read_text())
    doc["meta"]["placement"] = [{"CPUExecutionProvider": ["Add"]}]
    side.write_text(json.dumps(doc))
    again = get_target("htp", cache_dir=str(root))
    out = again.run([case], fast)[0]
    assert out.status == "ok", (out.status, out.reason)
    assert again.batch_stats.cache_misses == 1 and len(again.context_cache.problems) == 2
    # the entry was rewritten: a third run loads the verified context
    third = get_target("htp", cache_dir=str(root))
    assert third.run([case], fast)[0].status == "ok" and third.batch_stats.cache_hits == 1
    assert third.context_cache.problems == []
    # the test can fail: a genuine refusal record does make the case unsupported
    ContextCache(root, key).store_failure(k, "QNN HTP cannot run the whole model (recorded)")
    fourth = get_target("htp", cache_dir=str(root))
    assert fourth.run([case], fast)[0].status == "unsupported"
