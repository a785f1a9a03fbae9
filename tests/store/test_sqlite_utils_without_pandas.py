"""The stores import sqlite-utils without the pandas it would import for itself (0.45-0.7 s of a fresh server's
first page and of every CLI start), and nothing else loses pandas: a later ``import pandas`` works, also one made
by another thread while sqlite-utils is being imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _probe(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_stores_import_no_pandas_and_still_work(tmp_path):
    result = _probe(f"""
import json, sys
from docmind_core.store.db import Database
from docmind_core.store.config_store import ConfigStore
db = Database({str(tmp_path / "docmind.db")!r})
ConfigStore(db).set("retrieval.final_top_k", 7, by="test")
loaded = ConfigStore(db).load().retrieval.final_top_k
print(json.dumps({{"pandas": "pandas" in sys.modules, "top_k": loaded}}))
""")
    assert result == {"pandas": False, "top_k": 7}


def test_pandas_is_still_importable_after_and_beside_the_stores():
    result = _probe("""
import json, sys, threading
got = {}
def other_thread():
    import pandas
    got["thread"] = pandas.__name__
thread = threading.Thread(target=other_thread)
thread.start()
import docmind_core.store
thread.join()
import pandas
import sqlite_utils.db
print(json.dumps({"thread": got.get("thread"), "later": pandas.DataFrame({"a": [1]}).shape[0],
                  "finder_left": any(type(f).__name__ == "_NoPandasForSqliteUtils" for f in sys.meta_path)}))
""")
    assert result == {"thread": "pandas", "later": 1, "finder_left": False}


def test_an_earlier_pandas_import_is_left_as_it_is():
    result = _probe("""
import json, pandas
import docmind_core.store
import sqlite_utils.db
print(json.dumps({"sqlite_utils_sees_pandas": sqlite_utils.db.pd is pandas}))
""")
    assert result == {"sqlite_utils_sees_pandas": True}
