#!/usr/bin/env bash
# An OpenMPI remote-shell agent that "reaches" every host by staying on this machine, so a
# hostfile of made-up hosts runs a real multi-node job here (tests/cli/two_hosts.sh):
#   mpirun --mca plm_rsh_agent tests/cli/fake_rsh.sh --hostfile H ...   (H: nodeA slots=2 ...)
# mpirun calls it as it would call ssh: `AGENT [ssh options] HOST orted -mca ...`, with the
# command as words for a remote shell to parse, so they are run with `bash -c`, as sshd would.
# Host names need not resolve: only the agent sees them.
#
# Two fake hosts on one machine collide where OpenMPI names things after the real host name:
# the shared-memory (vader) segments, named by host name, job and local rank, so local rank 0
# of nodeA and of nodeB would map the same file and crash in mca_btl_vader_poll_handle_frag;
# and the session folder, which one host's cleanup would remove under the other. Each fake
# host gets its own folder for both under $FAKE_RSH_DIR; mpirun hands the orted's environment
# to its ranks, which also see GRAPHTUNE_FAKE_HOST (the host they "run on").
#
# Like ssh, the command starts in a fresh environment, not mpirun's: a variable reaches the
# ranks only if mpirun forwards it (`-x NAME`), as on a real cluster. Kept: what a login on the
# same machine would have (PATH, HOME, USER, LOGNAME, SHELL, LANG, and LD_LIBRARY_PATH, which
# clusters set in ~/.bashrc where MPI lives outside the system folders).
# Use only made-up hosts in such a hostfile: beside localhost (ranks mpirun starts itself, with
# no agent) OpenMPI 4.1's MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) crashes, every time.
# FAKE_RSH_LOG, when set, gets one line per call: "HOST COMMAND...".
set -eu

# ssh's options that take a value (`-p 22`, `-o Opt=x`); the others are single flags (`-x`).
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "fake_rsh.sh: want HOST COMMAND..., got: $*" >&2
  exit 255  # what ssh returns when it cannot connect
fi
host=$1
shift

root=${FAKE_RSH_DIR:-${TMPDIR:-/tmp}/graphtune-fake-hosts-$(id -u)}
mkdir -p "$root/$host"
if [ -n "${FAKE_RSH_LOG:-}" ]; then echo "$host $*" >>"$FAKE_RSH_LOG"; fi
exec env -i PATH="$PATH" HOME="${HOME:-/}" USER="${USER:-$(id -un)}" LOGNAME="${LOGNAME:-$(id -un)}" \
  SHELL=/bin/bash LANG="${LANG:-C.UTF-8}" ${LD_LIBRARY_PATH:+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} \
  OMPI_MCA_btl_vader_backing_directory="$root/$host" OMPI_MCA_orte_tmpdir_base="$root/$host" \
  GRAPHTUNE_FAKE_HOST="$host" bash -c "$*"
