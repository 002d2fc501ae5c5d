#!/usr/bin/env bash
# The accelerator check, prepared to run in one go (at most about 8 minutes, no network):
#
#   benchmarks/device_check.sh [--cpu-smoke] [OUT_DIR]
#
# 1. installs the project from this working tree with the packages already installed
#    (no download; skipped when ppage_jax already imports from here),
# 2. `ppage-jax bench` on configs/default at batches 2^10 .. 2^20 (env-steps/s, compile time),
# 3. the training-throughput benchmark (ppage_jax's IPPO against the PureJaxRL-structured
#    loop) at 4096 grids,
# 4. a one-seed reduced reward-design study (the farming experiment: both arms, one seed,
#    64 held-out episodes),
# and writes everything under OUT_DIR (default runs/device_check): bench.json, bench.md,
# train_throughput.json, study/, device.json and summary.md.
#
# --cpu-smoke runs the same steps at tiny sizes on the CPU (a minute or two): the slow tests
# run it, so the script is known to work before an accelerator is lent.
set -euo pipefail
cd "$(dirname "$0")/.."

SMOKE=0
if [ "${1:-}" = "--cpu-smoke" ]; then
    SMOKE=1
    shift
fi
OUT=${1:-runs/device_check}
mkdir -p "$OUT"
PY=${PYTHON:-python}
export PPAGE_JAX_COMPILE_CACHE=0  # compile times are measured cold

if ! "$PY" -c "import ppage_jax, pathlib, sys; sys.exit(pathlib.Path(ppage_jax.__file__).resolve().parents[1] != pathlib.Path.cwd().resolve())" 2>/dev/null; then
    "$PY" -m pip install --no-index --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1
fi

if [ "$SMOKE" = 1 ]; then
    export JAX_PLATFORMS=cpu
    BATCHES=16,64
    BENCH_STEPS=20
    GRIDS=8
    TRAIN=(--num-envs 8 --num-steps 4 --updates 2 --blocks 1 --set env.size=5)
    STUDY=(--seeds 1 --eval-episodes 4 --set experiment.total_timesteps=4096)
else
    BATCHES=1024,4096,16384,65536,262144,1048576
    BENCH_STEPS=200
    GRIDS=4096
    TRAIN=(--num-envs "$GRIDS" --updates 24 --blocks 2)
    STUDY=(--seeds 1 --eval-episodes 64)
fi

start=$(date +%s)
"$PY" - "$OUT/device.json" <<'EOF'
import json, sys, jax
devices = jax.devices()
info = {"platform": devices[0].platform, "device": str(devices[0]),
        "device_kind": devices[0].device_kind, "count": len(devices), "jax": jax.__version__}
json.dump(info, open(sys.argv[1], "w"), indent=2)
print("device:", info)
EOF

ppage-jax bench --configs configs/default --batch-sizes "$BATCHES" --steps "$BENCH_STEPS" \
    --repeats 2 --no-peers --no-oracle --no-first-step \
    --json "$OUT/bench.json" --markdown "$OUT/bench.md" | tee "$OUT/bench.log"

"$PY" benchmarks/train_throughput.py "${TRAIN[@]}" --json "$OUT/train_throughput.json" \
    | tee "$OUT/train_throughput.log"

ppage-jax sweep configs/studies/reward_design/farming.yaml "${STUDY[@]}" \
    --output "$OUT/study" --overwrite --no-progress | tee "$OUT/study.log"

seconds=$(( $(date +%s) - start ))
"$PY" - "$OUT" "$seconds" "$SMOKE" <<'EOF'
import json, pathlib, sys
out, seconds, smoke = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
device = json.loads((out / "device.json").read_text())
lines = [
    f"# Device check{' (CPU smoke)' if smoke else ''}",
    "",
    f"Device: {device['device_kind']} x {device['count']} ({device['platform']}), "
    f"JAX {device['jax']}; {seconds} s in all.",
    "",
    "## ppage-jax bench (configs/default, random policy, batched auto-reset)",
    "",
    (out / "bench.md").read_text().strip(),
    "",
    "## Training throughput (IPPO against the PureJaxRL-structured loop)",
    "",
    "```",
    (out / "train_throughput.log").read_text().strip(),
    "```",
    "",
    "## Reduced reward-design study (farming, one seed)",
    "",
    f"Report: `{out / 'study' / 'report.md'}`.",
]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print(f"wrote {out}/summary.md ({seconds} s)")
EOF
