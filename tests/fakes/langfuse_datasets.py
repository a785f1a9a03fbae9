"""A local stand-in for Langfuse's dataset REST API (the part the SDK's ``LangfuseAPI`` client calls).

``POST /api/public/v2/datasets`` creates (or returns) a dataset by name and ``POST /api/public/dataset-items``
upserts an item by id, as Langfuse does; both answer with the JSON the SDK parses.  Every request's path,
Basic-auth user and JSON body is kept so tests can assert what was sent.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from tests.fakes.loopback import FakeHandler, LoopbackServer

DATASETS_PATH = "/api/public/v2/datasets"
ITEMS_PATH = "/api/public/dataset-items"
_NOW = "2026-01-01T00:00:00.000Z"


class _Handler(FakeHandler):
    fake: "FakeLangfuseDatasets"

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        fake = self.fake
        try:
            body = json.loads(self.read_body() or b"{}")
        except json.JSONDecodeError as exc:
            return self.send_bytes(400, str(exc).encode(), "text/plain")
        header = self.headers.get("Authorization", "")
        user = base64.b64decode(header[6:]).decode().partition(":")[0] if header.startswith("Basic ") else ""
        with fake.lock:
            fake.requests.append({"path": self.path, "user": user, "body": body})
            if self.path == DATASETS_PATH:
                dataset = fake.datasets.setdefault(body["name"], {
                    "id": f"ds-{len(fake.datasets) + 1}", "name": body["name"], "description": body.get("description"),
                    "metadata": body.get("metadata"), "projectId": "p1", "createdAt": _NOW, "updatedAt": _NOW})
                reply: dict[str, Any] = dataset
            elif self.path == ITEMS_PATH:
                if body["datasetName"] not in fake.datasets:
                    return self.send_bytes(404, b'{"message": "dataset not found"}', "application/json")
                item = {"id": body.get("id") or f"item-{len(fake.items) + 1}", "status": "ACTIVE",
                        "input": body.get("input"), "expectedOutput": body.get("expectedOutput"),
                        "metadata": body.get("metadata"), "sourceTraceId": None, "sourceObservationId": None,
                        "datasetId": fake.datasets[body["datasetName"]]["id"], "datasetName": body["datasetName"],
                        "createdAt": _NOW, "updatedAt": _NOW, "mediaReferences": []}
                fake.items[item["id"]] = item
                reply = item
            else:
                return self.send_bytes(404, b'{"message": "not found"}', "application/json")
        self.send_bytes(200, json.dumps(reply).encode(), "application/json")


class FakeLangfuseDatasets(LoopbackServer):
    handler = _Handler

    def __init__(self) -> None:
        self.datasets: dict[str, dict[str, Any]] = {}  # name -> dataset
        self.items: dict[str, dict[str, Any]] = {}  # id -> item (an upsert by id replaces)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
