"""Fixtures for the web UI tests: a scripted model and settings that keep every file under tmp_path."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from worldsmith.core.config import Settings, load_settings
from worldsmith.llm.providers.scripted import Script, register_script, unregister_script

CODE_TURN = ("<think>\nLoad the data.\n</think>\n<code>\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\n"
             "print(df['amount'].mean())\n</code>")
ANSWER_TURN = "<think>\nThe mean is 20.\n</think>\n<answer>\nThe mean amount is 20. @mean_amount[20]\n</answer>"
# A follow-up that only works if the first cell's `df` is still defined (same sandbox, or replayed after a restart).
FOLLOWUP_CODE = "<think>\nReuse df.\n</think>\n<code>\nprint(df['amount'].max() * 7)\n</code>"
FOLLOWUP_PLOT_CODE = ("<think>\nReuse df and draw it.\n</think>\n<code>\nimport matplotlib\nmatplotlib.use('Agg')\n"
                      "import matplotlib.pyplot as plt\nplt.bar(df['region'], df['amount'])\nplt.savefig('bar.png')\n"
                      "plt.close('all')\nprint(df['amount'].max() * 7)\n</code>")
FOLLOWUP_ANSWER = ("<think>\nDone.\n</think>\n<answer>\n| stat | value |\n|---|---|\n| max x 7 | 210 |\n\n"
                   "@max_times_seven[210]\n</answer>")


@pytest.fixture
def sales_csv(tmp_path: Path) -> Path:
    p = tmp_path / "upload" / "sales.csv"
    p.parent.mkdir()
    p.write_text("region,amount\nnorth,10\nsouth,20\neast,30\n")
    return p


@pytest.fixture
def scripted_settings(tmp_path: Path):
    """(script, settings): a registered Script (queue answers on it) and Settings whose model is that script."""
    name = f"ui-test-{uuid.uuid4().hex[:8]}"
    script = register_script(name, Script())
    settings: Settings = load_settings(overrides={
        "home": str(tmp_path / "home"), "runs_dir": str(tmp_path / "runs"),
        "llm": {"default": {"provider": "scripted", "model": name}, "cache": False}})
    yield script, settings
    unregister_script(name)
