#!/usr/bin/env bash
# Installs the Debian packages RSI needs that are missing (root; apt). `run` is what the dashboard
# needs; `test` adds what the test suite uses. Already-present packages are left alone.
set -euo pipefail
role=${1:-run}
need=()
have_lib() { ldconfig -p | grep -q "$1"; }
# MuJoCo renders on the CPU through Mesa's EGL (llvmpipe); OSMesa is the fallback.
have_lib 'libEGL.so.1 ' || need+=(libegl1 libgl1-mesa-dri)
have_lib 'libOSMesa.so' || need+=(libosmesa6)
backports=()
if [ "$role" = test ]; then
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  # Browser tests drive Debian's chromium with Playwright (which downloads no browser of its own).
  [ -x /usr/bin/chromium ] || need+=(chromium)
  command -v cc >/dev/null || need+=(gcc libc6-dev)
  [ -f /usr/include/vulkan/vk_layer.h ] || backports+=(libvulkan-dev)
  # SAPIEN renders on the CPU through lavapipe from Mesa 25 (bookworm-backports).
  dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | grep -q '^25' || backports+=(mesa-vulkan-drivers libvulkan1)
fi
if [ ${#need[@]} -gt 0 ] || [ ${#backports[@]} -gt 0 ]; then
  if [ $(id -u) -ne 0 ]; then
    echo "missing Debian packages: ${need[*]} ${backports[*]} (run as root, or install them)" >&2
    exit 1
  fi
  if [ ${#backports[@]} -gt 0 ] && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" > /etc/apt/sources.list.d/bookworm-backports.list
  fi
  apt-get update -qq
  [ ${#need[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  [ ${#backports[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -t bookworm-backports "${backports[@]}"
fi
