#!/bin/sh
# The Debian package checked end to end (issue 24, acceptance 4): CPack builds the .deb from
# this build, lintian finds no errors, dpkg installs it into a throwaway root (never into the
# running system: CI runs as root on a clean Debian 12 and must stay clean), the installed
# binary runs, and the installed unit passes `systemd-analyze verify` inside that root.
# Usage: package_test.sh BUILD_DIR
set -eu
build_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# -B keeps the package and CPack's staging out of the build directory.
cpack --config "$build_dir/CPackConfig.cmake" -B "$work/out" > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; echo "FAIL: cpack"; exit 1; }
deb=$(ls "$work"/out/cohort_*.deb)
echo "built $(basename "$deb")"

dpkg-deb --info "$deb" > "$work/info"
grep -q '^ Package: cohort$' "$work/info" || { cat "$work/info"; echo "FAIL: package name"; exit 1; }
grep -q '^ Depends: .*libc6' "$work/info" || { cat "$work/info"; echo "FAIL: no shlibs Depends"; exit 1; }
dpkg-deb --contents "$deb" > "$work/contents"
# The unit's install DESTINATION is relative, so it lands under /usr (usr-merged Debian 12).
for f in ./usr/bin/cohort ./usr/lib/systemd/system/cohort.service ./etc/default/cohort \
         ./usr/share/doc/cohort/copyright ./usr/share/doc/cohort/changelog.gz \
         ./usr/share/cohort/models/stories260K.gguf; do
  grep -q " $f\$" "$work/contents" || { echo "FAIL: $f not in the package"; exit 1; }
done
dpkg-deb --ctrl-tarfile "$deb" | tar -tf - > "$work/control"
grep -q conffiles "$work/control" || { echo "FAIL: no conffiles"; exit 1; }

# lintian exits non-zero on errors only with --fail-on error (its default in 2.116 too).
lintian --fail-on error "$deb" > "$work/lintian.log" 2>&1 || {
  cat "$work/lintian.log"; echo "FAIL: lintian reports errors"; exit 1; }
grep '^W:' "$work/lintian.log" || true

# A throwaway dpkg database: the package's library Depends are not in it, hence
# --force-depends; it has no maintainer scripts, so --force-script-chrootless changes nothing.
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: > "$root/var/lib/dpkg/status"
dpkg --root="$root" --force-depends --force-script-chrootless --log=/dev/null -i "$deb" > "$work/dpkg.log" 2>&1 ||
  { cat "$work/dpkg.log"; echo "FAIL: dpkg -i"; exit 1; }
dpkg --root="$root" -s cohort | grep -q '^Status: install ok installed$' ||
  { echo "FAIL: dpkg does not report cohort installed"; exit 1; }
"$root/usr/bin/cohort" --version | grep -q cohort || { echo "FAIL: installed binary"; exit 1; }

# verify looks for ExecStart's binary and needs the system's targets (sysinit.target), which a
# throwaway root lacks: check the installed unit with ExecStart pointed at the installed binary.
sed "s|/usr/bin/cohort|$root/usr/bin/cohort|" "$root/usr/lib/systemd/system/cohort.service" > "$work/cohort.service"
systemd-analyze verify --man=no "$work/cohort.service" > "$work/verify.log" 2>&1 ||
  { cat "$work/verify.log"; echo "FAIL: systemd-analyze verify"; exit 1; }
if [ -s "$work/verify.log" ]; then cat "$work/verify.log"; echo "FAIL: verify warnings"; exit 1; fi
echo "PASS"
