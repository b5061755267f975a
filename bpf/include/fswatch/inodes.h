/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Recording a syscall in flight: every inode whose ctime it changes
 * (fs/inode.c's timestamp tracepoints, 6.13+; before, the vfs_* calls that
 * change them: vfs.h), with the name and parent the inode's dentry has at
 * that moment. There is no entry hook: the record is opened by the first
 * change of a selected syscall (its number is in the task's pt_regs) and
 * closed by that syscall's exit, so syscalls that change nothing, and every
 * unselected syscall, pay nothing here.
 */
#ifndef HARRIER_FSWATCH_INODES_H
#define HARRIER_FSWATCH_INODES_H

/* The dentry of an inode's newest name (hlist_add_head in d_instantiate), or NULL. */
static __always_inline struct dentry *fw_alias(struct inode *inode)
{
	struct hlist_node *n = BPF_CORE_READ(inode, i_dentry.first);

	if (!n)
		return 0;
	return (struct dentry *)((void *)n - bpf_core_field_offset(struct dentry, d_u));
}

/* The next name of the same inode, or NULL. */
static __always_inline struct dentry *fw_alias_next(struct dentry *d)
{
	struct hlist_node *n = BPF_CORE_READ(d, d_u.d_alias.next);

	if (!n)
		return 0;
	return (struct dentry *)((void *)n - bpf_core_field_offset(struct dentry, d_u));
}

static __always_inline bool fw_hashed(struct dentry *d)
{
	return BPF_CORE_READ(d, d_hash.pprev) != 0;
}

/* Adds inode to the record (once), with the name and parent of `alias`
 * (NULL: its newest dentry) as they are now. */
static __always_inline void fw_record(struct fw_pending *p, struct inode *inode, struct dentry *alias)
{
	struct fw_slot *s;
	struct fw_cpu *c;
	struct qstr q;
	__u32 n = p->nslots;

	for (int i = 0; i < FW_SLOTS; i++)
		if (i < n && p->slots[i].inode == (__u64)inode)
			return;
	if (n >= FW_SLOTS) {
		if ((c = fw_cpu_get()))
			c->stats.slots_full++;
		return;
	}
	s = &p->slots[n & (FW_SLOTS - 1)];
	/* Plain loads where the kernel has the cast (HR_CAST): only the
	 * name's bytes need a helper. */
	inode = HR_CAST(inode, struct inode);
	s->inode = (__u64)inode;
	s->ino = HR_RD(inode, i_ino);
	s->dev = HR_RD(inode, i_sb, s_dev);
	s->is_dir = (HR_RD(inode, i_mode) & HR_S_IFMT) == HR_S_IFDIR;
	s->parent_inode = 0;
	s->name_len = 0;
	if (!alias) {
		struct hlist_node *first = HR_RD(inode, i_dentry.first);

		if (first)
			alias = (struct dentry *)((void *)first - bpf_core_field_offset(struct dentry, d_u));
	}
	if (alias) {
		alias = HR_CAST(alias, struct dentry);
		s->parent_inode = (__u64)HR_RD(alias, d_parent, d_inode);
		q.name = HR_RD(alias, d_name.name);
		q.len = HR_RD(alias, d_name.len);
		{
			__u32 len = q.len & (FW_NAME_MAX - 1);

			if (!bpf_probe_read_kernel(s->name, len, q.name))
				s->name_len = len;
		}
	}
	p->nslots = n + 1;
}

/* An inode changed (its ctime, or a vfs_* call names it): if a selected
 * syscall that names an entry is in flight in this task, remember the inode
 * and the name and parent of `alias` (NULL: its newest dentry) as they are
 * now. Returns the syscall's record, if there is one. */
static __always_inline struct fw_pending *fw_changed(struct inode *inode, struct dentry *alias)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fw_pending *p;
	struct pt_regs *regs;
	struct fw_sys sy;
	long nr;

	/* Kernel threads and io_uring workers make no syscall of their own. */
	regs = 0;
	nr = -1;
	if (!(t->flags & (PF_KTHREAD_ | PF_IO_WORKER_)))
		regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (regs)
		nr = regs->orig_ax;
	/* A directory moved or removed: the caches' entries go (inval.h). */
	if (vcache)
		hr_tree_changed(t, inode, regs, nr);
	if (!regs)
		return 0;
	sy = fw_sys_of(nr);
	/* fd-based syscalls (write's mtime, fchmod) find their file at exit. */
	if (!sy.kind || sy.cls == FW_C_FD_ARG || !fw_tgid_ok(t))
		return 0;
	p = bpf_task_storage_get(&pending, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p)
		return 0;
	if (p->nr != nr) {
		/* The first change of this syscall (the exit closes each record). */
		p->nr = nr;
		p->nslots = 0;
		p->new_dentry = 0;
	}
	fw_record(p, inode, alias);
	return p;
}

SEC("tp_btf/inode_set_ctime_to_ts")
int BPF_PROG(fw_ctime_set, struct inode *inode, struct timespec64 *ts)
{
	fw_changed(inode, 0);
	return 0;
}

SEC("tp_btf/ctime_ns_xchg")
int BPF_PROG(fw_ctime_xchg, struct inode *inode, __u32 old, __u32 new, __u32 cur)
{
	fw_changed(inode, 0);
	return 0;
}

SEC("tp_btf/ctime_xchg_skip")
int BPF_PROG(fw_ctime_skip, struct inode *inode, struct timespec64 *ts)
{
	fw_changed(inode, 0);
	return 0;
}

#endif
