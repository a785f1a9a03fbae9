"""docmind_core.process.install_parse_lock: ast.parse, and what goes through it, runs in one thread at a time once
installed."""

from __future__ import annotations

import ast
import inspect
import threading
import time

from docmind_core.process import install_parse_lock


def _counting(parse):
    """``parse`` that also counts, in ``most[0]``, how many threads were inside it at once at most."""
    inside, most = [0], [0]

    def counting(*args, **kwargs):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.001)  # give the GIL away mid-parse
            return parse(*args, **kwargs)
        finally:
            inside[0] -= 1

    return counting, most


def _in_threads(work, threads: int = 3) -> None:
    """``work`` 20 times in each of ``threads`` threads started together; what a worker raises fails the test."""
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run():
        try:
            start.wait()
            for _ in range(20):
                work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test below
            errors.append(exc)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert not any(w.is_alive() for w in workers), "a worker never finished"
    if errors:
        raise errors[0]


def _overlap_seen(calls) -> int:
    """Run ``calls`` from several threads at once, with the lock installed over a counting ast.parse."""
    real = ast.parse
    ast.parse, most = _counting(real)
    try:
        install_parse_lock()  # wraps the counting parse, as it wraps the real one
        _in_threads(calls)
    finally:
        ast.parse = real
    return most[0]


def test_parses_from_several_threads_never_overlap():
    assert _overlap_seen(lambda: ast.parse("a = [1, 2, 3]")) == 1


def test_literal_eval_and_builtin_signatures_go_through_the_lock():
    # numpy's .npy header read and attrs' look at builtin signatures (chromadb's import) parse these ways
    def calls():
        assert ast.literal_eval("{'descr': '<f4', 'shape': (2,)}") == {"descr": "<f4", "shape": (2,)}
        assert str(inspect.signature(len)) == "(obj, /)"

    real = ast.parse
    counted = []
    ast.parse = lambda *a, **k: (counted.append(1), real(*a, **k))[1]  # both calls must reach ast.parse
    try:
        assert _overlap_seen(calls) == 1
    finally:
        ast.parse = real
    assert len(counted) == 2 * 3 * 20


def test_without_the_lock_the_same_threads_do_overlap():
    """The counting harness itself can see an overlap: the two tests above could not pass by accident."""
    counting, most = _counting(ast.parse)
    _in_threads(lambda: counting("a = 1"))
    assert most[0] > 1


def test_install_is_idempotent_and_keeps_parse_working():
    install_parse_lock()
    wrapped = ast.parse
    install_parse_lock()
    assert ast.parse is wrapped and ast.parse.docmind_parse_lock
    assert isinstance(ast.parse("x = 1"), ast.Module)
