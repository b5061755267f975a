/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Paths an event carries that come from the kernel's dentry tree, not from
 * the caller: an fd's file (an open's `fullpath`), the exe, the cwd. The walk
 * is dpath.h's, through the shared path cache (tree/dircache.h). Part of
 * emit.h (included from it: it uses the event writer above it).
 */
#ifndef HARRIER_EMIT_PATH_H
#define HARRIER_EMIT_PATH_H

/* ---- paths resolved in the kernel, from the dentry tree (dpath.h) ---- */

static long hr_walk_cb(__u32 i, void *ctx)
{
	struct hr_cpu *c = hr_cpu_get();

	if (!c || !hr_dstep(&c->walk, c->path))
		return !c;
	c->walk.flags |= HR_DW_DONE;
	return 1;
}

/*
 * With kf_ask, before any step: whether the file's own directory is cached
 * and no kernel filter path can match below it (kfdirs.h). Such an open
 * copies no name at all. A file its walk leaves by anything but a name (a
 * mount's root, the task's root) is left to the walk.
 */
static __always_inline bool hr_dwalk_kf_clear(struct hr_cpu *c, struct task_struct *t)
{
	struct hr_dwalk *w = &c->walk;
	struct hr_kf_last *last = &c->kf_last;
	__u64 d = w->dentry, mnt = w->mnt, parent = 0, gen;
	__u32 g = *(volatile __u32 *)&kf_gen;
	struct hr_dvalid want;
	struct hr_dcval *v;
	struct hr_dkey k;
	struct mount *m;
	__s64 busy;

	if (hr_up(&d, &mnt, w->root_dentry, w->root_mnt, &parent) != HR_UP_NAME)
		return false;
	m = HR_CAST(mnt, struct mount);
	hr_dkey_of(&k, HR_CAST(parent, struct dentry), m);
	gen = hr_dc_gen(&busy);
	if (busy || !k.mnt_uid || !g)
		return false;
	hr_dvalid_now(&want, m, t, gen);
	if (last->kf_gen == g && last->k.mnt_uid == k.mnt_uid && last->k.ino == k.ino &&
	    last->k.dev == k.dev && hr_dvalid_same(&last->v, &want))
		return true;
	v = bpf_map_lookup_elem(&dirpaths, &k);
	if (!v || !hr_dvalid_same(&v->v, &want) || !v->len || !hr_kf_below_clear(v, v->len) ||
	    !hr_dc_kept(v, gen))
		return false;
	/* The generation read before the entry's: a verdict older than the
	 * filter now is never remembered as this one's. */
	last->k = k;
	last->v = want;
	last->kf_gen = g;
	return true;
}

/*
 * The rest of walk w through the path cache (tree/dircache.h): the first
 * dc_after steps as usual (one with kf_ask), then, unless the root is two names away or less
 * (a lookup costs about four steps), the directory reached is looked up; on a hit its cached path goes
 * below the names so far, on a miss the walk goes on to the root and what it
 * wrote from that directory up is stored, if nothing can have moved a
 * directory meanwhile (inval.h: busy, the generation) and every directory
 * climbed is one that only this kernel's syscalls move. With w->kf_ask, a
 * file whose directory no kernel filter path can match below is not walked
 * (HR_DW_KF_CLEAR, kfdirs.h): the event is kept back.
 */
static __always_inline void hr_dwalk_cached(struct hr_cpu *c, struct task_struct *t)
{
	struct hr_dwalk *w = &c->walk;
	struct hr_dvalid want;
	struct hr_dcval *v;
	struct hr_dkey k;
	struct dentry *d;
	struct mount *m;
	__s32 start, at;
	__u64 gen, n, up, at_d;
	__s64 busy;
	__u32 len;

	if (w->kf_ask && hr_dwalk_kf_clear(c, t)) {
		c->stats.dir_clear++;
		w->flags |= HR_DW_KF_CLEAR | HR_DW_DONE;
		return;
	}
	/* Otherwise it stores the file's own directory, for the next such open. */
	bpf_loop(w->kf_ask ? 1 : dc_after, hr_walk_cb, 0, 0);
	if (w->flags & HR_DW_DONE)
		return;
	/* Two names or fewer to the root: walking them costs less than a lookup
	 * (unless the lookup may end the walk there). */
	/* Locals in hr_kread: on 6.1 BPF_CORE_READ would relocate w's fields too. */
	at_d = w->dentry;
	up = (__u64)hr_kread(at_d, struct dentry, d_parent);
	if (at_d == w->root_dentry ||
	    (!w->kf_ask && (up == w->root_dentry ||
			    (__u64)hr_kread(up, struct dentry, d_parent) == w->root_dentry))) {
		bpf_loop(HR_PATH_MAX / 2, hr_walk_cb, 0, 0);
		return;
	}
	d = HR_CAST(w->dentry, struct dentry);
	m = HR_CAST(w->mnt, struct mount);
	hr_dkey_of(&k, d, m);
	gen = hr_dc_gen(&busy);
	hr_dvalid_now(&want, m, t, gen);
	if (!busy && k.mnt_uid) {
		v = bpf_map_lookup_elem(&dirpaths, &k);
		if (v && hr_dvalid_same(&v->v, &want)) {
			len = v->len;
			at = w->pos - (__s32)len;
			if (len > 0 && len < HR_DC_MAX && at >= 0) {
				n = len;
				hr_clamp(n, HR_DC_MAX - 1);
				bpf_probe_read_kernel(c->path + HR_DHEAD + (at & (HR_PATH_MAX - 1)), n, v->path);
				if (hr_dc_kept(v, gen)) {
					c->stats.dir_hits++;
					w->pos = at;
					return;
				}
			}
		}
	}
	c->stats.dir_misses++;
	start = w->pos;
	w->check = 1;
	bpf_loop(HR_PATH_MAX / 2, hr_walk_cb, 0, 0);
	if (busy || !k.mnt_uid || (w->flags & (HR_DW_DISCONNECTED | HR_DW_DETACHED | HR_DW_TRUNCATED |
					       HR_DW_UNSURE)) || !(w->flags & HR_DW_ROOT))
		return;
	at = w->pos;
	len = start - at;
	if (len == 0 || len >= HR_DC_MAX || at < 0)
		return;
	c->dc.v = want;
	c->dc.len = len;
	c->dc.teach_in = 0;
	c->dc.kf_gen = 0;
	n = len;
	hr_clamp(n, HR_DC_MAX - 1);
	bpf_probe_read_kernel(c->dc.path, n, c->path + HR_DHEAD + (at & (HR_PATH_MAX - 1)));
	bpf_map_update_elem(&dirpaths, &k, &c->dc, BPF_ANY);
}

static __always_inline __u64 hr_fd_file(struct hr_em *em, __s64 fd)
{
	return hr_fd_file_of(em->task, fd);
}

/* Whether the directory of the file behind fd is cached and no kernel filter
 * path can match below it (hr_dwalk_kf_clear). Inlined, unlike the walks: it
 * has no loop for the verifier to go through again, and a call to
 * hr_dwalk_run cost a BPF-to-BPF call, the CPU state and the task again. */
static __always_inline bool hr_fd_dir_clear(struct hr_em *em, __s64 fd)
{
	struct hr_cpu *c = em->cpu;
	__u64 f = hr_fd_file(em, fd);

	if (!f)
		return false;
	return hr_dwalk_init(&c->walk, hr_kread(f, struct file, f_path.dentry),
			     hr_kread(f, struct file, f_path.mnt), em->task) &&
	       hr_dwalk_kf_clear(c, em->task);
}

/* What a path field names (hr_dwalk_run's `what`). */
#define HR_WALK_NONE 0	/* an empty field */
#define HR_WALK_FD 1	/* the file behind a descriptor */
#define HR_WALK_EXE 2	/* the task's executable */
#define HR_WALK_CWD 3	/* its working directory */

/*
 * Walks what `what` names, as the current task sees it, into this CPU's
 * path buffer; 0 if there is nothing to walk. A global function: the
 * verifier checks the walk once per program, not again at each call site
 * with that caller's state (execve's exit has three walks; inlined, they
 * took its load from 0.2 to 5+ s on 6.18). Its arguments are scalars, as
 * global functions need.
 */
__attribute__((noinline)) int hr_dwalk_run(int what, __s64 fd)
{
	struct hr_cpu *c = hr_cpu_get();
	struct task_struct *t;
	void *d = 0, *m = 0;
	__u64 f = 0;

	if (!c)
		return 0;
	/* The caller's task, as plain loads read it (a global function takes
	 * no pointers to kernel objects): one helper call fewer per walk. */
	t = hr_has_cast() ? bpf_core_cast((void *)c->walk.task, struct task_struct)
			  : bpf_get_current_task_btf();
	if (what == HR_WALK_CWD) {
		d = t->fs->pwd.dentry;
		m = t->fs->pwd.mnt;
	} else if (what == HR_WALK_EXE || what == HR_WALK_FD) {
		f = what == HR_WALK_EXE ? (__u64)t->mm->exe_file : hr_fd_file_of(t, fd);
		if (f) {
			d = hr_kread(f, struct file, f_path.dentry);
			m = hr_kread(f, struct file, f_path.mnt);
		}
	}
	if (!hr_dwalk_init(&c->walk, d, m, t))
		return 0;
	if (dircache)
		hr_dwalk_cached(c, t);
	else
		bpf_loop(HR_PATH_MAX / 2, hr_walk_cb, 0, 0);
	return 1;
}

#define HR_DPATH_WORDS 8	/* a walked path this many words long goes by plain stores */

/* The absolute path hr_dwalk_run finds, as a variable field ("" for none).
 * kf_ask: the kernel filter keeps the event by this path alone; a walk that
 * meets a directory no filter path can match below stops there, leaves the
 * field empty and marks the event kept back (em->kf_unused). */
static __always_inline void hr_put_dpath(struct hr_em *em, int what, __s64 fd, bool kf_ask)
{
	struct hr_cpu *c = em->cpu;
	__u8 *slot = hr_var_begin(em);
	__u8 *src;
	__u32 n, pos;

	if (!slot)
		return;
	c->walk.task = (__u64)em->task;
	c->walk.kf_ask = kf_ask;
	if (!hr_dwalk_run(what, fd)) {
		hr_var_end(em, slot, 0);
		return;
	}
	if (c->walk.flags & HR_DW_KF_CLEAR) {
		em->kf_unused = 1;
		hr_var_end(em, slot, 0);
		return;
	}
	pos = c->walk.pos;
	if (pos >= HR_PATH_MAX) {
		slot[2] = '/';
		hr_var_end(em, slot, 1);
		return;
	}
	/* A mask, not a compare: clang may drop a clamp the verifier needs. The
	 * scratch has room past HR_PATH_MAX for what the mask lets through. */
	n = (HR_PATH_MAX - pos) & (2 * HR_PATH_MAX - 1);
	src = c->path + HR_DHEAD + (pos & (HR_PATH_MAX - 1));
	/* A short path by plain loads and stores, as the entry copy's (a helper
	 * call costs more than the copy); what lies past it is the scratch's
	 * room and lands in the record's. */
	if (n <= HR_DPATH_WORDS * 8) {
#pragma unroll
		for (int i = 0; i < HR_DPATH_WORDS; i++)
			((__u64 *)(slot + 2))[i] = ((const __u64 *)src)[i];
	} else {
		bpf_probe_read_kernel(slot + 2, n, src);
	}
	hr_var_end(em, slot, n);
}

/* What an open really opened: the file behind the returned descriptor.
 * Syscall nr's filter is asked, without a path, whether it keeps the event
 * anyway (a clause without a path holds): if not, the walk may stop early.
 * Its fixed parameters (the flags) precede this last one, so are written. */
static __always_inline void hr_put_fdpath_ret(struct hr_em *em, __u32 nr)
{
	bool kf_ask = dircache && em->ret >= 0 && hr_kf_unused(em, nr, 0, 0);

	hr_step(em->cpu, HR_STEP_ARGS);
	hr_put_dpath(em, HR_WALK_FD, em->ret, kf_ask);
	hr_step(em->cpu, HR_STEP_WALK);
}

#endif
