/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Task fields for the state engine (`task(name)` and `cgroup` kinds in
 * schema/events.tbl): what a new process has that the syscall's arguments do
 * not carry, read from the kernel at the event, because a /proc read after
 * the fact may find the process gone. Plain CO-RE loads from the current
 * task (the verifier makes them fault-safe; a helper call per field costs
 * more); only execve/execveat, the set*id family and capset use them.
 */
#ifndef HARRIER_TASK_H
#define HARRIER_TASK_H

/* Kernels before 6.15 name the kernfs parent `parent`; before 6.6/6.11 the
 * inode times are timespec64 fields. */
struct kernfs_node___old {
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

struct inode___old {
	struct timespec64 i_mtime;
	struct timespec64 i_ctime;
} __attribute__((preserve_access_index));

#define HR_OVERLAYFS_MAGIC 0x794c7630
#define HR_EXE_UPPER_LAYER 1	/* exe_flags bits, mirrored in harrier-state */
#define HR_EXE_MEMFD 2
#define HR_EXE_WRITABLE 4
#define HR_EXE_LOWER_LAYER 8
#define HR_SB_RDONLY 1
#define HR_S_IFREG 0100000
#define HR_S_IFLNK 0120000
#define HR_S_IMMUTABLE 8
#define HR_CAP_DAC_OVERRIDE 1
#define HR_CAP_FOWNER 3
#define HR_GROUP_SEARCH 16	/* binary search steps: log2(NGROUPS_MAX) */
#define HR_UID_EXTENTS 5	/* the extents a uid_gid_map keeps inline */
#define HR_CG_DEPTH 8		/* cgroup levels kept (the deepest ones) */
#define HR_CG_NAME 256
/* Nanoseconds fit 30 bits; 6.x keeps a flag (I_CTIME_QUERIED) in bit 31. */
#define HR_NSEC_MASK 0x3fffffff

static __always_inline __u32 hr_task_uid(struct hr_em *em)
{
	struct task_struct *t = em->task;

	return t->cred->uid.val;
}

static __always_inline __u32 hr_task_gid(struct hr_em *em)
{
	struct task_struct *t = em->task;

	return t->cred->gid.val;
}

static __always_inline __u32 hr_task_euid(struct hr_em *em)
{
	struct task_struct *t = em->task;

	return t->cred->euid.val;
}

static __always_inline __u32 hr_task_egid(struct hr_em *em)
{
	struct task_struct *t = em->task;

	return t->cred->egid.val;
}

/* -1 (unset) without audit support, as /proc/PID/loginuid says. */
static __always_inline __u32 hr_task_loginuid(struct hr_em *em)
{
	struct task_struct *t = em->task;

	if (!bpf_core_field_exists(t->loginuid))
		return (__u32)-1;
	return t->loginuid.val;
}

/* The controlling terminal as a device number (new_encode_dev), 0 for none. */
static __always_inline __u32 hr_task_tty(struct hr_em *em)
{
	struct task_struct *t = em->task;
	struct tty_struct *tty = t->signal->tty;
	__u32 major, minor;

	if (!tty)
		return 0;
	major = tty->driver->major;
	minor = tty->driver->minor_start + tty->index;
	return (minor & 0xff) | (major << 8) | ((minor & ~0xffu) << 12);
}

/* A pid's number in the namespace at `level` (0: the init namespace). */
static __always_inline __u32 hr_pid_nr(struct pid *p, __u32 level)
{
	int nr = 0;

	if (p)
		bpf_core_read(&nr, sizeof(nr), &p->numbers[level & 31].nr);
	return nr;
}

static __always_inline __u32 hr_task_sid(struct hr_em *em)
{
	struct task_struct *t = em->task;

	return hr_pid_nr(t->signal->pids[PIDTYPE_SID], 0);
}

/* The process id as its own pid namespace sees it. */
static __always_inline __u32 hr_vpid_of(struct task_struct *t)
{
	struct pid *p = t->group_leader->thread_pid;

	return hr_pid_nr(p, p ? p->level : 0);
}

static __always_inline __u32 hr_task_vpid(struct hr_em *em)
{
	return hr_vpid_of(em->task);
}

static __always_inline __u32 hr_task_vpgid(struct hr_em *em)
{
	struct task_struct *t = em->task;
	struct pid *own = t->thread_pid;

	return hr_pid_nr(t->signal->pids[PIDTYPE_PGID], own ? own->level : 0);
}

/* kernel_cap_t is one u64 since 6.3 and two u32s before: read 8 bytes either way. */
#define HR_TASK_CAPS(set)						\
static __always_inline __u64 hr_task_##set(struct hr_em *em)		\
{									\
	struct task_struct *t = em->task;				\
	__u64 caps = 0;							\
									\
	bpf_core_read(&caps, sizeof(caps), &t->cred->set);		\
	return caps;							\
}
HR_TASK_CAPS(cap_effective)
HR_TASK_CAPS(cap_permitted)
HR_TASK_CAPS(cap_inheritable)

static __always_inline struct inode *hr_exe_inode(struct hr_em *em)
{
	struct task_struct *t = em->task;

	return em->ret == 0 ? t->mm->exe_file->f_inode : 0;
}

static __always_inline __u64 hr_task_exe_ctime(struct hr_em *em)
{
	struct inode *i = hr_exe_inode(em);

	if (!i)
		return 0;
	if (bpf_core_field_exists(i->i_ctime_sec))
		return i->i_ctime_sec * 1000000000ULL + (i->i_ctime_nsec & HR_NSEC_MASK);
	struct inode___old *o = (void *)i;
	return BPF_CORE_READ(o, i_ctime.tv_sec) * 1000000000ULL + BPF_CORE_READ(o, i_ctime.tv_nsec);
}

static __always_inline __u64 hr_task_exe_mtime(struct hr_em *em)
{
	struct inode *i = hr_exe_inode(em);

	if (!i)
		return 0;
	if (bpf_core_field_exists(i->i_mtime_sec))
		return i->i_mtime_sec * 1000000000ULL + (i->i_mtime_nsec & HR_NSEC_MASK);
	struct inode___old *o = (void *)i;
	return BPF_CORE_READ(o, i_mtime.tv_sec) * 1000000000ULL + BPF_CORE_READ(o, i_mtime.tv_nsec);
}

/* Whether kernel id `id` has a number in user namespace map `m` (the inline
 * extents only, as Falco's driver checks). */
static __always_inline bool hr_id_mapped(struct uid_gid_map *m, __u32 id)
{
	__u32 n = BPF_CORE_READ(m, nr_extents);

	for (int j = 0; j < HR_UID_EXTENTS; j++) {
		__u32 first, count;

		if (j >= n)
			break;
		first = BPF_CORE_READ(m, extent[j].lower_first);
		count = BPF_CORE_READ(m, extent[j].count);
		if (id >= first && id - first < count)
			return true;
	}
	return false;
}

static __always_inline bool hr_in_groups(struct cred *cred, __u32 gid)
{
	struct group_info *gi = BPF_CORE_READ(cred, group_info);
	__u32 lo = 0, hi, mid, g;

	if (!gi)
		return false;
	hi = BPF_CORE_READ(gi, ngroups);
	for (int j = 0; j < HR_GROUP_SEARCH && lo < hi; j++) {
		mid = (lo + hi) / 2;
		g = 0;
		bpf_core_read(&g, sizeof(g), &gi->gid[mid & 0xffff]);
		if (gid > g)
			lo = mid + 1;
		else if (gid < g)
			hi = mid;
		else
			return true;
	}
	return false;
}

/*
 * Falco's EXE_WRITABLE: could the task write its executable? The kernel's
 * generic checks without ACLs or LSMs: a read-only mount or an immutable
 * inode never; the owner always; else the mode's group or other bits; else
 * CAP_DAC_OVERRIDE or CAP_FOWNER over ids its user namespace maps. A global
 * function: the verifier checks it once, apart from execve's other fields.
 */
__attribute__((noinline)) __u32 hr_exe_writable(__u64 creds, __u64 inode)
{
	struct cred *cred = (struct cred *)creds;
	struct inode *i = (struct inode *)inode;
	struct user_namespace *ns;
	__u32 mode, uid, gid, fsuid;
	__u64 caps = 0;
	bool uid_ok;

	if (!cred || !i)
		return 0;
	mode = BPF_CORE_READ(i, i_mode);
	if ((BPF_CORE_READ(i, i_sb, s_flags) & HR_SB_RDONLY) &&
	    ((mode & HR_S_IFMT) == HR_S_IFREG || (mode & HR_S_IFMT) == HR_S_IFDIR ||
	     (mode & HR_S_IFMT) == HR_S_IFLNK))
		return 0;
	if (BPF_CORE_READ(i, i_flags) & HR_S_IMMUTABLE)
		return 0;
	uid = BPF_CORE_READ(i, i_uid.val);
	gid = BPF_CORE_READ(i, i_gid.val);
	if (uid == (__u32)-1 || gid == (__u32)-1)
		return 0;
	fsuid = BPF_CORE_READ(cred, fsuid.val);
	if (fsuid == uid)
		return 1;
	if (gid == BPF_CORE_READ(cred, fsgid.val) || hr_in_groups(cred, gid))
		mode >>= 3;
	if (mode & 0002)
		return 1;
	ns = BPF_CORE_READ(cred, user_ns);
	if (!ns)
		return 0;
	bpf_core_read(&caps, sizeof(caps), &cred->cap_effective);
	uid_ok = hr_id_mapped(&ns->uid_map, uid);
	if ((caps & (1ULL << HR_CAP_DAC_OVERRIDE)) && uid_ok && hr_id_mapped(&ns->gid_map, gid))
		return 1;
	return (caps & (1ULL << HR_CAP_FOWNER)) && uid_ok;
}

/*
 * Where the executable lives: an overlayfs file whose inode has an upper
 * dentry was written in the container (struct ovl_inode keeps __upperdentry
 * with an inode right after its vfs inode; overlay's types are not in
 * vmlinux BTF), any other overlayfs file comes from a lower layer; a memfd's dentry is named
 * "memfd:..."; and whether the task may write it (Falco's execve flags).
 */
static __always_inline __u32 hr_task_exe_flags(struct hr_em *em)
{
	struct task_struct *t = em->task;
	/* After a failed exec too (the image that stays), as Falco's driver writes it. */
	struct file *f = t->mm->exe_file;
	struct inode *i;
	void *upper = 0;
	char name[6] = {};
	__u32 flags = 0;

	if (!f)
		return 0;
	i = f->f_inode;
	if (i->i_sb->s_magic == HR_OVERLAYFS_MAGIC) {
		bpf_probe_read_kernel(&upper, sizeof(upper), (void *)i + bpf_core_type_size(struct inode));
		upper = upper ? (void *)BPF_CORE_READ((struct dentry *)upper, d_inode, i_ino) : 0;
		flags |= upper ? HR_EXE_UPPER_LAYER : HR_EXE_LOWER_LAYER;
	}
	bpf_probe_read_kernel(name, sizeof(name), f->f_path.dentry->d_name.name);
	if (name[0] == 'm' && name[1] == 'e' && name[2] == 'm' && name[3] == 'f' && name[4] == 'd' &&
	    name[5] == ':')
		flags |= HR_EXE_MEMFD;
	/* A probe-read pointer is a scalar, which a global function accepts (a
	 * plain load's is typed, which it does not): one more read per exec. */
	if (hr_exe_writable((__u64)BPF_CORE_READ(t, cred), (__u64)BPF_CORE_READ(f, f_inode)))
		flags |= HR_EXE_WRITABLE;
	return flags;
}

static __always_inline struct kernfs_node *hr_kn_parent(struct kernfs_node *kn)
{
	if (bpf_core_field_exists(kn->__parent))
		return BPF_CORE_READ(kn, __parent);
	return BPF_CORE_READ((struct kernfs_node___old *)kn, parent);
}

/*
 * The first v1 hierarchy that places the task below its root, else the
 * unified one: container runtimes move the task into every hierarchy. A
 * global function, so the verifier checks it once and the caller sees one
 * returned scalar instead of one state per early return.
 */
__attribute__((noinline)) __u64 hr_cgroup_kn(__u64 css_set)
{
	struct css_set *cs = (struct css_set *)css_set;
	struct kernfs_node *kn;

#pragma unroll
	for (int i = 0; i < CGROUP_SUBSYS_COUNT; i++) {
		kn = BPF_CORE_READ(cs, subsys[i], cgroup, kn);
		if (kn && hr_kn_parent(kn))
			return (__u64)kn;
	}
	return (__u64)BPF_CORE_READ(cs, dfl_cgrp, kn);
}

struct hr_cg_walk {
	struct kernfs_node *kn;
	__u8 *slot;
	__u32 off;
};

static long hr_cg_step(__u64 i, struct hr_cg_walk *w)
{
	struct kernfs_node *kn = w->kn; /* a local: BPF_CORE_READ would relocate w's own fields */
	struct kernfs_node *p = kn ? hr_kn_parent(kn) : 0;
	long n;

	if (!p)
		return 1;
	n = bpf_probe_read_kernel_str(w->slot + 2 + (w->off & 2047), HR_CG_NAME, BPF_CORE_READ(kn, name));
	w->off += n & ~(n >> 63);
	w->kn = p;
	return 0;
}

/*
 * The cgroup path's components, deepest first, each NUL-terminated (at most
 * HR_CG_DEPTH of them; none for a root cgroup). Deepest first keeps this one
 * straight walk up the tree; user space reverses it. The walk is a bpf_loop
 * callback so that the verifier checks it once, whatever the execve handler's
 * other fields did before it.
 */
static __always_inline void hr_put_cgroup(struct hr_em *em)
{
	struct task_struct *t = em->task;
	/* A probe-read pointer is a scalar, which a global function accepts. */
	struct hr_cg_walk w = { .kn = (struct kernfs_node *)hr_cgroup_kn((__u64)BPF_CORE_READ(t, cgroups)) };

	w.slot = hr_var_begin(em);
	if (!w.slot)
		return;
	bpf_loop(HR_CG_DEPTH, hr_cg_step, &w, 0);
	hr_var_end(em, w.slot, w.off & 4095);
}

/*
 * The new image's environment block (mm->env_start..env_end, NUL-separated
 * VAR=value), as exec laid it out on the new stack. Only after a successful
 * exec: a failed one still runs the old image, whose block says nothing about
 * the exec. At most HR_ENV_MAX bytes are copied; env_size carries the full
 * size, so a reader knows a cut block from a whole one, and the truncated
 * counter counts the cut.
 */
#define HR_ENV_MAX 4096

static __always_inline __u32 hr_task_env_size(struct hr_em *em)
{
	struct task_struct *t = em->task;
	__u64 start, end;

	if (em->ret != 0)
		return 0;
	start = t->mm->env_start;
	end = t->mm->env_end;
	return end > start && end - start < 0xffffffffULL ? end - start : 0;
}

static __always_inline void hr_put_env(struct hr_em *em)
{
	struct task_struct *t = em->task;
	__u64 size = hr_task_env_size(em);

	if (size > HR_ENV_MAX)
		em->cpu->stats.truncated++;
	hr_put_user(em, size ? t->mm->env_start : 0, size, HR_ENV_MAX);
}

#endif
