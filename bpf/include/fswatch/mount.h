/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which mount an entry was reached through (a hook sees only the inode),
 * the file behind an fd, and the mount a syscall's path started from.
 */
#ifndef HARRIER_FSWATCH_MOUNT_H
#define HARRIER_FSWATCH_MOUNT_H

/*
 * The mount an entry's dentry was reached through. The kernel's lookup
 * struct path is gone by the time a hook sees the inode, so: the mounts of
 * the dentry's super block in the task's namespace; one is the answer; with
 * several (bind mounts), the one the syscall started from (dirfd, cwd or
 * root) if it is among them, else the whole-fs one, flagged as a guess.
 */
struct fw_mount_pick {
	struct mount *mnt;
	__u32 flags;
};

/*
 * The scan's answer when it found exactly one mount, per CPU, direct-mapped
 * by super block: (super block, mount namespace, its id) → the mount, valid
 * while the namespace's `event` is what it was before the scan. The kernel
 * sets `event` from one global counter on every mount, umount, move or
 * propagation into that namespace (touch_mnt_namespace), so no other
 * namespace, nor this one after any change to its mounts, has the same
 * value: an entry that matches names the same single mount. Saves the scan
 * (a bpf_loop and a helper read per field) for every event named by path.
 */
#define FW_MPICKS 64

struct fw_mpick {
	__u64 sb;
	__u64 ns;
	__u64 ns_id;
	__u64 event;
	__u64 mnt;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FW_MPICKS);
	__type(key, __u32);
	__type(value, struct fw_mpick);
} mpicks SEC(".maps");

/* A namespace's never-reused id (ns_common.ns_id, 6.18; before, its seq:
 * cache.h); 0 where it has none. */
static __always_inline __u64 fw_ns_id(struct mnt_namespace *ns)
{
	struct mnt_namespace___seq *old = (void *)ns;

	if (bpf_core_field_exists(struct ns_common, ns_id))
		return BPF_CORE_READ(ns, ns.ns_id);
	if (bpf_core_field_exists(old->seq))
		return BPF_CORE_READ(old, seq);
	return 0;
}

/* 6.1 and 6.12 list a super block's mounts in a list_head of
 * mount.mnt_instance (6.18: s_mounts a struct mount *, chained by
 * mnt_next_for_sb). */
struct super_block___list {
	struct list_head s_mounts;
} __attribute__((preserve_access_index));

struct mount___list {
	struct list_head mnt_instance;
} __attribute__((preserve_access_index));

/* Whether this kernel's super blocks list their mounts in a way fw_mscan_step follows. */
#define FW_MOUNT_LIST_NEW bpf_core_field_exists(struct mount, mnt_next_for_sb)
#define FW_MOUNT_LIST_OLD bpf_core_field_exists(((struct mount___list *)0)->mnt_instance)

/* One mount of the super block's list: ms->m is the mount (new lists) or
 * its list node (old ones, ms->head the list's head). */
static long fw_mscan_step(__u32 i, void *ctx)
{
	struct fw_cpu *c = fw_cpu_get();
	struct fw_mscan *ms;
	struct mount *m;

	if (!c)
		return 1;
	ms = &c->mscan;
	/* Branches on the kernel's layout (constants): the other's field
	 * relocations fail on this kernel and must not be reached. */
	if (!ms->m || (!FW_MOUNT_LIST_NEW && ms->m == ms->head))
		return 1;
	m = (struct mount *)ms->m;
	if (!FW_MOUNT_LIST_NEW)
		m = (void *)m - bpf_core_field_offset(struct mount___list, mnt_instance);
	if ((__u64)BPF_CORE_READ(m, mnt_ns) == ms->ns) {
		if (ms->count < FW_CANDS) {
			ms->mnts[ms->count & (FW_CANDS - 1)] = (__u64)m;
			ms->roots[ms->count & (FW_CANDS - 1)] = (__u64)BPF_CORE_READ(m, mnt.mnt_root);
		}
		ms->count++;
		if (!ms->first)
			ms->first = (__u64)m;
		if (!ms->whole && (__u64)BPF_CORE_READ(m, mnt.mnt_root) == ms->sroot)
			ms->whole = (__u64)m;
	}
	if (FW_MOUNT_LIST_NEW)
		ms->m = (__u64)BPF_CORE_READ(m, mnt_next_for_sb);
	else
		ms->m = (__u64)BPF_CORE_READ((struct mount___list *)m, mnt_instance.next);
	return 0;
}

/* One step of the climb from the dentry: which candidate roots lie above it. */
static long fw_mclimb_step(__u32 i, void *ctx)
{
	struct fw_cpu *c = fw_cpu_get();
	struct fw_mscan *ms;
	struct dentry *d, *parent;

	if (!c)
		return 1;
	ms = &c->mscan;
	d = (struct dentry *)ms->d;
	if (!d)
		return 1;
	for (int k = 0; k < FW_CANDS; k++)
		if (k < ms->count && ms->roots[k] == (__u64)d && ms->deepest < 0)
			ms->deepest = k;
	if ((__u64)d == ms->hint_root)
		ms->hint_seen = 1;
	parent = BPF_CORE_READ(d, d_parent);
	if (parent == d)
		return 1;
	ms->d = (__u64)parent;
	return 0;
}

/* The file behind descriptor fd of task t, or NULL. */
static __always_inline struct file *fw_fd_file(struct task_struct *t, __s64 fd)
{
	/* Plain loads but for the slot (a variable index): see walk.h. */
	struct fdtable *fdt = t->files->fdt;
	struct file **fds = fdt->fd;
	struct file *f = 0;

	if (fd >= 0 && fd < fdt->max_fds)
		bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

/* The mount the syscall's path started from: root, cwd or dirfd's. Read at
 * exit (there is no entry hook): it only breaks a tie between mounts, and
 * the pick is flagged mount_guess whatever it is. */
static __always_inline struct mount *fw_hint(struct task_struct *t, struct pt_regs *regs, struct fw_sys s)
{
	__s64 dirfd = AT_FDCWD_;
	struct file *f;
	char first = 0;

	if (s.path >= 0)
		bpf_probe_read_user(&first, 1, (void *)hr_reg_arg(regs, s.path));
	if (first == '/')
		return hr_real_mount(BPF_CORE_READ(t, fs, root.mnt));
	if (s.dirfd >= 0)
		dirfd = (int)hr_reg_arg(regs, s.dirfd);
	if (dirfd == AT_FDCWD_)
		return hr_real_mount(BPF_CORE_READ(t, fs, pwd.mnt));
	f = fw_fd_file(t, dirfd);
	return f ? hr_real_mount(BPF_CORE_READ(f, f_path.mnt)) : 0;
}

/* The plan's hint, worked out once, when a pick needs it. */
static __always_inline struct mount *fw_plan_hint(struct task_struct *t, struct fw_plan *pl)
{
	struct fw_sys s = { 0, 0, pl->hint_path, pl->hint_dirfd };
	struct pt_regs *regs;

	if (!pl->hint_want || pl->hint)
		return (struct mount *)pl->hint;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (regs)
		pl->hint = (__u64)fw_hint(t, regs, s);
	return (struct mount *)pl->hint;
}

static __always_inline struct fw_mount_pick fw_mount_for(struct fw_cpu *c, struct task_struct *t,
							 struct dentry *d, struct fw_plan *pl)
{
	struct fw_mount_pick r = { 0, 0 };
	struct super_block *sb = BPF_CORE_READ(d, d_sb);
	struct mnt_namespace *ns = BPF_CORE_READ(t, nsproxy, mnt_ns);
	struct fw_mscan *ms = &c->mscan;
	struct fw_mpick *pk = 0;
	__u64 ns_id = 0, event = 0;
	struct mount *hint;
	__u32 slot;
	bool hint_ok;

	if ((FW_MOUNT_LIST_NEW || FW_MOUNT_LIST_OLD) && ns) {
		/* The event before the scan: a change during it makes the entry stale. */
		event = BPF_CORE_READ(ns, event);
		ns_id = fw_ns_id(ns);
		slot = ((__u64)sb >> 10) & (FW_MPICKS - 1);
		pk = bpf_map_lookup_elem(&mpicks, &slot);
		if (pk && event && pk->sb == (__u64)sb && pk->ns == (__u64)ns && pk->ns_id == ns_id &&
		    pk->event == event && pk->mnt) {
			r.mnt = (struct mount *)pk->mnt;
			return r;
		}
	}
	ms->ns = (__u64)ns;
	ms->sroot = (__u64)BPF_CORE_READ(sb, s_root);
	ms->first = 0;
	ms->whole = 0;
	ms->count = 0;
	ms->head = 0;
	if (FW_MOUNT_LIST_NEW) {
		ms->m = (__u64)BPF_CORE_READ(sb, s_mounts);
		bpf_loop(FW_MOUNTS_MAX, fw_mscan_step, 0, 0);
	} else if (FW_MOUNT_LIST_OLD) {
		struct super_block___list *sbl = (void *)sb;

		ms->head = (__u64)&sbl->s_mounts;
		ms->m = (__u64)BPF_CORE_READ(sbl, s_mounts.next);
		bpf_loop(FW_MOUNTS_MAX, fw_mscan_step, 0, 0);
	} else {
		/* No list this code knows: only the hint is used. */
		ms->count = 2;
	}
	if (ms->count == 1) {
		r.mnt = (struct mount *)ms->first;
		if (pk && event) {
			pk->sb = (__u64)sb;
			pk->ns = (__u64)ns;
			pk->ns_id = ns_id;
			pk->event = event;
			pk->mnt = ms->first;
		}
	} else {
		/* Several: those whose root is an ancestor of d can show it. The
		 * starting mount if it is one of them, else the deepest (a bind
		 * mount of a subtree is the more specific view). */
		hint = fw_plan_hint(t, pl);
		hint_ok = hint && BPF_CORE_READ(hint, mnt.mnt_sb) == sb;
		ms->d = (__u64)d;
		ms->deepest = -1;
		ms->hint_seen = 0;
		ms->hint_root = hint_ok ? (__u64)BPF_CORE_READ(hint, mnt.mnt_root) : 0;
		bpf_loop(FW_DEPTH_MAX, fw_mclimb_step, 0, 0);
		if (hint_ok && ms->hint_seen)
			r.mnt = hint;
		else if (ms->deepest >= 0)
			r.mnt = (struct mount *)ms->mnts[ms->deepest & (FW_CANDS - 1)];
		else if (ms->whole)
			r.mnt = (struct mount *)ms->whole;
		else
			r.mnt = (struct mount *)ms->first;
		r.flags |= FW_F_MOUNT_GUESS;
	}
	if (!r.mnt)
		r.flags |= FW_F_UNRESOLVED;
	return r;
}

#endif
