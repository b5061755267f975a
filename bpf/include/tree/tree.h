/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The dentry tree as every Harrier object reads it (capture, rules and
 * fswatch): how kernel objects are loaded, a mount's never-reused id, which
 * file systems move directories only through this kernel's syscalls, and
 * what keys and validates a per-directory cache entry (dircache.h, and
 * fswatch's verdicts). inval.h says when entries stop being valid.
 */
#ifndef HARRIER_TREE_H
#define HARRIER_TREE_H

/*
 * Kernel objects behind a pointer the verifier does not type (one kept in a
 * map, a tracepoint's scalar): 6.2+ casts it (bpf_core_cast, the
 * bpf_rdonly_cast kfunc) and reads fields with plain loads the verifier
 * makes fault-safe, no helper call (~20 ns each on this kind of host: SRSO
 * "safe RET"); 6.1 has no such cast, so each field there is a
 * bpf_probe_read_kernel. libbpf resolves the weak kfunc or leaves it out at
 * load, and the verifier drops the branch not taken.
 */
#define hr_has_cast() bpf_ksym_exists(bpf_rdonly_cast)
#define HR_CAST(p, T) (hr_has_cast() ? bpf_core_cast((void *)(p), T) : (T *)(void *)(p))
#define HR_RD(p, ...) (hr_has_cast() ? ___arrow(p, __VA_ARGS__) : BPF_CORE_READ(p, __VA_ARGS__))

/* `field` of the `type` object at address p (a pointer or a scalar). */
#define hr_kread(p, type, field)                                                        \
	(hr_has_cast() ? bpf_core_cast((void *)(p), type)->field                         \
		       : BPF_CORE_READ((type *)(void *)(p), field))

/* The u64 at kernel address va by a plain load (0 if it faults), read as a
 * scalar field so the verifier sees a number, not a pointer. Without the
 * kfunc (6.1) the code is dead, but a global function is verified anyway. */
static __always_inline __u64 hr_kword(__u64 va)
{
	return hr_has_cast() ? bpf_core_cast((void *)va, struct cpumask)->bits[0] : 0;
}

/* The file behind descriptor fd of task t (an address), or 0. */
static __always_inline __u64 hr_fd_file_of(struct task_struct *t, __s64 fd)
{
	struct fdtable *fdt = t->files->fdt;
	__u64 f = 0;

	/* The slot read as a list_head's first pointer: a plain load where the
	 * kernel has the cast (a helper call fewer per fd path). */
	if (fd >= 0 && fd < fdt->max_fds)
		f = (__u64)hr_kread((__u64)fdt->fd + fd * sizeof(f), struct list_head, next);
	return f;
}

#define HR_S_IFMT 0170000
#define HR_S_IFDIR 0040000
#define HR_AT_REMOVEDIR 0x200

static __always_inline struct mount *hr_real_mount(struct vfsmount *m)
{
	return m ? (struct mount *)((void *)m - bpf_core_field_offset(struct mount, mnt)) : 0;
}

/* Syscall argument i from the task's saved registers (x86_64). */
static __always_inline __u64 hr_reg_arg(struct pt_regs *regs, int i)
{
	switch (i) {
	case 0: return regs->di;
	case 1: return regs->si;
	case 2: return regs->dx;
	case 3: return regs->r10;
	case 4: return regs->r8;
	default: return regs->r9;
	}
}

/*
 * File systems whose directories move only through this kernel's syscalls
 * (the invalidations see them all). Network and FUSE file systems are not
 * among them: a server can rename behind our back. (Not d_revalidate: ext4
 * sets it for fscrypt on every dentry.)
 */
static __always_inline bool hr_local_fs(unsigned long magic)
{
	switch (magic) {
	case 0xEF53:		/* ext2/3/4 */
	case 0x58465342:	/* xfs */
	case 0x9123683E:	/* btrfs */
	case 0x01021994:	/* tmpfs */
	case 0x858458f6:	/* ramfs */
	case 0xF2F52010:	/* f2fs */
	case 0xca451a4e:	/* bcachefs */
	case 0x794c7630:	/* overlayfs */
	case 0xE0F5E1E2:	/* erofs */
	case 0x73717368:	/* squashfs */
	case 0x4d44:		/* vfat */
	case 0x2011BAB0:	/* exfat */
		return true;
	}
	return false;
}

/* A cache entry's key: a directory. */
struct hr_dkey {
	__u64 mnt_uid;
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

/* What a cached entry must match besides its key; `watched` is fswatch's
 * verdict (capture leaves it 0). */
struct hr_dvalid {
	__u64 gen;
	__u64 ns_event;
	__u64 root_uid;	/* the task's root: mount id, inode */
	__u64 root_ino;
	__u64 watched;
};

/* Before 6.18 a namespace's never-reused id was its `seq`. */
struct mnt_namespace___seq {
	__u64 seq;
} __attribute__((preserve_access_index));

/*
 * A mount's never-reused id: 6.8+'s mnt_id_unique. Before, the never-reused
 * sequence number of its namespace above its mount id: an id is reused only
 * after an umount, which moves that namespace's event counter, and every
 * entry holds the counter (hr_dvalid_now). 0: unknown, no cache is used.
 */
static __always_inline __u64 hr_mnt_uid(struct mount *m)
{
	struct mnt_namespace___seq *ns;

	if (bpf_core_field_exists(struct mount, mnt_id_unique))
		return HR_RD(m, mnt_id_unique);
	ns = (void *)HR_RD(m, mnt_ns);
	if (!ns || !bpf_core_field_exists(ns->seq))
		return 0;
	return BPF_CORE_READ(ns, seq) << 32 | (__u32)HR_RD(m, mnt_id);
}

/* What an entry must match now for a directory of mount m seen by task t:
 * the generation (read by the caller, before busy: inval.h), the mount
 * namespace's event counter (every mount, umount, move and pivot_root in
 * it), the task's root (chroot). */
static __always_inline void hr_dvalid_now(struct hr_dvalid *e, struct mount *m, struct task_struct *t,
					  __u64 gen)
{
	/* Plain loads: a helper call per field would cost more than the map
	 * lookup this serves. */
	struct mnt_namespace *ns = HR_RD(m, mnt_ns);
	struct fs_struct *fs = t->fs;
	struct mount *rm = hr_real_mount(fs->root.mnt);

	e->gen = gen;
	e->ns_event = ns ? HR_RD(ns, event) : 0;
	e->root_uid = rm ? hr_mnt_uid(HR_CAST(rm, struct mount)) : 0;
	e->root_ino = fs->root.dentry->d_inode->i_ino;
	e->watched = 0;
}

/* Whether the entry `have` still holds: stored with the generation, mount
 * namespace and root that `want` (hr_dvalid_now) expects now. */
static __always_inline bool hr_dvalid_same(const struct hr_dvalid *have, const struct hr_dvalid *want)
{
	return have->gen == want->gen && have->ns_event == want->ns_event &&
	       have->root_uid == want->root_uid && have->root_ino == want->root_ino;
}

/* The key of directory d in mount m (cast pointers); its mnt_uid 0: none. */
static __always_inline void hr_dkey_of(struct hr_dkey *k, struct dentry *d, struct mount *m)
{
	k->mnt_uid = hr_mnt_uid(m);
	k->ino = HR_RD(d, d_inode, i_ino);
	k->dev = HR_RD(d, d_sb, s_dev);
	k->pad = 0;
}

#endif
