#!/usr/bin/env bash
# A real function_graph kernel for `utrace record -k` (kernel.md §4): boots Debian's stock
# kernel (function_graph built in) under QEMU with a small initramfs holding busybox, utrace,
# libmcount and testprogs/ksys built with -pg; inside, records `utrace record -k -K 3 ksys`,
# prints the replay, and passes only if the kernel's own functions (vfs_write) appear under
# the program's write_sync() and the tracefs settings are back as they were.
#
# I/O requests in graph mode: the VM also gets a virtio disk holding an ext4 file system (the
# kernel package's virtio_blk and ext4 modules, with their dependencies, are loaded by /init);
# testprogs/aio_read records there with `record -k`, and `report --io` must show its two
# 512-byte O_DIRECT reads, each submitted by io_submit under submit_reads, issued to and
# completed by the device, and reaped by io_getevents under reap_reads; testprogs/uring_read's
# two reads each through its SQE and CQE, reaped by an io_uring_enter (or task work); and
# testprogs/sync_write's O_SYNC writes waited for in pwrite64. Skipped (said in the log) only
# with KTEST_VMLINUZ, whose kernel's modules are not at hand.
#
# Usage: tests/vm/run-kernel-test.sh   (root; installs qemu-system-x86 and busybox-static and
# downloads the kernel package when missing). Environment: KTEST_WORK (work directory, kept),
# KTEST_VMLINUZ (a kernel image to use instead), KTEST_TIMEOUT (seconds, default 600).
set -euo pipefail
shopt -s inherit_errexit

cd "$(dirname "$0")/../.."
repo=$PWD
work=${KTEST_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/utrace-vm.XXXXXX")}
mkdir -p "$work"
log() { echo "vm-test: $*" >&2; }

export DEBIAN_FRONTEND=noninteractive
sudo=()
((EUID == 0)) || sudo=(sudo)
if ! command -v qemu-system-x86_64 >/dev/null || ! [[ -x /bin/busybox ]] ||
	ldd /bin/busybox >/dev/null 2>&1; then
	log "installing qemu-system-x86 and busybox-static"
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends qemu-system-x86 busybox-static \
		</dev/null >/dev/null
fi

vmlinuz=${KTEST_VMLINUZ:-}
if [[ -z $vmlinuz ]]; then
	pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	if [[ -z $pkg ]]; then
		"${sudo[@]}" apt-get update -qq
		pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	fi
	vmlinuz=$(ls "$work"/kernel/root/boot/vmlinuz-* 2>/dev/null | head -n 1 || true)
	if [[ -z $vmlinuz ]]; then
		log "downloading $pkg"
		mkdir -p "$work/kernel"
		chmod 777 "$work/kernel"
		(cd "$work/kernel" && apt-get download -qq "$pkg" && dpkg -x ./*.deb root)
		vmlinuz=$(ls "$work"/kernel/root/boot/vmlinuz-* | head -n 1)
	fi
fi

[[ -x target/release/utrace && -f target/release/libmcount.so ]] || cargo build --release
gcc -pg -O0 -o "$work/ksys" testprogs/ksys.c
gcc -pg -O0 -o "$work/aio_read" testprogs/aio_read.c -laio
gcc -pg -O0 -o "$work/uring_read" testprogs/uring_read.c -luring
gcc -pg -O0 -o "$work/sync_write" testprogs/sync_write.c

# The disk for the I/O test: an ext4 file system in a raw image, and the modules that give
# the VM its driver and file system (each after the modules it depends on, read from the
# `depends=` of its .modinfo: the package has no modules.dep).
mods=$(ls -d "$work"/kernel/root/lib/modules/*/ 2>/dev/null | head -n 1 || true)
rm -rf "$work/modules"
if [[ -z ${KTEST_VMLINUZ:-} && -n $mods ]]; then
	rm -f "$work/disk.img"
	truncate -s 64M "$work/disk.img"
	PATH=$PATH:/sbin:/usr/sbin mkfs.ext4 -q -F "$work/disk.img"
	order=()
	want() { # MODULE: its dependencies first, then itself
		local name=${1//-/_} path dep
		[[ " ${order[*]} " == *" $name "* ]] && return
		path=$(grep -E "/${name//_/[-_]}\.ko(\.[a-z]+)?\$" "$mods/modules.order" | head -n 1 || true)
		[[ -n $path ]] || return 0 # built in
		for dep in $(tr '\0' '\n' <"$mods/$path" | sed -n 's/^depends=//p' | tr ',' ' '); do
			want "$dep"
		done
		order+=("$name")
		mkdir -p "$work/modules"
		cp "$mods/$path" "$work/modules/$name.ko"
	}
	# crc32c_generic: ext4's checksums ask the crypto API for crc32c when mounting.
	for m in virtio_pci virtio_blk crc32c_generic ext4; do want "$m"; done
	echo "${order[*]}" >"$work/modules/order"
	log "disk: ext4 image; modules: ${order[*]}"
fi

# The in-VM test: /test.sh under busybox sh.
cat >"$work/test.sh" <<'EOF'
set -e
state() { for f in tracing_on current_tracer trace_clock set_ftrace_pid max_graph_depth options/function-fork; do echo "$f: $(cat /sys/kernel/tracing/$f)"; done; }
state > /tmp/before
cd /tmp
utrace record -k -K 3 /vm/ksys /tmp/scratch
utrace replay --no-pager > /tmp/out.txt
cat /tmp/out.txt
state > /tmp/after
cmp /tmp/before /tmp/after || { echo "tracefs not restored"; diff /tmp/before /tmp/after; exit 1; }
# vfs_write under write(), under write_sync().
awk '/write_sync\(\) \{/ { w = 1 } w && /vfs_write/ { found = 1 } /\} \/\* write_sync \*\// { w = 0 } END { exit !found }' /tmp/out.txt
grep -q '__x64_sys_write' /tmp/out.txt
if ! [ -e /vm/modules/order ]; then echo "VM-IO skipped: no disk (KTEST_VMLINUZ)"; exit 0; fi
# I/O requests in graph mode: aio_read's two O_DIRECT reads on the virtio disk.
grep -q ' /mnt ' /proc/mounts || { echo "VM-IO: /dev/vda not mounted"; exit 1; }
utrace record -k -d /tmp/io.data /vm/aio_read /mnt/aio_read.dat
utrace report --io --no-pager -d /tmp/io.data > /tmp/io.txt
cat /tmp/io.txt
state > /tmp/after
cmp /tmp/before /tmp/after || { echo "tracefs not restored after the I/O recording"; exit 1; }
[ -z "$(ls /sys/kernel/tracing/instances)" ] || { echo "block instance left"; exit 1; }
# Each read of the worst list: its line (512 bytes), then `submitted:` by io_submit under
# submit_reads with its iocb (libmcount's markers, in the function_graph buffer too), `path:`
# through the device, `reaped by io_getevents in ... reap_reads`.
awk '
/^ *[0-9]+\. .* read .*\(512 bytes/ { r = 1; head = $0; next }
/^ *[0-9]+\. / { r = s = p = 0; next }
r && /submitted: .*submit_reads.*\[io_submit\] aio ctx .* iocb 0x[0-9a-f]+ pread fd [0-9]+ offset (0|4096) length 512 / { s = 1; next }
r && s && /path: syscall .*issue .*complete .*reap/ { p = 1; next }
r && s && p && /reaped by io_getevents in .*reap_reads/ { n++; print "VM-IO linked read " n ":" head }
END { exit n != 2 }' /tmp/io.txt
echo "VM-IO ok: 2 reads linked io_submit -> device -> io_getevents"
# io_uring: each read's SQE and CQE, reaped by an io_uring_enter (or by task work on the way
# back to user space, when the submitting call was kept off the CPU past the completion).
echo "VM-IO io_uring events: $(ls /sys/kernel/tracing/events/io_uring | tr '\n' ' ')"
utrace record -k -d /tmp/uring.data /vm/uring_read /mnt/uring_read.dat
utrace report --io --no-pager -d /tmp/uring.data > /tmp/uring.txt
cat /tmp/uring.txt
awk '
/^ *[0-9]+\. .* read .*\(512 bytes/ { r = 1; head = $0; next }
/^ *[0-9]+\. / { r = s = p = 0; next }
r && /submitted: .*submit_reads.*\[io_uring_enter\] user_data 0x[12] res 512/ { s = 1; next }
r && s && /path: syscall .*sqe .*issue .*complete .*cqe .*reap/ { p = 1; next }
r && s && p && /reaped by (io_uring_enter|task_work) in / { n++; print "VM-IO linked uring read " n ":" head }
END { exit n != 2 }' /tmp/uring.txt
echo "VM-IO ok: 2 uring reads linked SQE -> device -> CQE"
# O_SYNC: the data blocks written out inside pwrite64 (ext4's fsync), which waited for them.
utrace record -k -d /tmp/sync.data /vm/sync_write /mnt/sync_write.dat
utrace report --io --no-pager -d /tmp/sync.data > /tmp/sync.txt
cat /tmp/sync.txt
awk '
/^ *[0-9]+\. .* write .*\((4096|8192) bytes/ { w = 1; next }
/^ *[0-9]+\. / { w = s = 0; next }
w && /submitted: .*write_block.*\[pwrite64\]/ { s = 1; next }
w && s && /reaped by pwrite64 in .*write_block/ { n++ }
END { print "VM-IO O_SYNC data writes waited for in pwrite64: " n; exit n < 2 }' /tmp/sync.txt
echo "VM-IO ok: O_SYNC writes waited for in pwrite64"
EOF

# The initramfs: busybox, the files and the shared libraries they need.
root=$work/root
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,tmp,usr/bin,vm}
cp /bin/busybox "$root/bin/busybox"
add() { # FILE DEST: the file and its libraries
	mkdir -p "$root$(dirname "$2")"
	cp -L "$1" "$root$2"
	local lib
	for lib in $(ldd "$1" 2>/dev/null | grep -oE '/[^ ]+'); do
		[[ -e $root$lib ]] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}
add "$repo/target/release/utrace" /usr/bin/utrace
add "$repo/target/release/libmcount.so" /usr/bin/libmcount.so
add "$work/ksys" /vm/ksys
add "$work/aio_read" /vm/aio_read
add "$work/uring_read" /vm/uring_read
add "$work/sync_write" /vm/sync_write
if [[ -d $work/modules ]]; then cp -r "$work/modules" "$root/vm/modules"; fi
cp "$work/test.sh" "$root/test.sh"
cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/usr/bin
mount -t proc proc /proc
mount --make-rshared / 2>/dev/null
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tracefs nodev /sys/kernel/tracing
mount -t tmpfs tmp /tmp
mkdir -p /dev/shm && mount -t tmpfs shm /dev/shm
if [ -e /vm/modules/order ]; then
	for m in $(cat /vm/modules/order); do insmod /vm/modules/$m.ko || echo "insmod $m failed"; done
	for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.5; done
	mkdir -p /mnt && mount -t ext4 /dev/vda /mnt || echo "cannot mount /dev/vda"
fi
echo "VM-BOOTED kernel=$(uname -r) tracers=$(cat /sys/kernel/tracing/available_tracers)"
sh /test.sh; rc=$?
echo "VM-TEST-DONE rc=$rc"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$work/initramfs.gz")

# KVM only with VMX/SVM (a paravirtual /dev/kvm cannot run a stock kernel), else TCG. One
# vCPU: with two, a loaded host (the test suite running beside it) starved one of them while
# the other waited for it to patch the kernel's functions (soft lockups for minutes).
if [[ -w /dev/kvm ]] && grep -qwE 'vmx|svm' /proc/cpuinfo; then
	accel=(-machine q35,accel=kvm -cpu host)
else
	accel=(-machine q35,accel=tcg -cpu max)
fi
disk=()
[[ -d $work/modules ]] && disk=(-drive "file=$work/disk.img,if=virtio,format=raw")
log "booting $vmlinuz (${accel[1]})"
start=$(date +%s)
timeout "${KTEST_TIMEOUT:-600}" qemu-system-x86_64 "${accel[@]}" -smp 1 -m 1024 \
	-kernel "$vmlinuz" -initrd "$work/initramfs.gz" "${disk[@]}" \
	-append "console=ttyS0 panic=-1 loglevel=3 clocksource=tsc tsc=reliable" \
	-nographic -no-reboot -nodefaults -serial stdio -display none </dev/null |
	tr -d '\r' | tee "$work/serial.log" || true
log "VM run took $(($(date +%s) - start)) s; serial log in $work/serial.log"
grep -q '^VM-TEST-DONE rc=0$' "$work/serial.log"
