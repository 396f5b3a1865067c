#!/usr/bin/env bash
# Build and install Horovod 0.28.1 (TensorFlow + Gloo [+ MPI]) into a virtualenv that
# already has TensorFlow, only when it is not already built against that TensorFlow.
#
#   scripts/build_horovod.sh [--check] VENV_DIR
#
# --check: only say whether a rebuild is needed (exit 0: up to date; exit 3: a rebuild
# is needed, and why); nothing is installed or built.
#
# Environment:
#   HOROVOD_FORCE_REBUILD=1   rebuild even when the stamp says it is up to date
#   HOROVOD_BUILD_JOBS=N      parallel compile jobs (default: number of CPUs; Horovod's
#                             own default is -j8, which on 2 cores only costs memory)
#   HOROVOD_BUILD_LOG=FILE    build log (default: VENV_DIR/horovod-build.log)
#   HOROVOD_REQUIRE_MPI=1     fail instead of building Gloo-only when MPI is missing
#
# Up to date means: the installed horovod is $HOROVOD_VERSION, the TensorFlow it was built
# against (horovod/metadata.json, which Horovod's build writes) is the installed one, and
# the stamp VENV_DIR/.horovod-build-stamp matches (Horovod version, TensorFlow version,
# Python version, MPI built yes/no, and on a machine with NVIDIA GPUs the GPU operations:
# NCCL or none). Then it does nothing. The check reads package
# metadata only (no TensorFlow import: well under a second), so `make setup` runs it
# every time and rebuilds Horovod after any change of TensorFlow (`pip install -U
# tensorflow`), Python or MPI.
#
# Why the build needs help with TensorFlow >= 2.19 (no change to Horovod's source):
#   * horovod/tensorflow/xla_mpi_ops.cc includes tensorflow/compiler/xla/client/xla_builder.h,
#     which TF moved to xla/hlo/builder/xla_builder.h. A one-line forwarding header at the
#     old path, in a temporary include dir, fixes it.
#   * TF's XLA headers include <highwayhash/...> and "farmhash.h", which TF ships under
#     its include dir as external/highwayhash and external/farmhash_archive/src but does
#     not put on the include path. Both go on CPATH.
# See docs/horovod_build.md.
set -euo pipefail

HOROVOD_VERSION=0.28.1
# Build-time Python packages, pinned. cmake<4: Horovod's bundled gloo declares
# cmake_minimum_required(2.8.12), which CMake 4 rejects.
BUILD_DEPS=(setuptools==80.9.0 wheel==0.45.1 "packaging>=24" psutil==7.1.3
            pyyaml==6.0.3 cloudpickle==3.1.2 cmake==3.31.6)

say() { printf 'build_horovod: %s\n' "$*"; }
die() { printf 'build_horovod: ERROR: %s\n' "$*" >&2; exit 1; }

CHECK_ONLY=0
if [[ ${1:-} == --check ]]; then CHECK_ONLY=1; shift; fi
[[ $# -eq 1 ]] || die "usage: $0 [--check] VENV_DIR"
VENV=$(cd "$1" 2>/dev/null && pwd) || die "no such directory: $1"
PY=$VENV/bin/python
[[ -x $PY ]] || die "$PY not found (is $VENV a virtualenv?)"
STAMP=$VENV/.horovod-build-stamp
LOG=${HOROVOD_BUILD_LOG:-$VENV/horovod-build.log}
JOBS=${HOROVOD_BUILD_JOBS:-$(nproc)}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || die "HOROVOD_BUILD_JOBS must be a positive integer, got '$JOBS'"

# Versions from package metadata: fast, does not import TensorFlow (or Horovod).
read -r TF_VERSION PY_VERSION HVD_INSTALLED HVD_BUILT_TF HVD_TF_SAME HVD_LIB < <("$PY" - <<'EOF'
import glob, importlib.metadata as md, importlib.util, json, os, platform
def v(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "none"
tf = v("tensorflow")
if tf == "none":
    tf = v("tensorflow-cpu")
built, lib = "none", 0
spec = importlib.util.find_spec("horovod")
if spec is not None and spec.submodule_search_locations:
    pkg = list(spec.submodule_search_locations)[0]
    lib = int(bool(glob.glob(os.path.join(pkg, "tensorflow", "mpi_lib*.so"))))
    try:
        with open(os.path.join(pkg, "metadata.json")) as f:
            built = str(json.load(f).get("tensorflow") or "none")
    except (OSError, ValueError, AttributeError):
        pass
try:  # PEP 440: TensorFlow's "2.22.0-rc1" is the package "2.22.0rc1"
    from packaging.version import Version
    same = built != "none" and Version(built) == Version(tf)
except Exception:
    same = built == tf
print(tf, platform.python_version(), v("horovod"), built, int(same), lib)
EOF
) || true
[[ -n ${HVD_LIB:-} ]] || die "could not read package versions with $PY"
[[ $TF_VERSION != none ]] || die "tensorflow is not installed in $VENV; install it first"

if command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
    WITH_MPI=1
else
    [[ ${HOROVOD_REQUIRE_MPI:-0} != 1 ]] || die "MPI (mpicxx, mpirun) not found; run scripts/setup_system.sh"
    WITH_MPI=0
fi
WANT_STAMP="horovod=$HOROVOD_VERSION tensorflow=$TF_VERSION python=$PY_VERSION mpi=$WITH_MPI"

# GPU operations (NCCL allreduce of GPU tensors) only where nvidia-smi lists GPUs. The build
# needs a CUDA toolkit (nvcc, and its include and lib dirs under one CUDA home: a system
# install, e.g. /usr/local/cuda; the split pip packages are not one) and NCCL (the pip
# package nvidia-nccl-cu12 that tensorflow[and-cuda] installs, or a system one). Missing
# either: say which, and build the CPU operations (Gloo, MPI) as everywhere else.
GPU_OPS=none
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    NVCC=$(command -v nvcc 2>/dev/null || true)
    [[ -n $NVCC || ! -x /usr/local/cuda/bin/nvcc ]] || NVCC=/usr/local/cuda/bin/nvcc
    CUDA_HOME_FOUND=${NVCC:+$(dirname "$(dirname "$(readlink -f "$NVCC")")")}
    NVCC_RELEASE=$([[ -n $NVCC ]] && "$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\)\..*/\1/p' | head -n 1)
    NCCL_HOME_FOUND=$("$PY" -c "import importlib.util, os
s = importlib.util.find_spec('nvidia.nccl')
d = list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else ''
print(d if d and os.path.exists(os.path.join(d, 'include', 'nccl.h')) else '')" 2>/dev/null || true)
    if [[ -z $NCCL_HOME_FOUND && -e /usr/include/nccl.h ]]; then NCCL_HOME_FOUND=/usr; fi
    MISSING=()
    if [[ -z $CUDA_HOME_FOUND ]]; then
        MISSING+=("a CUDA 12 toolkit (no nvcc on PATH or in /usr/local/cuda/bin: install NVIDIA's CUDA 12 toolkit)")
    elif [[ $NVCC_RELEASE != 12 ]]; then
        MISSING+=("a CUDA 12 toolkit ($NVCC is CUDA ${NVCC_RELEASE:-of unknown release}; TensorFlow $TF_VERSION's CUDA build is CUDA 12: put a CUDA 12 nvcc first on PATH)")
        CUDA_HOME_FOUND=""
    fi
    [[ -n $NCCL_HOME_FOUND ]] || MISSING+=("NCCL (no nccl.h from the pip package nvidia-nccl-cu12 or in /usr/include: pip install nvidia-nccl-cu12)")
    if [[ ${#MISSING[@]} -eq 0 ]]; then
        GPU_OPS=NCCL
    else
        say "this machine has NVIDIA GPUs but Horovod's NCCL build needs $(printf '%s and ' "${MISSING[@]}" | sed 's/ and $//'); building the CPU operations (Gloo/MPI: GPU tensors go through host memory)"
    fi
    WANT_STAMP="$WANT_STAMP gpu_ops=$GPU_OPS"
fi
HAVE_STAMP=$(cat "$STAMP" 2>/dev/null || echo none)

WHY=""
if [[ $HVD_INSTALLED == none ]]; then
    WHY="horovod is not installed"
elif [[ $HVD_INSTALLED != "$HOROVOD_VERSION" ]]; then
    WHY="horovod $HVD_INSTALLED is installed, $HOROVOD_VERSION is wanted"
elif [[ $HVD_LIB != 1 ]]; then
    WHY="horovod's compiled TensorFlow library (horovod/tensorflow/mpi_lib*.so) is missing"
elif [[ $HVD_BUILT_TF == none ]]; then
    WHY="horovod was built without TensorFlow (its metadata.json names none)"
elif [[ $HVD_TF_SAME != 1 ]]; then
    WHY="TensorFlow $TF_VERSION is installed but Horovod was built against TensorFlow $HVD_BUILT_TF"
elif [[ $HAVE_STAMP != "$WANT_STAMP" ]]; then
    WHY="the build stamp says '$HAVE_STAMP', this venv needs '$WANT_STAMP'"
elif [[ ${HOROVOD_FORCE_REBUILD:-0} == 1 ]]; then
    WHY="HOROVOD_FORCE_REBUILD=1"
fi
if [[ -z $WHY ]]; then
    say "up to date ($WANT_STAMP); nothing to do"
    exit 0
fi
if [[ $CHECK_ONLY == 1 ]]; then
    say "rebuild needed: $WHY"
    exit 3
fi
say "rebuilding: $WHY"

# --- rebuild -------------------------------------------------------------------------
command -v g++ >/dev/null 2>&1 && command -v make >/dev/null 2>&1 \
    || die "g++ and make are needed to build Horovod; run scripts/setup_system.sh"
if [[ $WITH_MPI == 0 ]]; then
    say "MPI not found: building with Gloo only (run scripts/setup_system.sh for MPI)"
fi

# Serialise concurrent builds into the same venv.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$VENV/.horovod-build.lock"
    flock 9
fi

say "building horovod $HOROVOD_VERSION for tensorflow $TF_VERSION (python $PY_VERSION, mpi=$WITH_MPI); log: $LOG"
start=$SECONDS
: >"$LOG"
"$PY" -m pip install --disable-pip-version-check --no-cache-dir "${BUILD_DEPS[@]}" >>"$LOG" 2>&1 \
    || { tail -n 40 "$LOG" >&2; die "installing build dependencies failed (log: $LOG)"; }

# The include dir of tf.sysconfig.get_include(), found without importing TensorFlow.
TF_INC=$("$PY" -c "import importlib.util, os; print(os.path.join(importlib.util.find_spec('tensorflow').submodule_search_locations[0], 'include'))")
[[ -d $TF_INC ]] || die "TensorFlow include dir not found: $TF_INC"

SHIM=$(mktemp -d "${TMPDIR:-/tmp}/horovod-build-inc.XXXXXX")
trap 'rm -rf "$SHIM"' EXIT
CPATH_ADD=()
if [[ ! -e $TF_INC/tensorflow/compiler/xla/client/xla_builder.h && -e $TF_INC/xla/hlo/builder/xla_builder.h ]]; then
    mkdir -p "$SHIM/tensorflow/compiler/xla/client"
    echo '#include "xla/hlo/builder/xla_builder.h"' >"$SHIM/tensorflow/compiler/xla/client/xla_builder.h"
    CPATH_ADD+=("$SHIM")
    echo "build_horovod: forwarding header $SHIM/tensorflow/compiler/xla/client/xla_builder.h" >>"$LOG"
fi
for d in "$TF_INC/external/highwayhash" "$TF_INC/external/farmhash_archive/src"; do
    if [[ -d $d ]]; then CPATH_ADD+=("$d"); fi
done
CPATH_NEW=$(IFS=:; echo "${CPATH_ADD[*]}")
export CPATH="$CPATH_NEW${CPATH:+:$CPATH}"
echo "build_horovod: CPATH=$CPATH" >>"$LOG"

export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
if [[ $WITH_MPI == 1 ]]; then
    export HOROVOD_WITH_MPI=1; unset HOROVOD_WITHOUT_MPI
else
    export HOROVOD_WITHOUT_MPI=1; unset HOROVOD_WITH_MPI
fi
if [[ $GPU_OPS == NCCL ]]; then
    export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_CUDA_HOME=$CUDA_HOME_FOUND HOROVOD_NCCL_HOME=$NCCL_HOME_FOUND
    say "GPU operations: NCCL ($NCCL_HOME_FOUND), CUDA toolkit $CUDA_HOME_FOUND"
else
    unset HOROVOD_GPU_OPERATIONS
fi
export MAKEFLAGS="-j$JOBS"
# Horovod's setup.py runs `cmake` from PATH: the pinned one in the venv comes first.
export PATH="$VENV/bin:$PATH"
rm -f "$STAMP"

# --force-reinstall: the same horovod version built against an older TF must be replaced;
# --no-deps: its runtime deps are the pinned BUILD_DEPS above, leave the rest alone.
if ! "$PY" -m pip install --disable-pip-version-check --no-cache-dir --no-build-isolation \
        --force-reinstall --no-deps -v "horovod==$HOROVOD_VERSION" >>"$LOG" 2>&1; then
    # The compiler's first errors sit far above pip's clean-up noise: show both.
    echo "----- first compiler/CMake errors in $LOG -----" >&2
    grep -n -m 8 -E "fatal error|error:|CMake Error|\*\*\* \[" "$LOG" | cut -c1-400 >&2 || true
    echo "----- last 40 lines of $LOG -----" >&2
    tail -n 40 "$LOG" >&2
    die "horovod build failed after $((SECONDS - start)) s (full log: $LOG)"
fi

# One import that also reports the controllers (horovodrun --check-build would spawn one
# TensorFlow import per framework and flag: ~30 s on 2 cores).
if ! BUILT=$(TF_CPP_MIN_LOG_LEVEL=3 "$PY" -c "import horovod.tensorflow as hvd; print(
    'controllers:', *[n for n, b in (('MPI', hvd.mpi_built()), ('Gloo', hvd.gloo_built())) if b],
    '; GPU operations:', 'NCCL' if hvd.nccl_built() else 'none')" 2>>"$LOG"); then
    tail -n 30 "$LOG" >&2
    die "horovod installed but 'import horovod.tensorflow' fails (log: $LOG)"
fi
echo "$WANT_STAMP" >"$STAMP"
say "built in $((SECONDS - start)) s; import horovod.tensorflow works; $(echo "$BUILT" | tail -n 1)"
