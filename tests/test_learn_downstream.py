"""The learner track's last honesty check (issue 30): a workspace with every task revealed passes every task and every
downstream check of every chapter (its notebook top to bottom on the learner's package, and for the compiler's
chapters a few fuzzer programs), and then both milestones are reached. A file of its own, so that pytest-xdist runs it
beside tests/test_learn.py."""
import json

from test_learn import make_workspace, run
from tinylit_learn.tasks import CHAPTERS, tasks


def test_revealed_workspace_passes_every_downstream_check_and_reaches_the_milestones(tmp_path):
  ws = make_workspace(tmp_path / "revealed", reveal=True)
  for ch in CHAPTERS:
    proc = run(ws, "test", ch, "--json")
    assert proc.returncode == 0, f"chapter {ch}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    res = json.loads(proc.stdout)
    assert set(res["tasks"]) == {t.id for t in tasks(ch)} and all(r["passed"] for r in res["tasks"].values()), (ch, res)
    assert res["downstream"] and all(check["passed"] for check in res["downstream"].values()), (ch, res["downstream"])
  status = json.loads(run(ws, "status", "--json").stdout)
  assert all(status["milestones"].values()), status["milestones"]
