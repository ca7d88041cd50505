#!/usr/bin/env bash
# Installs the Debian 12 packages cohort builds, tests and runs with. Idempotent: packages
# already present are left alone, so it is safe to run before every build.
#
# Versions as Debian 12 (bookworm) ships them, which is what the project is tested with:
#   g++ 12.2, cmake 3.25.1, libgtest-dev 1.12.1, libpcre2-dev 10.42, libfmt-dev 9.1.0,
#   nlohmann-json3-dev 3.11.2, libcli11-dev 2.1.2, libcpp-httplib-dev 0.11.4,
#   libsodium-dev 1.0.18, libssl-dev/openssl 3.0 (the API's TLS; the test CA), libtoml11-dev 3.7.1
#   (serve --config), lintian 2.116 (the .deb's check), clang 14 (libFuzzer), nodejs 18+/npm (test vectors, openai client),
#   g++-aarch64-linux-gnu 12.2 and qemu-user 7.2 with arm64 libgtest-dev/libfmt-dev (the
#   AArch64 kernels' cross build, run under emulation), chromium 156 (headless, for the
#   dashboard's browser test; driven by playwright-core from npm, no chromedriver), tcpdump
#   4.99.3 (the capture test: what crosses the cluster's network).
set -euo pipefail

packages=(
  build-essential cmake pkg-config git ca-certificates
  libgtest-dev libpcre2-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libcpp-httplib-dev libsodium-dev libssl-dev openssl libtoml11-dev lintian
  clang libclang-rt-14-dev
  iproute2 chromium tcpdump
  libopenmpi-dev openmpi-bin libucx-dev
  g++-aarch64-linux-gnu qemu-user libgtest-dev:arm64 libfmt-dev:arm64
)
# Node.js may come from elsewhere (e.g. nodesource); only ask Debian for it when absent.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # The arm64 libraries for the AArch64 cross build come from Debian's multiarch archive.
  dpkg --print-foreign-architectures | grep -qx arm64 || "${sudo_cmd[@]}" dpkg --add-architecture arm64
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
