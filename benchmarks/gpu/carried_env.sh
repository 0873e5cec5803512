# Sourced by the GPU scripts (`. benchmarks/gpu/carried_env.sh || exit 1`), in the repository
# root on the GPU machine: the wheels carried in .whl/, if any, installed into /tmp/site
# (nothing can be downloaded there), the project on PYTHONPATH instead of installed, and the
# variables every run there needs (no datasets package: no auto-registration).
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || return 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export ATTENTIONSPAN_NO_AUTOREGISTER=1 PYTHONUNBUFFERED=1
