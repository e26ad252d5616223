#!/usr/bin/env bash
# Sourced by the GPU checks: installs, from the carried wheels in build/gpu-wheels (git-ignored), every package the
# machine lacks or has older than the wheel, into build/gpu-site (prepended to PYTHONPATH). The machine's own
# packages are never replaced in place. Wheels fetched on a networked machine (cp312, manylinux x86-64), e.g.:
#
#   python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#     -d build/gpu-wheels trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 pydantic==2.14.4 \
#     pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
#
# (4.5 MB; the lent H200's image, read 2026-11-17, has torch, transformers, peft, accelerate, pandas, pyarrow,
# matplotlib but none of trl, datasets, dill, multiprocess, pydantic.)
PY=${PYTHON:-python3}
WHEELS=${GPU_WHEELS:-build/gpu-wheels}
SITE=${GPU_SITE:-$PWD/build/gpu-site}
need=$("$PY" - "$WHEELS" "$SITE" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])  # what an earlier call on this machine installed counts as there
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from packaging.version import Version
for whl in sorted(Path(sys.argv[1]).glob("*.whl")):
    name, ver = whl.name.split("-")[:2]
    try:
        have = Version(version(name))
    except PackageNotFoundError:
        have = None
    if have is None or have < Version(ver):
        print(whl)
PY
)
if [ -n "$need" ]; then
  echo "gpu_env: installing into $SITE: $(for w in $need; do basename "$w" | cut -d- -f1-2; done | tr '\n' ' ')"
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target "$SITE" $need || return 1
fi
[ -d "$SITE" ] && export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "import torch, transformers, trl, peft, datasets, pydantic; print('torch', torch.__version__, '| cuda', torch.cuda.is_available(), '| transformers', transformers.__version__, '| trl', trl.__version__, '| peft', peft.__version__, '| datasets', datasets.__version__, '| pydantic', pydantic.__version__)" || return 1
