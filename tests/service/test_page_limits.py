"""What the page says about limits and phases (issue 34): why a submission is refused when the queue
is full, the operator's limits, and a running job's phase with its progress. The page's own
functions are run by node on a ``GET /limits`` answer and a job of the real server (no browser here:
the chromium tests of ``test_page.py`` cover the rendering). Skipped without node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import ServiceProcess, tiny_recipe_text

NODE = shutil.which("node")
APP_JS = Path(__file__).resolve().parents[2] / "evolalloc" / "service" / "static" / "app.js"
pytestmark = pytest.mark.skipif(NODE is None, reason="needs node (apt-get install nodejs)")

# app.js with a stand-in for the browser it runs in (it renders on load; its fetches never answer here).
RUNNER = """
const vm = require("vm"), fs = require("fs");
const element = () => ({ addEventListener() {}, hidden: true, textContent: "", innerHTML: "", value: "" });
const context = { document: { getElementById: element, addEventListener() {} }, window: { addEventListener() {} },
  location: { hash: "" }, sessionStorage: { getItem: () => null }, fetch: () => new Promise(() => {}),
  setTimeout() {}, clearTimeout() {}, console, Date, Number, String, Math, JSON, Promise };
vm.createContext(context);
const [path, limits, job] = process.argv.slice(1);
vm.runInContext(fs.readFileSync(path, "utf8") + `
  ;globalThis.out = { card: limitsCard(${limits}), phase: phaseText(${job}), estimate: estimate(${job}) };`, context);
process.stdout.write(JSON.stringify(context.out));
"""


def page_says(limits: dict, job: dict) -> dict:
    done = subprocess.run([NODE, "-e", RUNNER, str(APP_JS), json.dumps(limits), json.dumps(job)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_page_says_why_a_full_queue_refuses_and_shows_the_limits_and_a_jobs_phase(tmp_path, tiny_model_dir):
    service = ServiceProcess(tmp_path / "runs", max_jobs=0, extra=("--max-queued=1", "--max-evaluations=500")).start()
    try:
        with service.client() as http:
            job = http.post("/jobs", content=tiny_recipe_text(tiny_model_dir, "waits")).json()
            full = http.get("/limits").json()
            http.post(f"/jobs/{job['id']}/cancel")
            room = http.get("/limits").json()
    finally:
        service.stop()
    running = {**job, "status": "running", "phase": "prefilling", "phase_done": 3, "phase_total": 20,
               "phase_since": job["created_at"]}
    said = page_says(full, running)
    assert "queue is full" in said["card"] and "429" in said["card"] and "Retry-After" in said["card"]
    assert "500 evaluations" in said["card"] and "1 of 1 waiting" in said["card"]
    assert said["phase"].startswith("prefilling 3/20 · ")  # and how long it has been prefilling
    assert "estimate" in said["estimate"]
    assert "queue is full" not in page_says(room, job)["card"]
