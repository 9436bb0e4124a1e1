# A real systemd as PID 1 of private namespaces (pid, mount, uts, ipc, net, cgroup), for the
# system tests: sourced by systemd.sh (the installed units) and deb.sh (the Debian package).
# The host is left as it was: private /run, /tmp, /dev, and whatever the caller's inner script
# makes private; read-only /proc/sys and /sys; everything torn down by PID at the end.
#
# A caller: ps_preflight; ps_cgroup NAME; writes its inner script, which sources this file
# and runs ps_enter_private_root before its own mounts and exec of systemd; ps_launch
# SECONDS INNER ARGS…; then runs commands as $NS …, after await booted.

# Exit 77 (the test skips, saying why) where systemd cannot boot in namespaces here.
ps_preflight() {
    [ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 77; }
    [ -x /lib/systemd/systemd ] || { echo "no /lib/systemd/systemd" >&2; exit 77; }
    cgparent=/sys/fs/cgroup/unified
    [ -f $cgparent/cgroup.procs ] || { echo "no cgroup v2 hierarchy at $cgparent" >&2; exit 77; }
    unshare --pid --fork --mount --uts --ipc --net --cgroup --mount-proc true 2>/dev/null \
        || { echo "namespaces are not permitted here" >&2; exit 77; }
}

# The test's own cgroup, where the namespace's processes go: its path in $cg and OUT/cgroup.txt.
# The empty ones of runs that were killed (their pid ends the name) go first.
ps_cgroup() {
    local old
    for old in "$cgparent"/adorch-*-*; do
        [ -d "$old" ] && ! kill -0 "${old##*-}" 2>/dev/null && find "$old" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    cg=$cgparent/$1
    mkdir "$cg" || { echo "cannot make a cgroup under $cgparent" >&2; exit 77; }
    echo "$cg" >"$out/cgroup.txt"
}

# In the inner script (PID 1 of the new pid namespace): private /run, /tmp and /dev (its console
# $scratch/console.log), read-only global knobs, and the namespace's own cgroup2 mount.
ps_enter_private_root() {
    mount --make-rprivate /
    mount -t tmpfs tmpfs /srv
    mkdir /srv/scratch && mount --bind "$scratch" /srv/scratch
    mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp
    mkdir -p "$scratch" && mount --move /srv/scratch "$scratch"
    mount -t tmpfs -o mode=755,nosuid tmpfs /srv
    for d in null zero full random urandom tty; do touch /srv/$d; mount --bind /dev/$d /srv/$d; done
    mkdir /srv/pts /srv/shm
    mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts /srv/pts
    ln -s pts/ptmx /srv/ptmx
    mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /srv/shm
    touch /srv/console; mount --bind "$scratch/console.log" /srv/console
    ln -s /proc/self/fd /srv/fd; ln -s /proc/self/fd/0 /srv/stdin; ln -s /proc/self/fd/1 /srv/stdout; ln -s /proc/self/fd/2 /srv/stderr
    mount --move /srv /dev
    mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
    if [ -e /proc/sysrq-trigger ]; then
        mount --bind /proc/sysrq-trigger /proc/sysrq-trigger && mount -o remount,bind,ro /proc/sysrq-trigger
    fi
    mount -o remount,bind,ro /sys
    mount -t cgroup2 -o rw,nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
}

# Starts INNER ARGS… as PID 1 of the namespaces, in $cg, killed after SECONDS or as soon as
# this script dies (a killed test: each link asks for SIGKILL when its parent goes, and
# unshare --kill-child takes PID 1 and with it the namespace); finds its PID 1
# ($pid1) and sets $NS, the prefix that runs a command inside with a clean environment: PATH is
# $ns_path if the caller set it, else Debian's (no toolchain on it). The teardown (on exit)
# kills it by PID and removes the cgroups.
ps_launch() {
    local seconds=$1; shift
    ( echo $BASHPID >"$cg/cgroup.procs"
      exec setpriv --pdeathsig KILL timeout "$seconds" setpriv --pdeathsig KILL \
          unshare --pid --fork --kill-child --mount --uts --ipc --net --cgroup --mount-proc "$@"
    ) >"$out/launcher.log" 2>&1 &
    launcher=$!
    pid1=
    trap ps_teardown EXIT
    await ps_find_pid1
    ps_find_pid1
    NS="timeout 60 nsenter -t $pid1 -m -p -u -i -n env -i PATH=${ns_path:-/usr/sbin:/usr/bin:/sbin:/bin}"
}

ps_teardown() {
    [ -n "$pid1" ] && kill -KILL "$pid1" 2>/dev/null || true
    kill -KILL $launcher 2>/dev/null || true
    wait $launcher 2>/dev/null || true
    # The namespace's processes die with its PID 1; their cgroups can go once empty.
    for _ in $(seq 200); do
        [ -z "$(cat $(find "$cg" -name cgroup.procs) 2>/dev/null)" ] && break
        sleep 0.05
    done
    find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [ -d "$cg" ] && echo "left behind: $cg" >&2
    cp "$scratch/console.log" "$out/console.log" 2>/dev/null || true
}

# Waits until a command succeeds, for at most 20 s.
await() { for _ in $(seq 400); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "timed out: $*" >&2; return 1; }

# PID 1 of the new pid namespace: the child of unshare, itself the launcher's child.
ps_find_pid1() {
    local u n
    u=$(tr -d ' ' </proc/$launcher/task/$launcher/children 2>/dev/null) || return 1
    [ -n "$u" ] || return 1
    n=$(tr -d ' ' </proc/$u/task/$u/children 2>/dev/null) || return 1
    [ -n "$n" ] && pid1=$n
}

booted() { local st; st=$($NS systemctl is-system-running 2>/dev/null) || true; [ "$st" = running ] || [ "$st" = degraded ]; }
