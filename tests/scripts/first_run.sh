#!/usr/bin/env bash
# A fresh machine, replayed: scripts/run-example.sh must install the packages before it asks
# which MPI is there (on a machine with no MPI the old order always chose MPICH, and the job
# then failed with "mpiexec.mpich is missing").
#
# The sandbox's PATH holds the tools the script needs and no MPI. Stubs stand in for the
# system's state: dpkg-query reports every package missing until the apt-get stub has
# "installed" it, and installing openmpi-bin puts an Open MPI mpiexec on PATH that prints
# the command it was given. cmake is a no-op (nothing is built). The run must end by
# launching Open MPI's mpiexec with Open MPI's flags; an MPICH choice, or a failure, fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
box="$(mktemp -d)"
trap 'rm -rf "$box"' EXIT
mkdir -p "$box/bin" "$box/installed" "$box/repo"
# A copy of the scripts, so that their build folder and logs land in the sandbox.
cp -R "$root/scripts" "$box/repo/scripts"

# The real tools the scripts use (resolved now, before PATH is narrowed); no MPI among them.
for tool in bash sh env cat grep sed dirname basename mkdir rm chmod touch nproc printf sort \
  head tr; do
  path="$(type -P "$tool")" || continue
  ln -s "$path" "$box/bin/$tool"
done

cat >"$box/bin/id" <<'STUB'
#!/bin/sh
[ "$1" = -u ] && echo 0 && exit 0
exec /usr/bin/id "$@"
STUB
cat >"$box/bin/dpkg-query" <<STUB
#!/bin/sh
# dpkg-query -W -f=FORMAT PACKAGE: installed only once the apt-get stub installed it.
for p; do :; done
[ -e "$box/installed/\$p" ] && printf 'install ok installed' && exit 0
exit 1
STUB
cat >"$box/bin/apt-get" <<STUB
#!/bin/sh
[ "\$1" = install ] || exit 0
for p; do
  case "\$p" in -*|install) continue ;; esac
  touch "$box/installed/\$p"
  if [ "\$p" = openmpi-bin ]; then
    printf '#!/bin/sh\n[ "\$1" = --version ] && echo "mpiexec (OpenRTE) 4.1.4" && exit 0\necho "launched: mpiexec \$*"\n' >"$box/bin/mpiexec"
    chmod +x "$box/bin/mpiexec"
  fi
done
STUB
printf '#!/bin/sh\nexit 0\n' >"$box/bin/cmake"
chmod +x "$box/bin/"*

if [ -e "$box/bin/mpiexec" ]; then
  echo "first_run: the sandbox already has an mpiexec" >&2
  exit 1
fi
out="$(env -i HOME="$box" PATH="$box/bin" OMGS_ENABLE_TORCH_EXAMPLE=OFF \
  bash "$box/repo/scripts/run-example.sh" --shared-memory 2>&1)" || {
  printf '%s\n' "$out"
  echo "first_run: FAILED: run-example.sh failed on a machine without MPI" >&2
  exit 1
}
printf '%s\n' "$out"
if ! grep -q "^launched: mpiexec -n 4 --oversubscribe --allow-run-as-root $box/repo/build/examples/omgs-train-synthetic --model resnet50\$" <<<"$out"; then
  echo "first_run: FAILED: the job was not launched with the Open MPI that was installed" >&2
  exit 1
fi
echo "first_run: PASSED (packages installed first, then Open MPI detected)"
