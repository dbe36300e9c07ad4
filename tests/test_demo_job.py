import pytest

from framework.delta import log
from jobs import orders_demo
from state_tables.store import StateStore

pytestmark = pytest.mark.spark


def test_demo_appends_one_day_per_run_and_records_state(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DELTAMARK_STATE_ROOT", raising=False)
    for _ in range(2):
        orders_demo.main(["--rows", "200"])
    out = capsys.readouterr().out
    assert "run 2 on the embedded Delta path wrote 200 orders for 2026-01-02" in out
    assert "rows now 400, at version 0 200, for 2026-01-02 200" in out

    table = str(tmp_path / "data/demo/lake/orders")
    assert log.transaction_version(table, "orders_demo") == 2
    store = StateStore(tmp_path / "data/state")
    assert [r.run_seq for r in store.runs("orders_demo")] == [1, 2]
    [bookmark] = store.bookmarks("orders_demo")
    assert bookmark.state == {"table": "data/demo/lake/orders", "version": 1}
