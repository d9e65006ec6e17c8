#!/usr/bin/env bash
# Installs the Debian packages RSI needs that are missing (root; apt). `run` is what the dashboard
# needs; `test` adds what the test suite uses. Already-present packages are left alone.
# Every program the code shells out to is in the PROGRAMS tables (tests/test_site_setup.py checks
# that the code names no other, and that each is installed after this script ran).
set -euo pipefail
role=${1:-run}
python=${PYTHON:-python3.11}
need=()
backports=()

# program (a name on PATH, or an absolute path pattern)   Debian package   why
PROGRAMS_RUN="
git                              git          the evaluator revision recorded in provenance
"
PROGRAMS_TEST="
/usr/lib/postgresql/*/bin/initdb postgresql   throwaway PostgreSQL servers (scale-out tests)
/usr/lib/postgresql/*/bin/pg_ctl postgresql   starting and stopping them
runuser                          util-linux   running PostgreSQL as its own user when tests run as root
mount                            mount        a small tmpfs as the media root (the full-disk tests, as root)
umount                           mount        and its unmounting
redis-server                     redis-server throwaway Redis servers (scale-out tests: broker and channel layer)
/usr/bin/chromium                chromium     browser tests (Playwright downloads no browser here)
cc                               gcc          building RSI's Vulkan layer for lavapipe
make                             make         reading make run's recipe (the order of its steps)
"

have_program() { if [[ $1 == /* ]]; then compgen -G "$1" >/dev/null; else command -v "$1" >/dev/null; fi; }
need_programs() {
  while read -r program package _; do
    [ -n "$program" ] || continue
    have_program "$program" || need+=("$package")
  done <<<"$1"
}
have_lib() { ldconfig -p | grep -q "$1"; }

need_programs "$PROGRAMS_RUN"
# `python -m venv` needs ensurepip, which Debian ships apart from the interpreter.
"$python" -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv "${python##*/}-venv")
# MuJoCo renders on the CPU through Mesa's EGL (llvmpipe); OSMesa is the fallback.
have_lib 'libEGL.so.1 ' || need+=(libegl1 libgl1-mesa-dri)
have_lib 'libOSMesa.so' || need+=(libosmesa6)
if [ "$role" = test ]; then
  need_programs "$PROGRAMS_TEST"
  [ -f /usr/include/stdio.h ] || need+=(libc6-dev)
  [ -f /usr/include/vulkan/vk_layer.h ] || backports+=(libvulkan-dev)
  # SAPIEN renders on the CPU through lavapipe from Mesa 25 (bookworm-backports); the Vulkan loader
  # (libvulkan1) is also what `manage.py doctor` asks for the device list.
  dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q '^25' || backports+=(mesa-vulkan-drivers libvulkan1)
fi
if [ ${#need[@]} -gt 0 ] || [ ${#backports[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${need[*]} ${backports[*]} (run as root, or install them)" >&2
    exit 1
  fi
  if [ ${#backports[@]} -gt 0 ] && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" >/etc/apt/sources.list.d/bookworm-backports.list
  fi
  apt-get update -qq
  [ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  [ ${#backports[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports "${backports[@]}"
fi
