// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * harrier fswatch: file-system events whose paths come from the kernel's own
 * objects (dentries and mounts), never from the syscall's path string.
 *
 * Hooks (this kernel has no kprobes, fentry or BPF LSM; see docs/fswatch.md):
 * - tp_btf sys_enter: a syscall that changes a directory entry or attribute
 *   by path opens a per-task record (its arguments; no path copied);
 * - tp_btf inode_set_ctime_to_ts, ctime_ns_xchg, ctime_xchg_skip (fs/inode.c,
 *   6.13+): every inode whose ctime the syscall changes is added to that
 *   record, with the name and parent its first dentry has at that moment
 *   (before a rename moves it or an unlink drops it);
 * - tp_btf sys_exit: the record is turned into an event. Files from fds
 *   (open's result, write's and fchmod's argument) walk their struct path;
 *   entries walk the dentry of the inode the kernel changed, crossing mounts.
 *   The walk also checks every ancestor against the watched (dev, inode) set:
 *   events outside it are counted and dropped here.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "harrier.h"
#include "fswatch.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space before load; constant for the verifier. */
const volatile __u32 filter_tgid = 0;	/* 0: every process */
const volatile __u32 event_mask = 0;	/* 1 << FW_EV_* */
const volatile bool watch_all = 0;	/* no PATH: everything is watched */
const volatile bool recursive = 1;
const volatile bool follow = 1;	/* an entry renamed out of the watched tree stays watched */	/* else only a watched inode and its directory's entries */
const volatile __u64 aring_mask = 0;	/* per-CPU ring size - 1 */
const volatile __u64 aring_last = 0;	/* last offset a record may start at */

#define FW_PATHBUF (FW_PATH_MAX + 512)	/* room past FW_PATH_MAX for masked copies */

/* Where a dentry walk is (fw_walk_step); in the per-CPU map, not the stack,
 * so bpf_loop verifies in one pass whatever the depth. */
struct fw_walk {
	__u64 dentry;
	__u64 mnt;	/* struct mount * */
	__u64 root_mnt;	/* the task's root (mount, dentry): the walk stops there; one */
	__u64 root_dentry;	/* ending at a top mount instead is detached */
	__s32 pos;	/* start of the path so far, counting down from FW_PATH_MAX */
	__u32 buf;	/* which path buffer */
	__u32 depth;	/* names climbed */
	__u32 flags;
	__u32 watched;
	__u32 pad;
};

/*
 * What one event is made of: filled by the exit handler (what to walk),
 * completed by fw_path (results), written by fw_emit. In the per-CPU map so
 * that fw_path and fw_emit can be global functions, verified once each.
 */
struct fw_plan {
	__u64 dentry[2];	/* walk from here (the parent, when a name is put first) */
	__u64 mnt[2];		/* the mount, when known exactly (a struct file's); else 0 */
	__u64 hint;		/* struct mount * the syscall's path started from */
	__s32 name_slot[2];	/* a recorded name to put first, or -1 */
	__u32 extra[2];		/* flags to add */
	/* results */
	__u32 flags;
	__u32 dev;
	__u32 mnt_id;
	__u32 watched;
	__u64 ino;
	__s32 pos[2];		/* start of each path; -1: no such path */
	__u32 watched_b[2];	/* per path */
};

/* A scan of the mounts of one super block (fw_mount_for). */
#define FW_CANDS 4

struct fw_mscan {
	__u64 m;
	__u64 ns;
	__u64 sroot;
	__u64 first;	/* the first in the task's namespace */
	__u64 whole;	/* the first there that shows the whole file system */
	__u64 count;
	__u64 mnts[FW_CANDS];	/* candidates and their roots */
	__u64 roots[FW_CANDS];
	__u64 d;	/* the ancestor climb */
	__u64 hint_root;	/* the hint's root, if the hint is a candidate */
	__s32 deepest;	/* first candidate root met climbing, or -1 */
	__u32 hint_seen;	/* the hint's root was met */
};

struct fw_cpu {
	struct fw_stats stats;
	struct fw_walk walk;
	struct fw_mscan mscan;
	struct fw_plan plan;
	__u8 path[2 * FW_PATHBUF];	/* two path buffers (one array: the skeleton's types need it) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fw_cpu);
} cpu_state SEC(".maps");

/* Per-CPU rings (struct hr_aring), entry i for CPU i; user space sizes it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(key_size, 4);
	__uint(value_size, HR_ARING_DATA + 65536);
	__uint(max_entries, 1);
} arings SEC(".maps");

/* Watched inodes: (kernel dev_t, inode number), never the inode alone. */
struct fw_key {
	__u32 dev;
	__u32 pad;
	__u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fw_key);
	__type(value, __u32);
} watched SEC(".maps");

/* An inode whose ctime changed during the syscall in flight. */
struct fw_slot {
	__u64 inode;
	__u64 parent_inode;	/* its first dentry's parent's inode, when it changed */
	__u64 ino;
	__u32 dev;
	__u16 name_len;
	__u8 is_dir;
	__u8 pad;
	char name[FW_NAME_MAX];	/* its first dentry's name, when it changed */
};

/* The syscall in flight, per task: opened at sys_enter, closed at sys_exit. */
struct fw_pending {
	__u32 nr;
	__u8 nslots;
	__u8 abs;	/* the path argument starts with '/' */
	__u16 pad;
	__u64 args[6];
	struct fw_slot slots[FW_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fw_pending);
} pending SEC(".maps");

/* How an event finds its objects. */
enum fw_class {
	FW_C_NONE = 0,
	FW_C_FD_RET,	/* the file behind the returned fd (open) */
	FW_C_FD_ARG,	/* the file behind fd argument 0 (write, fchmod) */
	FW_C_NEW,	/* a new entry: the changed inode whose dentry's parent also changed */
	FW_C_GONE,	/* a removed entry: the changed inode's old name in its changed parent */
	FW_C_MOVE,	/* rename: old name in the old parent, new dentry */
	FW_C_ATTR,	/* the one changed inode */
};

struct fw_sys {
	__u8 kind;	/* FW_EV_* */
	__u8 cls;	/* fw_class */
	__s8 path;	/* index of the (target) path argument, -1: none */
	__s8 dirfd;	/* index of its dirfd argument, -1: relative to the cwd */
};

#define AT_FDCWD_ -100
#define AT_REMOVEDIR_ 0x200
#define S_IFMT_ 00170000
#define S_IFDIR_ 0040000

/* x86_64 syscall numbers. */
static __always_inline struct fw_sys fw_sys_of(long nr)
{
	struct fw_sys s = { 0, 0, -1, -1 };

	switch (nr) {
	case 2: /* open */
	case 85: /* creat */
		s = (struct fw_sys){ FW_EV_OPEN, FW_C_FD_RET, 0, -1 };
		break;
	case 257: /* openat */
	case 437: /* openat2 */
		s = (struct fw_sys){ FW_EV_OPEN, FW_C_FD_RET, 1, 0 };
		break;
	case 1: /* write */
	case 18: /* pwrite64 */
	case 20: /* writev */
	case 296: /* pwritev */
	case 328: /* pwritev2 */
		s = (struct fw_sys){ FW_EV_MODIFY, FW_C_FD_ARG, -1, -1 };
		break;
	case 91: /* fchmod */
	case 93: /* fchown */
	case 77: /* ftruncate */
		s = (struct fw_sys){ FW_EV_SETATTR, FW_C_FD_ARG, -1, -1 };
		break;
	case 83: /* mkdir */
		s = (struct fw_sys){ FW_EV_MKDIR, FW_C_NEW, 0, -1 };
		break;
	case 258: /* mkdirat */
		s = (struct fw_sys){ FW_EV_MKDIR, FW_C_NEW, 1, 0 };
		break;
	case 86: /* link */
	case 88: /* symlink */
		s = (struct fw_sys){ FW_EV_LINK, FW_C_NEW, 1, -1 };
		break;
	case 265: /* linkat */
		s = (struct fw_sys){ FW_EV_LINK, FW_C_NEW, 3, 2 };
		break;
	case 266: /* symlinkat */
		s = (struct fw_sys){ FW_EV_LINK, FW_C_NEW, 2, 1 };
		break;
	case 87: /* unlink */
		s = (struct fw_sys){ FW_EV_UNLINK, FW_C_GONE, 0, -1 };
		break;
	case 84: /* rmdir */
		s = (struct fw_sys){ FW_EV_RMDIR, FW_C_GONE, 0, -1 };
		break;
	case 263: /* unlinkat: rmdir with AT_REMOVEDIR, fixed up by the caller */
		s = (struct fw_sys){ FW_EV_UNLINK, FW_C_GONE, 1, 0 };
		break;
	case 82: /* rename */
		s = (struct fw_sys){ FW_EV_RENAME, FW_C_MOVE, 1, -1 };
		break;
	case 264: /* renameat */
	case 316: /* renameat2 */
		s = (struct fw_sys){ FW_EV_RENAME, FW_C_MOVE, 3, 2 };
		break;
	case 90: /* chmod */
	case 92: /* chown */
	case 94: /* lchown */
	case 76: /* truncate */
	case 132: /* utime */
	case 235: /* utimes */
		s = (struct fw_sys){ FW_EV_SETATTR, FW_C_ATTR, 0, -1 };
		break;
	case 268: /* fchmodat */
	case 452: /* fchmodat2 */
	case 260: /* fchownat */
	case 261: /* futimesat */
	case 280: /* utimensat: by fd when the path is NULL, fixed up at exit */
		s = (struct fw_sys){ FW_EV_SETATTR, FW_C_ATTR, 1, 0 };
		break;
	}
	if (s.kind && !(event_mask & (1u << s.kind)))
		s.kind = 0;
	return s;
}

static __always_inline bool fw_tgid_ok(struct task_struct *t)
{
	return !filter_tgid || t->tgid == filter_tgid;
}

static __always_inline struct fw_cpu *fw_cpu_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_state, &zero);
}

/* An argument index the verifier can bound. */
static __always_inline __u32 fw_idx(__s8 i)
{
	__u32 v = i < 0 ? 0 : i;

	return v > 5 ? 5 : v;
}

static __always_inline __u64 fw_arg(struct pt_regs *regs, int i)
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

/* Syscalls that name an entry need the inodes changed on their way: record
 * them. fd-based ones find everything at exit. */
SEC("tp_btf/sys_enter")
int BPF_PROG(fw_sys_enter, struct pt_regs *regs, long id)
{
	struct fw_sys s = fw_sys_of(id);
	struct task_struct *t;
	struct fw_pending *p;
	char first = 0;

	if (!s.kind || s.cls == FW_C_FD_ARG)
		return 0;
	t = bpf_get_current_task_btf();
	if (!fw_tgid_ok(t))
		return 0;
	p = bpf_task_storage_get(&pending, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p)
		return 0;
	p->nr = id;
	p->nslots = 0;
	for (int i = 0; i < 6; i++)
		p->args[i] = fw_arg(regs, i);
	if (s.path >= 0)
		bpf_probe_read_user(&first, 1, (void *)p->args[fw_idx(s.path)]);
	p->abs = first == '/';
	return 0;
}

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

/* An inode's ctime changed: if a watched-kind syscall is in flight in this
 * task, remember the inode and its name and parent as they are now. */
static __always_inline int fw_changed(struct inode *inode)
{
	struct fw_pending *p = bpf_task_storage_get(&pending, bpf_get_current_task_btf(), 0, 0);
	struct dentry *alias;
	struct fw_slot *s;
	struct fw_cpu *c;
	struct qstr q;
	__u32 n;

	if (!p || !p->nr)
		return 0;
	n = p->nslots;
	for (int i = 0; i < FW_SLOTS; i++)
		if (i < n && p->slots[i].inode == (__u64)inode)
			return 0;
	if (n >= FW_SLOTS) {
		if ((c = fw_cpu_get()))
			c->stats.slots_full++;
		return 0;
	}
	s = &p->slots[n & (FW_SLOTS - 1)];
	s->inode = (__u64)inode;
	s->ino = BPF_CORE_READ(inode, i_ino);
	s->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	s->is_dir = (BPF_CORE_READ(inode, i_mode) & S_IFMT_) == S_IFDIR_;
	s->parent_inode = 0;
	s->name_len = 0;
	alias = fw_alias(inode);
	if (alias) {
		s->parent_inode = (__u64)BPF_CORE_READ(alias, d_parent, d_inode);
		if (!bpf_core_read(&q, sizeof(q), &alias->d_name)) {
			__u32 len = q.len & (FW_NAME_MAX - 1);

			if (!bpf_probe_read_kernel(s->name, len, q.name))
				s->name_len = len;
		}
	}
	p->nslots = n + 1;
	return 0;
}

SEC("tp_btf/inode_set_ctime_to_ts")
int BPF_PROG(fw_ctime_set, struct inode *inode, struct timespec64 *ts)
{
	return fw_changed(inode);
}

SEC("tp_btf/ctime_ns_xchg")
int BPF_PROG(fw_ctime_xchg, struct inode *inode, __u32 old, __u32 new, __u32 cur)
{
	return fw_changed(inode);
}

SEC("tp_btf/ctime_xchg_skip")
int BPF_PROG(fw_ctime_skip, struct inode *inode, struct timespec64 *ts)
{
	return fw_changed(inode);
}

/* ---- paths from dentries and mounts ---- */

static __always_inline struct mount *fw_real_mount(struct vfsmount *m)
{
	return m ? (struct mount *)((void *)m - bpf_core_field_offset(struct mount, mnt)) : 0;
}

static __always_inline void fw_check_watch(struct fw_walk *w, struct dentry *d)
{
	struct fw_key k = {};

	if (w->watched || (!recursive && w->depth > 1))
		return;
	k.dev = BPF_CORE_READ(d, d_sb, s_dev);
	k.ino = BPF_CORE_READ(d, d_inode, i_ino);
	if (bpf_map_lookup_elem(&watched, &k))
		w->watched = 1;
}

/* One step up: a name, or a hop from a mount's root to its mountpoint. */
/* Path buffer b of this CPU. */
#define FW_BUF(c, b) ((c)->path + ((b) & 1) * FW_PATHBUF)

static long fw_walk_step(__u32 i, void *ctx)
{
	struct fw_cpu *c = fw_cpu_get();
	struct dentry *d, *parent;
	struct mount *mnt;
	struct fw_walk *w;
	struct qstr q;
	__u32 len, b;
	__s32 pos;

	if (!c)
		return 1;
	w = &c->walk;
	d = (struct dentry *)w->dentry;
	mnt = (struct mount *)w->mnt;
	if (!d)
		return 1;
	if ((__u64)d == w->root_dentry && (__u64)mnt == w->root_mnt) {
		fw_check_watch(w, d);
		return 1;
	}
	if (mnt && d == BPF_CORE_READ(mnt, mnt.mnt_root)) {
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);

		fw_check_watch(w, d);
		if (up == mnt) {
			w->flags |= FW_F_DETACHED;
			return 1;
		}
		w->dentry = (__u64)BPF_CORE_READ(mnt, mnt_mountpoint);
		w->mnt = (__u64)up;
		return 0;
	}
	fw_check_watch(w, d);
	parent = BPF_CORE_READ(d, d_parent);
	if (bpf_core_read(&q, sizeof(q), &d->d_name))
		return 1;
	len = q.len & (FW_NAME_MAX - 1);
	if (d == parent) {
		/* A file system's root that is not the mount's: a disconnected
		 * dentry (memfd:, an fd from open_by_handle) or the wrong mount. */
		char pfx[6] = {};

		w->flags |= FW_F_DISCONNECTED;
		bpf_probe_read_kernel(pfx, sizeof(pfx), q.name);
		if (len >= 6 && pfx[0] == 'm' && pfx[1] == 'e' && pfx[2] == 'm' && pfx[3] == 'f' &&
		    pfx[4] == 'd' && pfx[5] == ':')
			w->flags |= FW_F_MEMFD;
		if (len == 1 && pfx[0] == '/')
			return 1;
	}
	w->depth++;
	pos = w->pos - (__s32)len - 1;
	if (pos < 0) {
		/* Out of room: keep climbing for the watch check only. */
		w->flags |= FW_F_TRUNCATED;
	} else {
		b = w->buf & 1;
		bpf_probe_read_kernel(FW_BUF(c, b) + ((pos + 1) & (FW_PATH_MAX - 1)), len, q.name);
		FW_BUF(c, b)[pos & (FW_PATH_MAX - 1)] = '/';
		w->pos = pos;
	}
	if (d == parent)
		return 1;
	w->dentry = (__u64)parent;
	return 0;
}

/*
 * Walks d (in mount mnt) up to the root into path buffer b, after whatever
 * is already at [pos, FW_PATH_MAX). Returns the start of the path; the flags
 * and whether a watched inode was passed stay in c->walk.
 */
static __always_inline __s32 fw_walk(struct fw_cpu *c, __u32 b, struct dentry *d, struct mount *mnt,
				     struct task_struct *t, __s32 pos, __u32 depth)
{
	struct fw_walk *w = &c->walk;
	struct mount *root = fw_real_mount(BPF_CORE_READ(t, fs, root.mnt));

	w->root_dentry = (__u64)BPF_CORE_READ(t, fs, root.dentry);
	w->dentry = (__u64)d;
	w->mnt = (__u64)mnt;
	w->root_mnt = (__u64)root;
	w->pos = pos;
	w->buf = b;
	w->depth = depth;
	w->flags = 0;
	w->watched = watch_all;
	if (!d) {
		w->flags = FW_F_UNRESOLVED;
		return pos;
	}
	if (!fw_hashed(d) && BPF_CORE_READ(d, d_parent) != d)
		w->flags |= FW_F_DELETED;
	if (bpf_loop(FW_DEPTH_MAX, fw_walk_step, 0, 0) == FW_DEPTH_MAX && w->dentry)
		w->flags |= FW_F_TRUNCATED;
	return w->pos;
}

/* "/" + name at the end of buffer b: the first step of a walk from the parent. */
static __always_inline __s32 fw_put_name(struct fw_cpu *c, __u32 b, const char *name, __u32 len)
{
	__s32 pos;

	len &= FW_NAME_MAX - 1;
	pos = FW_PATH_MAX - len - 1;
	b &= 1;
	bpf_probe_read_kernel(FW_BUF(c, b) + ((pos + 1) & (FW_PATH_MAX - 1)), len, name);
	FW_BUF(c, b)[pos & (FW_PATH_MAX - 1)] = '/';
	return pos;
}

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

/* One mount of the super block's list (6.8+: s_mounts, mnt_next_for_sb). */
static long fw_mscan_step(__u32 i, void *ctx)
{
	struct fw_cpu *c = fw_cpu_get();
	struct fw_mscan *ms;
	struct mount *m;

	if (!c)
		return 1;
	ms = &c->mscan;
	m = (struct mount *)ms->m;
	if (!m)
		return 1;
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
	ms->m = (__u64)BPF_CORE_READ(m, mnt_next_for_sb);
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

static __always_inline struct fw_mount_pick fw_mount_for(struct fw_cpu *c, struct task_struct *t,
							 struct dentry *d, struct mount *hint)
{
	struct fw_mount_pick r = { 0, 0 };
	struct super_block *sb = BPF_CORE_READ(d, d_sb);
	struct fw_mscan *ms = &c->mscan;
	bool hint_ok = hint && BPF_CORE_READ(hint, mnt.mnt_sb) == sb;

	ms->ns = (__u64)BPF_CORE_READ(t, nsproxy, mnt_ns);
	ms->sroot = (__u64)BPF_CORE_READ(sb, s_root);
	ms->first = 0;
	ms->whole = 0;
	ms->count = 0;
	if (bpf_core_field_exists(struct mount, mnt_next_for_sb)) {
		ms->m = (__u64)BPF_CORE_READ(sb, s_mounts);
		bpf_loop(FW_MOUNTS_MAX, fw_mscan_step, 0, 0);
	} else {
		/* Older kernels keep a list_head there: only the hint is used. */
		ms->count = 2;
	}
	if (ms->count == 1) {
		r.mnt = (struct mount *)ms->first;
	} else {
		/* Several: those whose root is an ancestor of d can show it. The
		 * starting mount if it is one of them, else the deepest (a bind
		 * mount of a subtree is the more specific view). */
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

/* The file behind descriptor fd of task t, or NULL. */
static __always_inline struct file *fw_fd_file(struct task_struct *t, __s64 fd)
{
	struct fdtable *fdt = BPF_CORE_READ(t, files, fdt);
	struct file **fds = BPF_CORE_READ(fdt, fd);
	struct file *f = 0;

	if (fd >= 0 && fd < BPF_CORE_READ(fdt, max_fds))
		bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

/* The mount the syscall's path started from: root, cwd or dirfd's. */
static __always_inline struct mount *fw_hint(struct task_struct *t, struct fw_pending *p, struct fw_sys s)
{
	__s64 dirfd = AT_FDCWD_;
	struct file *f;

	if (p->abs)
		return fw_real_mount(BPF_CORE_READ(t, fs, root.mnt));
	if (s.dirfd >= 0)
		dirfd = (int)p->args[fw_idx(s.dirfd)];
	if (dirfd == AT_FDCWD_)
		return fw_real_mount(BPF_CORE_READ(t, fs, pwd.mnt));
	f = fw_fd_file(t, dirfd);
	return f ? fw_real_mount(BPF_CORE_READ(f, f_path.mnt)) : 0;
}


/* Bounds v by max in a way clang cannot fold away and the verifier follows. */
#define fw_clamp(v, max) asm volatile("if %0 <= %1 goto +1; %0 = %1" : "+r"(v) : "i"(max))

/*
 * Path b of the plan: an optional recorded name, then the walk from
 * plan.dentry[b]. A global function: verified once, not per call site.
 */
__noinline int fw_path(__u32 b)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fw_cpu *c = fw_cpu_get();
	struct fw_mount_pick mp = { 0, 0 };
	struct fw_pending *p;
	struct fw_plan *pl;
	struct dentry *d;
	__u32 shift, depth = 0;
	__s32 pos = FW_PATH_MAX, ns;

	if (!c)
		return 0;
	b &= 1;
	pl = &c->plan;
	shift = b ? FW_F_SOURCE_SHIFT : 0;
	d = (struct dentry *)pl->dentry[b];
	ns = pl->name_slot[b];
	if (ns >= 0) {
		struct fw_slot *s;
		struct fw_key k = {};

		p = bpf_task_storage_get(&pending, t, 0, 0);
		if (!p)
			return 0;
		s = &p->slots[ns & (FW_SLOTS - 1)];
		pos = fw_put_name(c, b, s->name, s->name_len);
		depth = 1;
		/* The entry itself may be what is watched. */
		k.dev = s->dev;
		k.ino = s->ino;
		if (bpf_map_lookup_elem(&watched, &k))
			pl->watched = 1;
		if (!b) {
			pl->dev = s->dev;
			pl->ino = s->ino;
		}
	}
	if (pl->mnt[b])
		mp.mnt = (struct mount *)pl->mnt[b];
	else if (d)
		mp = fw_mount_for(c, t, d, (struct mount *)pl->hint);
	pl->pos[b] = fw_walk(c, b, d, mp.mnt, t, pos, depth);
	pl->flags |= (c->walk.flags | mp.flags | pl->extra[b]) << shift;
	pl->watched |= c->walk.watched;
	pl->watched_b[b] = c->walk.watched;
	if (!b) {
		struct mount *m = mp.mnt; /* a local: BPF_CORE_READ would relocate mp.mnt too */

		pl->mnt_id = m ? BPF_CORE_READ(m, mnt_id) : 0;
		if (ns < 0 && d) {
			pl->dev = BPF_CORE_READ(d, d_sb, s_dev);
			pl->ino = BPF_CORE_READ(d, d_inode, i_ino);
		}
	}
	return 0;
}

static __always_inline __u32 fw_copy_path(struct fw_cpu *c, __u8 *ev, __u64 off, __u32 b, __s32 pos)
{
	__u64 n, at = off;

	if (pos < 0 || pos > FW_PATH_MAX)
		return 0;
	n = (FW_PATH_MAX - pos) & (2 * FW_PATH_MAX - 1);
	fw_clamp(n, FW_PATH_MAX);
	fw_clamp(at, FW_FIXED_END + 2 + FW_PATH_MAX);
	*(__u16 *)(ev + at) = n;
	bpf_probe_read_kernel(ev + at + 2, n, FW_BUF(c, b) + (pos & (FW_PATH_MAX - 1)));
	return 2 + n;
}

/* Writes the plan's event into this CPU's ring. Global: verified once. */
__noinline int fw_emit(__u32 kind, __u32 nr, __s64 ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 cpu = bpf_get_smp_processor_id();
	struct hr_aring *r = bpf_map_lookup_elem(&arings, &cpu);
	struct fw_cpu *c = fw_cpu_get();
	__u64 head, off, start, len;
	struct fw_fixed *fx;
	struct fw_plan *pl;
	struct hr_hdr *h;
	__u8 *ev;

	if (!c)
		return 0;
	pl = &c->plan;
	c->stats.events++;
	if (pl->flags & FW_F_UNRESOLVED)
		c->stats.unresolved++;
	if (!r) {
		c->stats.drops[FW_DROP_NO_RING]++;
		return 0;
	}
	/* A record never starts past aring_last, so it never wraps. */
	head = r->head;
	off = head & aring_mask;
	start = head;
	if (off > aring_last) {
		start += aring_mask + 1 - off;
		off = 0;
	}
	if (start + FW_EVENT_MAX - *(volatile __u64 *)&r->tail > aring_mask + 1) {
		c->stats.drops[FW_DROP_RING_FULL]++;
		return 0;
	}
	ev = r->data + off;
	h = (struct hr_hdr *)ev;
	fx = (struct fw_fixed *)(ev + sizeof(*h));
	h->ts = bpf_ktime_get_ns();
	h->tid = t->pid;
	h->type = kind;
	fx->ret = ret;
	fx->pid = t->tgid;
	fx->uid = BPF_CORE_READ(t, cred, uid.val);
	fx->gid = BPF_CORE_READ(t, cred, gid.val);
	fx->flags = pl->flags;
	fx->dev = pl->dev;
	fx->mnt_id = pl->mnt_id;
	fx->ino = pl->ino;
	bpf_get_current_comm(fx->comm, sizeof(fx->comm));
	fx->nr = nr;
	fx->pad = 0;
	len = FW_FIXED_END;
	len += fw_copy_path(c, ev, len, 0, pl->pos[0]);
	len += fw_copy_path(c, ev, len, 1, pl->pos[1]);
	h->len = len;
	asm volatile("" ::: "memory");
	*(volatile __u64 *)&r->head = start + ((len + 7) & ~7ULL);
	return 0;
}

/* The changed inode whose current dentry's parent also changed: the new entry. */
static __always_inline struct dentry *fw_find_new(struct fw_pending *p)
{
	__u32 n = p->nslots;

	for (int i = 0; i < FW_SLOTS; i++) {
		struct dentry *a;
		__u64 pi;

		if (i >= n)
			break;
		a = fw_alias((struct inode *)p->slots[i].inode);
		if (!a)
			continue;
		pi = (__u64)BPF_CORE_READ(a, d_parent, d_inode);
		for (int j = 0; j < FW_SLOTS; j++)
			if (j < n && j != i && p->slots[j].inode == pi)
				return a;
	}
	return 0;
}

/* The changed inode whose parent, when it changed, also changed: the entry
 * removed or (`moved`: still named at exit) moved. */
static __always_inline int fw_find_gone(struct fw_pending *p, bool moved, int *dir)
{
	__u32 n = p->nslots;

	for (int i = 0; i < FW_SLOTS; i++) {
		__u64 pi;

		if (i >= n)
			break;
		pi = p->slots[i].parent_inode;
		if (!pi)
			continue;
		if (moved) {
			struct dentry *a = fw_alias((struct inode *)p->slots[i].inode);

			if (!a || !fw_hashed(a))
				continue;
		}
		for (int j = 0; j < FW_SLOTS; j++)
			if (j < n && j != i && p->slots[j].inode == pi) {
				*dir = j;
				return i;
			}
	}
	return -1;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(fw_sys_exit, struct pt_regs *regs, long ret)
{
	long nr = regs->orig_ax;
	struct fw_sys s = fw_sys_of(nr);
	struct fw_pending *p = 0;
	struct task_struct *t;
	struct dentry *a;
	struct fw_plan *pl;
	struct fw_cpu *c;
	struct file *f;
	int i, dir = 0;
	__u32 npaths = 1;

	if (!s.kind)
		return 0;
	t = bpf_get_current_task_btf();
	if (!fw_tgid_ok(t) || !(c = fw_cpu_get()))
		return 0;
	if (s.cls != FW_C_FD_ARG) {
		p = bpf_task_storage_get(&pending, t, 0, 0);
		if (!p || p->nr != nr) {
			c->stats.no_entry++;
			return 0;
		}
		p->nr = 0;
	}
	if (ret < 0) {
		c->stats.failed++;
		return 0;
	}
	pl = &c->plan;
	__builtin_memset(pl, 0, sizeof(*pl));
	pl->name_slot[0] = -1;
	pl->name_slot[1] = -1;
	pl->pos[0] = -1;
	pl->pos[1] = -1;
	if (nr == 263 && p && (p->args[2] & AT_REMOVEDIR_))
		s.kind = FW_EV_RMDIR;
	if (nr == 280 && p && !p->args[1]) /* utimensat(fd, NULL, ...) */
		s.cls = FW_C_FD_ARG;
	if (p && s.cls != FW_C_FD_RET && s.cls != FW_C_FD_ARG)
		pl->hint = (__u64)fw_hint(t, p, s);

	switch (s.cls) {
	case FW_C_FD_RET:
	case FW_C_FD_ARG:
		f = fw_fd_file(t, s.cls == FW_C_FD_RET ? ret : (int)regs->di);
		if (!f)
			goto unresolved;
		a = BPF_CORE_READ(f, f_path.dentry);
		pl->dentry[0] = (__u64)a;
		pl->mnt[0] = (__u64)fw_real_mount(BPF_CORE_READ(f, f_path.mnt));
		/* open: created if its directory's ctime changed. */
		if (p && s.cls == FW_C_FD_RET) {
			__u64 pi = (__u64)BPF_CORE_READ(a, d_parent, d_inode);

			for (int j = 0; j < FW_SLOTS; j++)
				if (j < p->nslots && p->slots[j].inode == pi)
					pl->extra[0] = FW_F_CREATED;
		}
		break;
	case FW_C_NEW:
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
	fw_path(0);
	if (npaths > 1)
		fw_path(1);
	if (!pl->watched) {
		c->stats.filtered++;
		return 0;
	}
	/* --follow: moved out of the watched tree, the entry itself is watched
	 * from now on (its descendants too, by the ancestor check). */
	if (follow && s.cls == FW_C_MOVE && pl->watched_b[1] && !pl->watched_b[0]) {
		struct fw_key k = { .dev = pl->dev, .ino = pl->ino };
		__u32 one = 1;

		bpf_map_update_elem(&watched, &k, &one, BPF_ANY);
	}
	fw_emit(s.kind, nr, ret);
	return 0;
unresolved:
	/* Nothing to place it by: reported (flagged), never dropped. */
	pl->flags = FW_F_UNRESOLVED;
	fw_emit(s.kind, nr, ret);
	return 0;
}
