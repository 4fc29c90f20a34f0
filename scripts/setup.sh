# Sourced by ./kg: makes $PY a Python that has kernelgate and everything it needs.
#
# - Where python3 already has torch, triton and pydantic (the GPU image with the device bundle on
#   PYTHONPATH, or a prepared environment), kernelgate is installed from this checkout into
#   .kernelgate-site (no index, no dependencies) and put first on PYTHONPATH.
# - Otherwise (a fresh CPU machine) a virtual environment .venv is made: torch's CPU build 2.13.0
#   first (an unpinned torch would pull a 5 GB CUDA build), numpy below 2.4 (Triton 3.6's
#   interpreter fails with numpy 2.4+), then Triton 3.6.0, and kernelgate with its gpu, openai, test,
#   tilelang, plots and ray extras (nvidia-ml-py; httpx and tenacity for the OpenAI-compatible
#   client; pytest, hypothesis and ruff; TileLang 0.1.15, after torch so that it does not pull its
#   own; matplotlib for the report's roofline PNG; Ray for kernelgate.ray_pool and its tests).
if python3 -c "import torch, triton, pydantic, tenacity, httpx" 2>/dev/null; then
  PY=python3
  rm -rf .kernelgate-site
  if ! python3 -m pip install -q --no-deps --no-build-isolation --no-index --target .kernelgate-site . >/dev/null 2>&1; then
    # No index here, so pip builds with python3's own setuptools; one older than 77 cannot read the
    # SPDX license field. kernelgate is pure Python: lay out the packages as pyproject.toml maps them.
    echo "kernelgate: pip could not build the checkout with this python3's setuptools (77+ is needed);" \
         "copying the packages into .kernelgate-site instead" >&2
    rm -rf .kernelgate-site && mkdir -p .kernelgate-site
    cp -R kernelgate .kernelgate-site/kernelgate
    cp -R adapters .kernelgate-site/kernelgate/adapters
    cp -R reference_ops .kernelgate-site/kernelgate/reference_ops
    find .kernelgate-site -name __pycache__ -prune -exec rm -rf {} +
  fi
  export PYTHONPATH="$PWD/.kernelgate-site${PYTHONPATH:+:$PYTHONPATH}"
else
  PY=.venv/bin/python
  if ! [ -x "$PY" ] || ! "$PY" -c "import torch, triton, tilelang, pydantic, pytest, hypothesis, ruff, matplotlib, ray, httpx, tenacity, pynvml, helion, kernelgate.reference_ops" 2>/dev/null; then
    echo "kernelgate: setting up .venv (first run only)" >&2
    python3 -m venv .venv
    "$PY" -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' >&2 || true
    "$PY" -m pip install -q torch==2.13.0 2>&1 | grep -v '^WARNING: Location' >&2 || true
    "$PY" -m pip install -q "numpy<2.4" triton==3.6.0 -e ".[gpu,openai,test,tilelang,plots,ray,helion]" 2>&1 | grep -v '^WARNING: Location' >&2 || true
    "$PY" -c "import torch, triton, tilelang, pydantic, pytest, ruff, ray, httpx, tenacity, helion, kernelgate.reference_ops" || { echo "kernelgate: set-up failed" >&2; exit 1; }
  fi
fi
export PY
