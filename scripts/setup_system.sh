#!/usr/bin/env bash
# Install the system packages distbench's optional engines need, only when missing.
#
#   scripts/setup_system.sh            # as root (or with passwordless sudo)
#
# Parts (each skipped when its command is already present, or when its env var is 1):
#   OpenMPI   (mpirun)           libopenmpi-dev openmpi-bin   DISTBENCH_SKIP_MPI=1
#   Java 17   (java)             openjdk-17-jre-headless      DISTBENCH_SKIP_JAVA=1
#   Chromium  (/usr/bin/chromium) chromium                    DISTBENCH_SKIP_CHROMIUM=1
#   C++ build tools (g++, make)  g++ make                     DISTBENCH_SKIP_CXX=1
#   iproute2  (ip, tc)           iproute2                     DISTBENCH_SKIP_NETNS=1
#     (the emulated cluster: network namespaces and shaped links; used only as root)
#   OpenSSH server (sshd)        openssh-server openssh-client DISTBENCH_SKIP_NETNS=1
#     (the emulated cluster's launcher = "ssh": distbench starts its own sshd inside each
#     emulated host; the system's ssh service is not started or enabled by this install)
#     (needed only to build Horovod: scripts/build_horovod.sh)
# DISTBENCH_SKIP_SYSTEM_SETUP=1 skips everything.
#
# Idempotent: when everything is present it installs nothing, never runs
# `apt-get update`, and prints one line. `apt-get update` runs once, only when
# something must be installed. Exit status is non-zero only when an install was
# needed and failed (or could not run: not root and no sudo).
set -euo pipefail

say() { printf 'setup_system: %s\n' "$*"; }

if [[ "${DISTBENCH_SKIP_SYSTEM_SETUP:-0}" == "1" ]]; then
    say "skipped (DISTBENCH_SKIP_SYSTEM_SETUP=1)"
    exit 0
fi

missing=()   # apt packages to install
reasons=()   # human-readable reasons

want() {  # want SKIP_VAR PRESENT_TEST_CMD... -- PKG...
    local skip_var=$1; shift
    local -a test=() pkgs=()
    while [[ $# -gt 0 && $1 != "--" ]]; do test+=("$1"); shift; done
    shift
    pkgs=("$@")
    if [[ "${!skip_var:-0}" == "1" ]]; then
        return 0
    fi
    if ! "${test[@]}" >/dev/null 2>&1; then
        missing+=("${pkgs[@]}")
        reasons+=("${pkgs[*]} (${test[*]} failed)")
    fi
}

want DISTBENCH_SKIP_MPI      command -v mpirun     -- libopenmpi-dev openmpi-bin
want DISTBENCH_SKIP_JAVA     command -v java       -- openjdk-17-jre-headless
want DISTBENCH_SKIP_CHROMIUM test -x /usr/bin/chromium -- chromium
want DISTBENCH_SKIP_CXX      command -v g++        -- g++
want DISTBENCH_SKIP_CXX      command -v make       -- make
want DISTBENCH_SKIP_NETNS    command -v tc         -- iproute2
want DISTBENCH_SKIP_NETNS    test -x /usr/sbin/sshd -- openssh-server openssh-client

if [[ ${#missing[@]} -eq 0 ]]; then
    say "all present, nothing to install"
    exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    say "missing: ${reasons[*]}"
    say "need root to install them: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    say "missing: ${reasons[*]}; apt-get not found, install them with your package manager"
    exit 1
fi

for r in "${reasons[@]}"; do say "will install $r"; done
export DEBIAN_FRONTEND=noninteractive
start=$SECONDS
"${SUDO[@]}" apt-get update -qq
# openssh-client: Open MPI's launcher looks for ssh/rsh even for single-host runs.
extra=()
for p in "${missing[@]}"; do
    if [[ $p == openmpi-bin ]] && ! command -v ssh >/dev/null 2>&1; then extra+=(openssh-client); fi
done
# No service is started by the install (policy-rc.d answers 101, "action forbidden"; only
# when the machine has no policy of its own), and the ssh service openssh-server enables is
# disabled again: distbench runs its own sshd in its emulated hosts, never on this machine.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$policy" >/dev/null && "${SUDO[@]}" chmod 755 "$policy" && own_policy=1
fi
status=0
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" "${extra[@]}" >/tmp/distbench-apt.log 2>&1 || status=$?
if [[ $own_policy == 1 ]]; then "${SUDO[@]}" rm -f "$policy"; fi
if [[ $status != 0 ]]; then
    say "apt-get install failed; last lines of /tmp/distbench-apt.log:"
    tail -n 30 /tmp/distbench-apt.log >&2
    exit 1
fi
if [[ " ${missing[*]} " == *" openssh-server "* ]] && command -v systemctl >/dev/null 2>&1; then
    "${SUDO[@]}" systemctl disable -q ssh.service ssh.socket >/dev/null 2>&1 || true
fi
say "installed ${missing[*]} ${extra[*]} in $((SECONDS - start)) s"
