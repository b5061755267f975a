/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * harrier fswatch's wire format, as seen from BPF.
 * Mirrored by crates/harrier-fswatch/src/wire.rs.
 *
 * A record: struct hr_hdr (type = FW_EV_*), then struct fw_fixed, then one or
 * two paths as u16 length + bytes: the path, and for rename and link the
 * source (where the entry was, or the other name of the linked inode).
 */
#ifndef HARRIER_FSWATCH_H
#define HARRIER_FSWATCH_H

enum fw_event {
	FW_EV_OPEN = 1,
	FW_EV_MKDIR = 2,
	FW_EV_LINK = 3,
	FW_EV_RENAME = 4,
	FW_EV_SETATTR = 5,
	FW_EV_UNLINK = 6,
	FW_EV_RMDIR = 7,
	FW_EV_MODIFY = 8,
	FW_EV_MAX = 9,
};

/* Per path: what could not be taken from kernel objects, or what is odd. */
enum fw_flag {
	FW_F_TRUNCATED = 1 << 0,	/* longer than FW_PATH_MAX bytes or FW_DEPTH_MAX steps: the front is cut */
	FW_F_DELETED = 1 << 1,		/* the dentry is unhashed (unlinked) */
	FW_F_DETACHED = 1 << 2,		/* the walk ended at a mount that is not the task's root */
	FW_F_MEMFD = 1 << 3,		/* a disconnected dentry named memfd:... */
	FW_F_UNRESOLVED = 1 << 4,	/* no kernel object found: the path is empty or partial */
	FW_F_NAME_FROM_ARG = 1 << 5,	/* the last component comes from the syscall argument */
	FW_F_MOUNT_GUESS = 1 << 6,	/* several mounts show this file system: one was picked */
	FW_F_ALIAS_GUESS = 1 << 7,	/* the inode has several names (hard links): one was picked */
	FW_F_DISCONNECTED = 1 << 8,	/* the walk reached the file system's root, not the mount's */
	FW_F_CREATED = 1 << 9,		/* open: the entry was created (its directory changed) */
	FW_F_SYMLINK = 1 << 10,		/* link: a symbolic link (no source path) */
	FW_F_SOURCE_SHIFT = 16,		/* the source path's flags, shifted */
};

struct fw_fixed {
	__s64 ret;
	__u32 pid;	/* tgid */
	__u32 uid;
	__u32 gid;
	__u32 flags;	/* fw_flag: path's low 16 bits, source's high 16 */
	__u32 dev;	/* kernel dev_t (major << 20 | minor) of the path's inode */
	__u32 mnt_id;
	__u64 ino;
	char comm[16];
	__u32 nr;	/* the syscall */
	__u32 pad;
};

enum fw_drop_reason {
	FW_DROP_RING_FULL = 0,
	FW_DROP_NO_RING = 1,
	FW_DROP_MAX = 2,
};

/* Per-CPU counters; user space sums them. */
struct fw_stats {
	__u64 events;		/* events produced: delivered or dropped */
	__u64 drops[FW_DROP_MAX];
	__u64 filtered;		/* resolved, outside the watched paths: dropped in the kernel on purpose */
	__u64 failed;		/* the syscall failed: nothing changed, nothing reported */
	__u64 unresolved;	/* events carrying FW_F_UNRESOLVED */
	__u64 no_entry;		/* an exit by path found no inode recorded (in flight at attach): reported unresolved */
	__u64 slots_full;	/* more inodes changed in one syscall than FW_SLOTS */
	__u64 cache_hits;	/* watch checks decided by the verdict cache (fswatch/cache.h) */
	__u64 cache_misses;	/* watch checks that climbed (the verdict then cached if it could be) */
	__u64 path_hits;	/* paths whose directory part came from the path cache */
	__u64 path_misses;	/* paths walked to the root (the directory's then cached if it could be) */
	__u64 dir_refs;		/* paths sent as a reference to the reader's directory cache (dirrefs.h) */
};

/* How paths reach user space (--resolution). */
enum fw_resolution {
	FW_RES_RINGBUF = 0,	/* the whole path in the event */
	FW_RES_SINGLE = 1,	/* the whole path in this CPU's path ring; the event names it */
	FW_RES_FRAGS = 2,	/* fragments: the leaf's name and its directory's key; directories in a map */
};

/* Which hooks tell the exits what a syscall changed (`hooks`, set by user
 * space from what the kernel has; crates/harrier-fswatch/src/hooks.rs). */
enum fw_hooks {
	FW_HOOKS_CTIME = 0,	/* fs/inode.c's ctime tracepoints (tp_btf, 6.13+): inodes.h */
	FW_HOOKS_FENTRY = 1,	/* fentry on the vfs_* functions: vfs.h */
	FW_HOOKS_KPROBE = 2,	/* kprobes on the same functions */
};

/*
 * fragments: each directory climbed is an entry of the `fragments` LRU hash,
 * keyed by (dev, mount id, inode) → (parent's key, its name, when that last
 * changed). The event carries in place of a path: u16 length, the key of the
 * leaf's directory (struct fw_fkey), then "/" + the leaf's name. User space
 * joins the chain; a fragment changed after the event (a rename since) or
 * gone (evicted) flags the path unresolved instead of reporting a wrong one.
 * A mount's root is a fragment with an empty name whose parent is its
 * mountpoint; the walk's top (the task's root) has parent key 0.
 */
struct fw_fkey {
	__u32 dev;
	__u32 mnt_id;
	__u64 ino;
};

struct fw_frag {
	struct fw_fkey parent;
	__u64 changed;	/* bpf_ktime_get_ns() when (parent, name) last changed */
	__u32 len;
	__u32 pad;
	char name[256];
};

#define FW_FKEY	16
#define FW_FRAGS_MAX 65536	/* directories remembered (LRU) */

/* single-fragment: each path is a record in this CPU's path ring (the frags
 * map, laid out as struct hr_aring, as large as the event ring): u64 seq,
 * u32 len, u32 pad, the bytes. The event carries (u32 offset, u64 seq) in
 * place of the path. The path ring is overwritten in turn, never waits for
 * the reader: seq is 0 while a record is written, so a reader that sees the
 * event's seq before and after copying has the path it was sent. */
#define FW_FRAG_HDR	16

#define FW_FRAG_REF	12	/* bytes of a path by reference: u32 offset, u64 seq */

/*
 * ringbuf and single-fragment modes: the reader's directory cache
 * (fswatch/dirrefs.h). A path's u16 length word may carry one of two marks:
 * - FW_PATH_TEACH: struct fw_teach, then the whole path inline; its first
 *   dir_len bytes are the directory's path, which the reader may keep and
 *   announce in the `rdirs` map as (slot, ver);
 * - FW_PATH_DREF: u32 slot, u32 ver, then the leaf ("/" + name): the path is
 *   the directory's path in the reader's slot, if the slot still holds
 *   version ver, then the leaf.
 * A plain length (neither mark) is the mode's own form.
 */
#define FW_PATH_TEACH	0x4000
#define FW_PATH_DREF	0x8000
#define FW_PATH_LEN	0x3fff

/* A directory as the reader's cache knows it: the path cache's key and the
 * task's root (the same directory has another path in a chroot). */
struct fw_rkey {
	__u64 mnt_uid;
	__u64 ino;
	__u32 dev;
	__u32 pad;
	__u64 root_uid;
	__u64 root_ino;
};

/* rdirs' value, written by the reader only: the state the path was valid in
 * (the path cache's generation and mount namespace event counter) and where
 * the reader keeps it. */
struct fw_rval {
	__u64 gen;
	__u64 ns_event;
	__u32 slot;
	__u32 ver;
	__u32 watched;	/* the directory's verdict: it or an ancestor is watched */
	__u32 pad;
};

struct fw_teach {
	struct fw_rkey key;
	__u64 gen;
	__u64 ns_event;
	__u32 dir_len;
	__u32 watched;
};

#define FW_TEACH	64	/* sizeof(struct fw_teach) */
#define FW_DREF		8	/* u32 slot, u32 ver */

#define FW_PATH_MAX	4096
#define FW_DEPTH_MAX	2048	/* bpf_loop steps per walk: names and mount hops */
#define FW_NAME_MAX	256
#define FW_SLOTS	4	/* inodes whose ctime changed during one syscall */
#define FW_MOUNTS_MAX	64	/* mounts of one super block looked at */
#define FW_FIXED_END	(16 + 64)	/* header + struct fw_fixed */
#define FW_EVENT_MAX	(FW_FIXED_END + 2 * (2 + FW_PATH_MAX))

#endif
