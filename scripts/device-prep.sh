# Sourced at the start of a command on the H200 (the device tool), from the repository root there:
#
#   here:   ../shared/tools/device-bundle.sh                      # .device/site.tar.xz (once)
#           git archive --format=tar HEAD | gzip > .device/head.tgz && git rev-parse HEAD > .device/commit
#   there:  source scripts/device-prep.sh && python3 benchmarks/boundary.py --out "$OUT/boundary_h200.json"
#           (run with carry [".device"], plus ".kb" for benchmarks/kernelbench_all.py)
#   scripts/device-calls.sh sources this and runs the benchmarks the open issues wait for, by part.
#
# It unpacks the bundle into $SITE, the committed tree (.device/head.tgz: what HEAD holds, not the
# working tree's uncommitted edits) into $W, installs kernelgate from $W into $SITE, puts both on
# PYTHONPATH, and leaves the shell in $W. KERNELGATE_COMMIT names the commit in every record.
# A device call brings back at most 8 files from $OUT (more are left out, records too): write the
# records there and pack the logs into one tar.
set -u
export SITE=$(mktemp -d) W=$(mktemp -d)
tar -C "$SITE" -xJf .device/site.tar.xz
tar -C "$W" -xzf .device/head.tgz
cp -r .device "$W/.device"
[ -d .kb ] && cp -r .kb "$W/.kb"
export PYTHONPATH="$SITE:$W" PYTHONUNBUFFERED=1 KERNELGATE_COMMIT="$(cat .device/commit)"
(cd "$W" && python3 -m pip install -q --no-deps --no-build-isolation --no-index --target "$SITE" .) \
  || echo "device-prep: installing kernelgate failed" >&2
cd "$W"
nvidia-smi --query-gpu=name,uuid,clocks.sm,memory.used --format=csv,noheader
