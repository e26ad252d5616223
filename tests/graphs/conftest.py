"""Shared turns for the analyst tests (fixtures live in tests/conftest.py)."""

CODE_TURN = "<think>\nLoad the data and compute the mean.\n</think>\n<code>\ndf = pd.read_csv('sales.csv')\nprint(df['amount'].mean())\n</code>"
ANSWER_TURN = "<think>\nThe mean is 20.\n</think>\n<answer>\nThe mean amount is 20.0. @mean_amount[20.0]\n</answer>"
