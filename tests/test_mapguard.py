"""Zero-copy mappings whose file is truncated after the read (issue 16 §1).

kbatch's SIGBUS handler (``kbatch._core._mapguard``) replaces the lost pages
of a registered mapping with zeros and marks its guard invalid; every other
SIGBUS keeps its previous fate (the handler before kbatch's, or death by
SIGBUS). Whatever may crash runs in a child process, so a SIGBUS fails the
test, not the run.
"""

import mmap
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kbatch
from kbatch._core import _mapguard
from kbatch.errors import FileChangedError, MappingInvalidatedError, MappingTableFullError

ROOT = Path(__file__).resolve().parent.parent
PAGE = mmap.PAGESIZE

# the child's common start: a file of 16 pages of 0x07, mapped read-only
PRELUDE = f"""
import faulthandler, mmap, os, signal, sys, threading
import numpy as np
from kbatch._core import _mapguard as mg
print("core:", mg.__file__, flush=True)
from kbatch.errors import MappingInvalidatedError
PAGE = {PAGE}

def make(path, pages=16, byte=7, flags=mmap.MAP_SHARED):
    with open(path, "wb") as f:
        f.write(bytes([byte]) * (pages * PAGE))
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, 0, flags=flags, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
"""


def run_child(code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    safe = ["-P"] if sys.flags.safe_path else []   # make test-asan: the sanitized build
    return subprocess.run([sys.executable, *safe, "-c", PRELUDE + textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("flags", ["MAP_SHARED", "MAP_PRIVATE"])
def test_touching_a_truncated_guarded_mapping_reads_zeros_and_invalidates(tmp_path, flags):
    """Pages read before the truncation (Linux drops them from the page cache
    and from every mapping, shared or private, so they fault too), pages
    never read, through numpy and memoryview: the process lives, the kept
    bytes are intact, the lost ones are zeros, and the guard says so."""
    path = tmp_path / "seg.log"
    child = run_child(f"""
        mm = make({str(path)!r}, flags=mmap.{flags})
        g = mg.MappingGuard(mm, path={str(path)!r})
        a = np.frombuffer(mm, np.uint8)
        assert int(a[: 8 * PAGE].sum()) == 7 * 8 * PAGE        # pages 0-7 read before
        assert g.valid and mg.handler_installed()
        os.truncate({str(path)!r}, 5 * PAGE + 10)
        assert g.valid                                          # nothing touched yet
        assert int(a[: 5 * PAGE].sum()) == 7 * 5 * PAGE         # kept pages: no fault
        assert g.valid
        view = memoryview(mm)
        assert view[-1] == 0                                    # never-read page: fault
        assert not g.valid
        assert int(a[5 * PAGE: 5 * PAGE + 10].sum()) == 70      # the page the file still holds
        assert int(a[5 * PAGE + 10:].sum()) == 0                # read-before pages: zeros now
        try:
            g.check()
        except MappingInvalidatedError as exc:
            print("check:", exc)
        del a, view
        g.release()
        mm.close()
        print("alive", mg.live_count())
    """)
    assert child.returncode == 0, (child.returncode, child.stderr)
    assert "alive 0" in child.stdout
    assert "check: " + str(path) in child.stdout and "truncated" in child.stdout


def test_a_fault_outside_kbatchs_mappings_still_kills_with_sigbus(tmp_path):
    """An unregistered mapping of a truncated file: the default action, as
    without kbatch (the handler chains to SIG_DFL)."""
    child = run_child(f"""
        guarded = make({str(tmp_path / "a.log")!r})
        g = mg.MappingGuard(guarded)
        other = make({str(tmp_path / "b.log")!r})
        os.truncate({str(tmp_path / "b.log")!r}, 0)
        print("touching", flush=True)
        other[PAGE * 3]
        print("survived")
    """)
    assert child.returncode == -signal.SIGBUS, (child.returncode, child.stderr)
    assert "touching" in child.stdout and "survived" not in child.stdout


def test_a_sigbus_sent_by_kill_keeps_its_default_action(tmp_path):
    child = run_child(f"""
        g = mg.MappingGuard(make({str(tmp_path / "a.log")!r}))
        os.kill(os.getpid(), signal.SIGBUS)
        print("survived")
    """)
    assert child.returncode == -signal.SIGBUS, (child.returncode, child.stderr)


def test_faulthandler_installed_first_is_chained_to(tmp_path):
    """pytest's setup: faulthandler before kbatch. A foreign fault reaches
    faulthandler (its traceback dump) and then kills; a fault in a guarded
    mapping never reaches it."""
    child = run_child(f"""
        faulthandler.enable()
        mm = make({str(tmp_path / "a.log")!r})
        g = mg.MappingGuard(mm)
        os.truncate({str(tmp_path / "a.log")!r}, PAGE)
        assert mm[PAGE * 2] == 0 and not g.valid
        print("guarded ok", flush=True)
        other = make({str(tmp_path / "b.log")!r})
        os.truncate({str(tmp_path / "b.log")!r}, 0)
        other[PAGE * 3]
    """)
    assert child.returncode == -signal.SIGBUS, (child.returncode, child.stderr)
    assert "guarded ok" in child.stdout
    assert child.stderr.count("Fatal Python error: Bus error") == 1, child.stderr


def test_faulthandler_enabled_after_kbatch_does_not_loop(tmp_path):
    """faulthandler over kbatch's handler, kbatch's back on top at the next
    registration: the chain kbatch -> faulthandler -> kbatch ends in one dump
    and death by SIGBUS, never a loop; a guarded mapping still survives."""
    child = run_child(f"""
        first = mg.MappingGuard(make({str(tmp_path / "a.log")!r}))
        faulthandler.enable()
        assert not mg.handler_installed()
        mm = make({str(tmp_path / "c.log")!r})
        g = mg.MappingGuard(mm)                      # reinstalls kbatch's handler
        assert mg.handler_installed()
        os.truncate({str(tmp_path / "c.log")!r}, 0)
        assert mm[PAGE * 5] == 0 and not g.valid
        print("guarded ok", flush=True)
        other = make({str(tmp_path / "b.log")!r})
        os.truncate({str(tmp_path / "b.log")!r}, 0)
        other[PAGE * 3]
    """, timeout=60)
    assert child.returncode == -signal.SIGBUS, (child.returncode, child.stderr)
    assert "guarded ok" in child.stdout
    assert child.stderr.count("Fatal Python error: Bus error") == 1, child.stderr


def test_faulthandler_enabled_after_a_mapping_was_registered(tmp_path):
    """faulthandler on top, kbatch's handler not put back since: faulthandler
    dumps its traceback and re-raises; kbatch's handler lets the fault repeat
    and patches it. The process lives (with faulthandler's dump on stderr);
    a foreign fault afterwards still kills."""
    child = run_child(f"""
        mm = make({str(tmp_path / "a.log")!r})
        g = mg.MappingGuard(mm)
        faulthandler.enable()
        os.truncate({str(tmp_path / "a.log")!r}, PAGE)
        assert mm[PAGE * 7] == 0 and not g.valid and mm[0] == 7
        print("guarded ok", flush=True)
        other = make({str(tmp_path / "b.log")!r})
        os.truncate({str(tmp_path / "b.log")!r}, 0)
        other[PAGE * 3]
    """, timeout=60)
    assert child.returncode == -signal.SIGBUS, (child.returncode, child.stderr)
    assert "guarded ok" in child.stdout


def test_a_guarded_read_of_a_registered_mapping_still_takes_the_guarded_path(tmp_path):
    """read_mapped (the guarded copy) over a registered mapping of a file cut
    short: FileChangedError as before, not zeros; touching the page outside
    a read then invalidates the guard."""
    child = run_child(f"""
        from kbatch._core import _mapguard
        from kbatch.errors import FileChangedError
        mm = make({str(tmp_path / "a.log")!r})
        g = mg.MappingGuard(mm, path={str(tmp_path / "a.log")!r})
        view = memoryview(mm)
        os.truncate({str(tmp_path / "a.log")!r}, PAGE)
        try:
            _mapguard.read_mapped(view, 10 * PAGE, 4, "a.log")
        except FileChangedError as exc:
            print("refused:", type(exc).__name__)
        print("valid after guarded read:", g.valid)
        assert view[10 * PAGE] == 0
        print("valid after touch:", g.valid)
    """)
    assert child.returncode == 0, (child.returncode, child.stderr)
    assert "refused: FileChangedError" in child.stdout
    assert "valid after guarded read: True" in child.stdout
    assert "valid after touch: False" in child.stdout


def test_threads_fault_register_and_free_concurrently(tmp_path):
    """Four threads each truncate and touch their own guarded mappings while
    two others register and free guards in a loop: all survive, every
    truncated guard is invalid, no slot leaks."""
    child = run_child(f"""
        base = {str(tmp_path)!r}
        stop = threading.Event()
        errors = []

        def churn(k):
            mm = make(os.path.join(base, f"churn{{k}}.log"), pages=2)
            while not stop.is_set():
                g = mg.MappingGuard(mm)
                g.release()

        def victim(k):
            try:
                for round in range(20):
                    p = os.path.join(base, f"v{{k}}-{{round}}.log")
                    mm = make(p, pages=8, byte=k + 1)
                    g = mg.MappingGuard(mm, path=p)
                    a = np.frombuffer(mm, np.uint8)
                    kept = (round % 8) * PAGE
                    os.truncate(p, kept)
                    total = int(a.sum())
                    if total != (k + 1) * kept or g.valid != (kept == 8 * PAGE):
                        errors.append((k, round, total, g.valid))
                    del a
                    g.release()
                    mm.close()
            except BaseException as exc:
                errors.append(repr(exc))

        churners = [threading.Thread(target=churn, args=(k,)) for k in range(2)]
        victims = [threading.Thread(target=victim, args=(k,)) for k in range(4)]
        for t in churners + victims:
            t.start()
        for t in victims:
            t.join()
        stop.set()
        for t in churners:
            t.join()
        print("errors", errors)
        print("live", mg.live_count())
    """)
    assert child.returncode == 0, (child.returncode, child.stderr)
    assert "errors []" in child.stdout and "live 0" in child.stdout, child.stdout


# --- the registry, in this process (nothing here faults) ---------------------------

def _map(path: Path, pages: int = 1) -> mmap.mmap:
    if not path.exists():
        path.write_bytes(b"\x01" * (pages * PAGE))
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)


def test_slots_are_reused_and_a_full_table_falls_back(tmp_path):
    path = tmp_path / "a.log"
    start = _mapguard.live_count()
    mm = _map(path)
    for _ in range(2 * _mapguard.capacity()):       # register and free: no leak
        _mapguard.MappingGuard(mm).release()
    assert _mapguard.live_count() == start
    free = _mapguard.capacity() - start
    maps = [_map(path) for _ in range(free)]
    guards = [_mapguard.MappingGuard(m) for m in maps]
    assert _mapguard.live_count() == _mapguard.capacity()
    assert _mapguard.try_guard(mm) is None
    with pytest.raises(MappingTableFullError):
        _mapguard.MappingGuard(mm)
    guards.pop()                                     # freed by garbage collection
    assert _mapguard.try_guard(mm) is not None       # ...and freed again at once
    del guards
    for m in maps:
        m.close()
    assert _mapguard.live_count() == start
    mm.close()


def test_a_guarded_mapping_cannot_be_closed_while_registered(tmp_path):
    mm = _map(tmp_path / "a.log")
    g = _mapguard.MappingGuard(mm)
    with pytest.raises(BufferError):
        mm.close()
    g.release()
    g.release()                                      # idempotent
    assert not g.valid and not g.registered
    with pytest.raises(MappingInvalidatedError):
        g.check()
    mm.close()


def test_revalidate_sees_a_shrunken_file_before_any_fault(tmp_path):
    path = tmp_path / "a.log"
    mm = _map(path, pages=8)
    g = _mapguard.MappingGuard(mm, path=path)
    assert g.revalidate() and g.valid
    g.check()
    os.truncate(path, 3 * PAGE + 1)
    assert not g.revalidate() and not g.valid
    assert mm[3 * PAGE] == 1 and mm[3 * PAGE + 1] == 0     # within the last page: zeros
    assert mm[7 * PAGE] == 0                               # lost page: zeros, no fault
    assert mm[:3 * PAGE] == b"\x01" * (3 * PAGE)
    with pytest.raises(MappingInvalidatedError, match="a.log"):
        g.check()
    g.release()
    mm.close()


def test_revalidate_of_a_replaced_path_trusts_the_mapping(tmp_path):
    """The path now names another file (renamed over): the mapping keeps the
    old one, whose size is not the new file's."""
    path = tmp_path / "a.log"
    mm = _map(path, pages=4)
    g = _mapguard.MappingGuard(mm, path=path)
    (tmp_path / "new").write_bytes(b"")
    os.replace(tmp_path / "new", path)
    assert g.revalidate() and g.valid
    assert mm[3 * PAGE] == 1
    g.release()
    mm.close()


def test_only_mmaps_are_guarded():
    with pytest.raises(TypeError):
        _mapguard.MappingGuard(bytearray(PAGE))


def test_mapping_invalidated_error_is_a_file_changed_error():
    exc = MappingInvalidatedError("/x/y.log")
    assert isinstance(exc, FileChangedError) and isinstance(exc, kbatch.KbatchError)
    assert str(exc).startswith("/x/y.log: the file was truncated after a zero-copy read")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is MappingInvalidatedError and str(back) == str(exc)


def test_map_guarded_segment_survives_truncation(tmp_path):
    """segment.map_guarded, the zero-copy reads' way in: a real segment
    mapped and guarded, cut to its first batch after the read, its pages
    then touched."""
    from kbatch.lib.writer import write_segment
    path = tmp_path / "00000000000000000000.log"
    write_segment(path, {"value": [b"v" * 1000] * 2000})
    child = run_child(f"""
        from kbatch.lib.segment import map_guarded
        import kbatch
        mm, g = map_guarded({str(path)!r})
        expected = kbatch.read_segment(bytes(mm)).value.to_pylist()
        assert g.revalidate()
        a = np.frombuffer(mm, np.uint8)
        os.truncate({str(path)!r}, PAGE)
        touched = int(a[::PAGE].astype(np.int64).sum())
        print("valid", g.valid, len(expected))
        try:
            g.check()
        except kbatch.KbatchError as exc:
            print("raised", type(exc).__name__)
    """)
    assert child.returncode == 0, (child.returncode, child.stderr)
    assert "valid False 2000" in child.stdout and "raised MappingInvalidatedError" in child.stdout


# --- populate: MADV_POPULATE_READ without the GIL ------------------------------

def _kernel_at_least(major: int, minor: int) -> bool:
    import platform
    try:
        got = tuple(int(x) for x in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return got >= (major, minor)


def _minor_faults() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _kernel_at_least(5, 14),
                    reason="MADV_POPULATE_READ is Linux 5.14's")
def test_populate_faults_the_pages_in(tmp_path):
    import numpy as np

    from kbatch._core._mapguard import populate
    from kbatch.lib.segment import _MADV_POPULATE_READ
    path = tmp_path / "data"
    size = 8 << 20
    block = np.random.default_rng(1).integers(0, 255, mmap.PAGESIZE, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:      # page by page: the page cache keeps small folios,
        for _ in range(size // mmap.PAGESIZE):   # so a fault maps 16 pages, not 512
            f.write(block)
            f.flush()

    def touch(mm) -> int:
        arr = np.frombuffer(mm, np.uint8)
        before = _minor_faults()
        total = int(arr[::mmap.PAGESIZE].sum())     # one byte of every page
        faults = _minor_faults() - before
        del arr
        assert total > 0
        return faults

    with open(path, "rb") as f:
        plain = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        populated = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    with plain, populated:
        view = memoryview(populated)
        try:
            # a length past the mapping is cut to it; the first half, then all
            assert populate(view, size // 2, _MADV_POPULATE_READ) is True
            assert populate(view, size * 4, _MADV_POPULATE_READ) is True
        finally:
            view.release()
        unpopulated = touch(plain)
        if unpopulated < 32:
            pytest.skip(f"a fault maps many pages here ({unpopulated} faults for "
                        f"{size >> 20} MiB): populating saves nothing to count")
        assert touch(populated) <= 8               # numpy's own, not the mapping's


def test_populate_refuses_nothing_and_falls_back(tmp_path):
    from kbatch._core._mapguard import populate
    path = tmp_path / "data"
    path.write_bytes(b"x" * 3 * mmap.PAGESIZE)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
        view = memoryview(mm)
        try:
            assert populate(view, 0, mmap.MADV_WILLNEED) is False      # nothing to do
            assert populate(view, -5, mmap.MADV_WILLNEED) is False
            # an advice the kernel refuses: MADV_WILLNEED instead, which it takes
            assert populate(view, len(mm), 0x7fff) is True
            with pytest.raises(TypeError):
                populate(None, 1, mmap.MADV_WILLNEED)
        finally:
            view.release()
