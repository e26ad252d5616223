"""The static pre-check: escapes are refused with an actionable message; normal analysis code passes."""

from __future__ import annotations

import pytest

from worldsmith.tools.sandbox import precheck

ANALYSIS = [
    "import pandas as pd\nimport numpy as np\ndf = pd.read_csv('sales.csv')\n"
    "summary = df.groupby('region')['amount'].agg(['sum', 'mean'])\nprint(summary.to_string())",
    "import os\nos.makedirs('out', exist_ok=True)\nfiles = sorted(os.listdir('.'))\n"
    "path = os.path.join('out', 'report.md')\nwith open(path, 'w') as fh:\n    fh.write('# report')",
    "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.hist([1, 2, 2, 3])\nplt.savefig('hist.png')",
    "df = __import__('pandas').DataFrame({'a': [1, 2]})\ndf['b'] = df.eval('a * 2')\nprint(df.query('b > 2'))",
    "from scipy import stats\nfrom sklearn.linear_model import LinearRegression\nimport statsmodels.api as sm\n"
    "import json, re, math, collections, datetime, itertools, warnings\nwarnings.filterwarnings('ignore')",
    "from urllib.parse import quote\nimport sqlite3\ncon = sqlite3.connect('db.sqlite')\nprint(quote('a b'))",
    "with open('/tmp/scratch.txt', 'w') as fh:\n    fh.write('x')\nprint(open('/data/sales.csv').read()[:100])",
    "result = eval('1 + 2')\nprint(os.environ.get('HOME'))",
    "def broken(:\n    pass",  # syntax errors are the interpreter's to report
]

ESCAPES = [
    ("import subprocess\nsubprocess.run(['ls'])", "subprocess"),
    ("import os\nos.system('rm -rf /')", "os.system"),
    ("from os import popen", "os.popen"),
    ("import os as o\no.execv('/bin/sh', ['sh'])", "os.execv"),
    ("import os\nos.fork()", "os.fork"),
    ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "os.kill"),
    ("import socket\nsocket.create_connection(('example.com', 80))", "socket"),
    ("import urllib.request\nurllib.request.urlopen('http://x')", "urllib.request"),
    ("from urllib import request", "urllib.request"),
    ("import requests", "requests"),
    ("import http.client", "http.client"),
    ("import ctypes\nctypes.CDLL(None)", "ctypes"),
    ("m = __import__('sub' + 'process')", "dynamic imports"),
    ("import importlib\nimportlib.import_module('subprocess')", "subprocess"),
    ("code = 'import os'\nexec(code)", "exec()"),
    ("exec('import subprocess')", "subprocess"),
    ("().__class__.__bases__[0].__subclasses__()", "__subclasses__"),
    ("getattr(__import__('os'), 'system')('id')", "'system'"),
    ("open('/etc/passwd', 'w').write('x')", "/etc/passwd"),
    ("open('../../outside.txt', 'a')", "outside the workspace"),
    ("import shutil\nshutil.rmtree('/')", "deleting '/'"),
    ("import pip", "cannot be installed"),
]


@pytest.mark.parametrize("code", ANALYSIS)
def test_typical_analysis_code_passes(code: str) -> None:
    report = precheck(code)
    assert report.ok, report.message()


@pytest.mark.parametrize(("code", "needle"), ESCAPES)
def test_escapes_are_refused_with_a_readable_message(code: str, needle: str) -> None:
    report = precheck(code)
    assert not report.ok
    message = report.message()
    assert needle in message and message.startswith("Code refused by the sandbox pre-check: line ")


def test_allowed_write_roots_are_configurable() -> None:
    code = "open('/scratch/out.txt', 'w')"
    assert not precheck(code).ok
    assert precheck(code, ["/scratch"]).ok
