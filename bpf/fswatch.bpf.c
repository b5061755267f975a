// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * harrier fswatch: file-system events whose paths come from the kernel's own
 * objects (dentries and mounts), never from the syscall's path string.
 *
 * Hooks (docs/fswatch.md, "Hooks per kernel"; user space picks one set):
 * - tp_btf inode_set_ctime_to_ts, ctime_ns_xchg, ctime_xchg_skip (fs/inode.c,
 *   6.13+): every inode whose ctime a selected syscall changes is added to a
 *   per-task record, with the name and parent its first dentry has at that
 *   moment (before a rename moves it or an unlink drops it);
 * - before 6.13, fentry (or kprobes) on the vfs_* functions that make those
 *   changes fill the same record (vfs.h);
 * - the syscalls:sys_exit_<name> tracepoint of each selected syscall (one
 *   program attached to each): the record is turned into an event. Files from fds
 *   (open's result, write's and fchmod's argument) walk their struct path;
 *   entries walk the dentry of the inode the kernel changed, crossing mounts.
 *   A first walk reads no names and checks the ancestors against the
 *   watched (dev, inode) set: events outside it are counted and dropped
 *   before any path is built.
 *
 * One object (libbpf-cargo builds one per .bpf.c), in parts under
 * include/fswatch/: state.h (maps), syscalls.h (what is reported),
 * inodes.h (the record and the ctime hooks), vfs.h (the vfs_* hooks), walk.h (dentry walk and watch
 * check), cache.h, dirrefs.h and chain.h (what spares the climbs), mount.h (which
 * mount), event.h (paths and the record), plan.h (which inode is which);
 * the exit hook, which ties them, is here.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "harrier.h"
#include "percpu.h"
#include "fswatch.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space before load; constant for the verifier. */
const volatile __u32 filter_tgid = 0;	/* 0: every process */
const volatile __u32 event_mask = 0;	/* 1 << FW_EV_* */
const volatile bool watch_all = 0;	/* no PATH: everything is watched */
const volatile bool recursive = 1;	/* else only a watched inode and its directory's entries */
const volatile bool follow = 1;	/* an entry renamed out of the watched tree stays watched */
const volatile bool prefilter = 1;	/* the watch check before the path walk (off: to measure it) */
const volatile bool vcache = 0;	/* the verdict cache (cache.h): recursive, prefilter, some PATH */
const volatile bool rcache = 0;	/* the reader's directory cache (dirrefs.h): vcache, not fragments */
const volatile __u32 resolution = FW_RES_RINGBUF;
const volatile __u64 aring_mask = 0;	/* per-CPU ring size - 1 */
const volatile __u64 aring_last = 0;	/* last offset a record may start at */
const volatile __u32 hooks = FW_HOOKS_CTIME;	/* enum fw_hooks (state.h) */

#include "tree/walk.h"
#include "tree/inval.h"
#include "tree/dircache.h"
#include "fswatch/state.h"
#include "fswatch/syscalls.h"
#include "fswatch/inodes.h"
#include "fswatch/vfs.h"
#include "fswatch/walk.h"
#include "fswatch/dirrefs.h"
#include "fswatch/cache.h"
#include "fswatch/chain.h"
#include "fswatch/mount.h"
#include "fswatch/event.h"
#include "fswatch/plan.h"

/* A syscalls:sys_exit_* tracepoint's record (same layout for every syscall). */
struct fw_exit_ctx {
	__u64 common;
	int nr;
	int pad;
	long ret;
};

/*
 * One program, attached by user space to the sys_exit_<name> tracepoint of
 * each selected syscall only (not to raw sys_exit): every other syscall of
 * the machine never runs it. The section names one of them for libbpf.
 */
SEC("tracepoint/syscalls/sys_exit_openat")
int fw_sys_exit(struct fw_exit_ctx *ctx)
{
	long nr = ctx->nr, ret = ctx->ret;
	struct fw_sys s = fw_sys_of(nr);
	struct fw_pending *p = 0;
	struct task_struct *t;
	struct pt_regs *regs;
	struct dentry *a;
	struct fw_plan *pl;
	struct fw_cpu *c;
	struct file *f;
	int i, dir = 0;
	__u32 npaths = 1;

	t = bpf_get_current_task_btf();
	/* Before any filter: every process's renames and rmdirs count. */
	if (vcache)
		hr_tree_exit(t, nr);
	if (!s.kind)
		return 0;
	if (!fw_tgid_ok(t) || !(c = fw_cpu_get()))
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (!regs)
		return 0;
	if (s.cls != FW_C_FD_ARG) {
		/* What the ctime hooks recorded for this syscall, if anything
		 * changed (an open that creates nothing has no record). */
		p = bpf_task_storage_get(&pending, t, 0, 0);
		if (p && p->nr != nr)
			p = 0;
		if (p)
			p->nr = 0;	/* closed: the next syscall starts afresh */
	}
	if (ret < 0) {
		c->stats.failed++;
		return 0;
	}
	if (nr == 263 && (hr_reg_arg(regs, 2) & HR_AT_REMOVEDIR))
		s.kind = FW_EV_RMDIR;
	if (!(event_mask & (1u << s.kind)))
		return 0;	/* unlinkat: the other one of unlink and rmdir */
	if (nr == 280 && !hr_reg_arg(regs, 1)) /* utimensat(fd, NULL, ...) */
		s.cls = FW_C_FD_ARG;
	if (!p && s.cls != FW_C_FD_RET && s.cls != FW_C_FD_ARG) {
		/* No inode changed that a hook saw: in flight when the hooks
		 * attached, or a kernel without them. Reported, flagged. */
		c->stats.no_entry++;
		pl = &c->plan;
		__builtin_memset(pl, 0, sizeof(*pl));
		pl->pos[0] = -1;
		pl->pos[1] = -1;
		goto unresolved;
	}
	pl = &c->plan;
	__builtin_memset(pl, 0, sizeof(*pl));
	pl->name_slot[0] = -1;
	pl->name_slot[1] = -1;
	pl->pos[0] = -1;
	pl->pos[1] = -1;
	if (p && s.cls != FW_C_FD_RET && s.cls != FW_C_FD_ARG) {
		/* Worked out only if several mounts show the entry (mount.h). */
		pl->hint_want = 1;
		pl->hint_path = s.path;
		pl->hint_dirfd = s.dirfd;
	}

	switch (s.cls) {
	case FW_C_FD_RET:
	case FW_C_FD_ARG:
		f = fw_fd_file(t, s.cls == FW_C_FD_RET ? ret : (int)hr_reg_arg(regs, 0));
		if (!f)
			goto unresolved;
		f = HR_CAST(f, struct file);
		a = HR_RD(f, f_path.dentry);
		pl->dentry[0] = (__u64)a;
		pl->mnt[0] = (__u64)hr_real_mount(HR_RD(f, f_path.mnt));
		/* open: created if its directory's ctime changed; the vfs_*
		 * hooks see no create by open (vfs.h): the kernel's own mark. */
		if (hooks != FW_HOOKS_CTIME && s.cls == FW_C_FD_RET) {
			if (HR_RD(f, f_mode) & FMODE_CREATED_)
				pl->extra[0] = FW_F_CREATED;
		} else if (p && s.cls == FW_C_FD_RET) {
			__u64 pi = (__u64)BPF_CORE_READ(a, d_parent, d_inode);

			for (int j = 0; j < FW_SLOTS; j++)
				if (j < p->nslots && p->slots[j].inode == pi)
					pl->extra[0] = FW_F_CREATED;
		}
		break;
	case FW_C_NEW:
		fw_record_new(p);	/* vfs.h: the entry vfs_mkdir or vfs_symlink made */
		a = fw_find_new(p);
		if (!a)
			goto unresolved;
		pl->dentry[0] = (__u64)a;
		if (nr == 88 || nr == 266) {
			pl->extra[0] = FW_F_SYMLINK;
		} else if (s.kind == FW_EV_LINK) {
			/* A hard link: the inode's other name (the next alias). */
			struct dentry *src = fw_alias_next(a);

			npaths = 2;
			pl->dentry[1] = (__u64)src;
			if (src && fw_alias_next(src))
				pl->extra[1] = FW_F_ALIAS_GUESS;
		}
		break;
	case FW_C_GONE:
		i = fw_find_gone(p, false, &dir);
		if (i < 0)
			goto unresolved;
		pl->dentry[0] = (__u64)fw_alias((struct inode *)p->slots[dir & (FW_SLOTS - 1)].inode);
		pl->name_slot[0] = i;
		break;
	case FW_C_MOVE:
		i = fw_find_gone(p, true, &dir);
		if (i < 0)
			goto unresolved;
		npaths = 2;
		pl->dentry[0] = (__u64)fw_alias((struct inode *)p->slots[i & (FW_SLOTS - 1)].inode);
		pl->dentry[1] = (__u64)fw_alias((struct inode *)p->slots[dir & (FW_SLOTS - 1)].inode);
		pl->name_slot[1] = i;
		break;
	case FW_C_ATTR:
		if (!p->nslots)
			goto unresolved;
		a = fw_alias((struct inode *)p->slots[0].inode);
		if (!a)
			goto unresolved;
		pl->dentry[0] = (__u64)a;
		if (fw_alias_next(a))
			pl->extra[0] = FW_F_ALIAS_GUESS;
		break;
	}
	pl->watched = watch_all;
	if (prefilter && !watch_all) {
		/* The watch check first, reading no names: events outside the
		 * watched paths (most, on a busy machine) build no path. */
		fw_path(0, 1);
		if (npaths > 1)
			fw_path(1, 1);
		if (!pl->watched) {
			c->stats.filtered++;
			return 0;
		}
		pl->watched = 0;
	}
	fw_path(0, 0);
	if (npaths > 1)
		fw_path(1, 0);
	if (!pl->watched) {
		c->stats.filtered++;
		return 0;
	}
	/* --follow: moved out of the watched tree, the entry itself is watched
	 * from now on (its descendants too, by the ancestor check). */
	if (follow && s.cls == FW_C_MOVE && pl->watched_b[1] && !pl->watched_b[0]) {
		struct fw_key k = { .dev = pl->dev, .ino = pl->ino };
		__u32 one = 1;

		__u32 b = fw_watch_bit(k.dev, k.ino);

		bpf_map_update_elem(&watched, &k, &one, BPF_ANY);
		__sync_fetch_and_or(&watch_bits[(b >> 6) & (FW_WATCH_BITS / 64 - 1)], 1ULL << (b & 63));
		hr_tree_bump();	/* "unwatched" verdicts below it are wrong now */
	}
	fw_emit(s.kind, nr, ret);
	return 0;
unresolved:
	/* Nothing to place it by: reported (flagged), never dropped. */
	pl->flags = FW_F_UNRESOLVED;
	fw_emit(s.kind, nr, ret);
	return 0;
}
