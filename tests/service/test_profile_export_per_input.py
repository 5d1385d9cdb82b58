"""The service's profile export follows the exporters' rule: a registered profile of a per-input method
(here the global gates) is served as json, and a static format is a 422 naming the provenance field,
not a file that would run another method."""

from __future__ import annotations

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json

from .conftest import ServiceProcess
from .test_api import GEOMETRY


def test_a_gates_profile_is_served_as_json_and_refused_as_kvpress(tmp_path):
    gates = Allocation(model="tiny", geometry=GEOMETRY, scorer="gates", scorer_params={}, target=32,
                       granularity="layer",
                       budgets=np.full((4, 2), 32), provenance={"method": "gates", "task": "passkey"})
    service = ServiceProcess(tmp_path / "runs", max_jobs=0).start()
    try:
        with service.client() as http:
            created = http.post("/profiles", content=allocation_to_json(gates),
                                headers={"Content-Type": "application/json"})
            assert created.status_code == 201, created.text
            profile_id = created.json()["id"]
            assert http.get(f"/profiles/{profile_id}").json()["provenance"]["method"] == "gates"
            refused = http.get(f"/profiles/{profile_id}", params={"format": "kvpress", "context_length": 100})
            assert refused.status_code == 422, refused.text
            body = refused.json()
            assert body["field"] == "$.provenance.method" and "per input" in body["error"] and "\n" not in body["error"]
    finally:
        service.stop()
