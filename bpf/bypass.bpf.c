// SPDX-License-Identifier: GPL-2.0
/*
 * harrier bypass: keeps getpid() & co. of registered threads in a frozen,
 * world-readable BPF_F_MMAPABLE array (see bpf/include/bypass.h).
 *
 * Hooks (none of them is a syscall tracepoint, so syscalls cost the same as
 * without the service):
 *   uprobe  harrier_bypass_register(nonce)  fills a slot for `current` only
 *   uprobe  harrier_bypass_report(b, f)     per-uid counters at process exit
 *   tp_btf  task_newtask                    CLONE_VM children sharing the TLS
 *   tp_btf  sched_process_exec              frees the slot (new image)
 *   tp_btf  sched_process_exit              frees the slot, ppid epoch
 *   raw_tp  hb_disable (never attached)     run by `stop` through BPF_PROG_TEST_RUN
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bypass.h"

char LICENSE[] SEC("license") = "GPL";

#define CLONE_VM    0x00000100ULL
#define CLONE_VFORK 0x00004000ULL
#define PF_EXITING  0x00000004U

/* Set by the loader before load. */
const volatile __u32 nslots = 1024;
const volatile __u32 quota = 128;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1025); /* nslots + 1, set by the loader */
	__type(key, __u32);
	__type(value, union hb_entry);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hb_task);
} task_slot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct hb_uid_stats);
} uid_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HB_ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 i)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &i);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline struct hb_header *header(void)
{
	__u32 k = 0;
	union hb_entry *e = bpf_map_lookup_elem(&slots, &k);
	return e ? &e->h : NULL;
}

static __always_inline struct hb_slot *slot_at(__u32 idx)
{
	union hb_entry *e;
	if (idx == 0 || idx > nslots)
		return NULL;
	e = bpf_map_lookup_elem(&slots, &idx);
	return e ? &e->s : NULL;
}

static __always_inline struct hb_uid_stats *uid_stats_get(__u32 uid)
{
	struct hb_uid_stats zero = {}, *us = bpf_map_lookup_elem(&uid_stats, &uid);
	if (us)
		return us;
	bpf_map_update_elem(&uid_stats, &uid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&uid_stats, &uid);
}

/* Frees a slot. Only the owning task (or its parent in task_newtask, while the
 * owner is in clone()) gets here, so there is a single writer per slot. */
static __always_inline void free_slot(__u32 idx, __u32 why)
{
	struct hb_slot *s = slot_at(idx);
	struct hb_uid_stats *us;
	if (!s)
		return;
	__sync_fetch_and_add(&s->seq, 1); /* odd: readers fall back */
	s->nonce = 0;
	s->flags = 0;
	__sync_fetch_and_add(&s->seq, 1);
	us = bpf_map_lookup_elem(&uid_stats, &s->charged_uid);
	if (us)
		__sync_fetch_and_add(&us->in_use, -1);
	__sync_lock_test_and_set(&s->owner, 0); /* release the claim last */
	stat_inc(why);
}

/* pid_nr_ns(): the number of `pid` in namespace `ns` at `lvl`, 0 if invisible. */
static __always_inline int pid_nr_in(struct pid *pid, struct pid_namespace *ns, __u32 lvl)
{
	struct upid up = {};
	if (!pid || lvl > BPF_CORE_READ(pid, level))
		return 0;
	bpf_probe_read_kernel(&up, sizeof(up), &pid->numbers[lvl & 31]);
	return up.ns == ns ? up.nr : 0;
}

/* from_kuid() for namespaces with at most 5 extents; returns -1 when the id is
 * unmapped or the map is empty/large (the library then calls the real function:
 * an empty map may still be written later, which no hook would see).
 * Field by field with CO-RE, never a stack copy of the whole map: its layout
 * moved (6.1: nr_extents first, extents at 8, 72 bytes; 6.18: extents first,
 * 64 bytes), and a copy sized by our vmlinux.h is too short on 6.1, where the
 * verifier refused the relocated reads past its end (EACCES at load). */
static __always_inline __s64 map_id_up(struct uid_gid_map *m, __u32 id)
{
	__u32 n = BPF_CORE_READ(m, nr_extents);

	if (n == 0 || n > 5)
		return -1;
	for (int i = 0; i < 5; i++) {
		struct uid_gid_extent x = {};

		if (i >= n)
			break;
		bpf_core_read(&x, sizeof(x), &m->extent[i]);
		if (id >= x.lower_first && id - x.lower_first < x.count)
			return (__s64)x.first + (id - x.lower_first);
	}
	return -1;
}

/* Writes the caller's own view into its claimed slot. */
static __always_inline void fill_slot(struct hb_slot *s, struct task_struct *task,
				      __u64 nonce, __u32 kuid, struct hb_header *h)
{
	struct pid *tpid = BPF_CORE_READ(task, thread_pid);
	__u32 lvl = BPF_CORE_READ(tpid, level);
	struct upid self = {};
	struct pid_namespace *ns;
	struct task_struct *parent;
	const struct cred *cred = BPF_CORE_READ(task, cred);
	struct user_namespace *uns = BPF_CORE_READ(cred, user_ns);
	__u32 flags = 0, epoch;
	__s32 ppid = 0;

	bpf_probe_read_kernel(&self, sizeof(self), &tpid->numbers[lvl & 31]);
	ns = self.ns;

	/* Read the epoch before the parent: a parent that exits later bumps it;
	 * one already exiting (PF_EXITING precedes the bump) is not cached. */
	epoch = __sync_fetch_and_add(&h->ppid_epoch, 0);
	parent = BPF_CORE_READ(task, real_parent);
	if (!(BPF_CORE_READ(parent, flags) & PF_EXITING)) {
		ppid = pid_nr_in(BPF_CORE_READ(parent, signal, pids[PIDTYPE_TGID]), ns, lvl);
		flags |= HB_F_PPID;
	}

	__u32 uid = BPF_CORE_READ(cred, uid.val), euid = BPF_CORE_READ(cred, euid.val);
	__u32 gid = BPF_CORE_READ(cred, gid.val), egid = BPF_CORE_READ(cred, egid.val);
	if (BPF_CORE_READ(uns, level) == 0) {
		flags |= HB_F_IDS;
	} else {
		__s64 u = map_id_up(&uns->uid_map, uid), eu = map_id_up(&uns->uid_map, euid);
		__s64 g = map_id_up(&uns->gid_map, gid), eg = map_id_up(&uns->gid_map, egid);
		if (u >= 0 && eu >= 0 && g >= 0 && eg >= 0) {
			uid = u; euid = eu; gid = g; egid = eg;
			flags |= HB_F_IDS;
		}
	}

	__sync_fetch_and_add(&s->seq, 1); /* odd */
	s->pid = pid_nr_in(BPF_CORE_READ(task, signal, pids[PIDTYPE_TGID]), ns, lvl);
	s->tid = self.nr;
	s->ppid = ppid;
	s->ppid_epoch = epoch;
	s->uid = uid;
	s->euid = euid;
	s->gid = gid;
	s->egid = egid;
	s->charged_uid = kuid;
	s->flags = flags;
	s->nonce = nonce;
	__sync_fetch_and_add(&s->seq, 1); /* even: published */
}

/* The library calls harrier_bypass_register(nonce) from each thread. The slot
 * is filled for current only; nothing the caller passes but the nonce is used,
 * and a nonce already present in its window is refused, so a thread that read
 * another thread's nonce from the map cannot make it find a forged slot. */
SEC("uprobe")
int BPF_UPROBE(hb_register, __u64 nonce)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct hb_header *h = header();
	struct hb_task *ts;
	struct hb_uid_stats *us;
	__u32 kuid, base, idx = 0, n = nslots;

	if (!h || nonce == 0 || n == 0)
		return 0;
	if (h->disabled) {
		stat_inc(HB_ST_REFUSED_DISABLED);
		return 0;
	}
	ts = bpf_task_storage_get(&task_slot, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!ts)
		return 0;
	kuid = BPF_CORE_READ(task, cred, uid.val);
	us = uid_stats_get(kuid);
	if (!us)
		return 0;
	if (ts->flags & (HB_T_BORROWED | HB_T_TAINTED)) {
		stat_inc(HB_ST_REFUSED_SHARED_TLS);
		__sync_fetch_and_add(&us->refused, 1);
		return 0;
	}
	if (ts->slot) { /* re-registration: give the old slot back first */
		free_slot(ts->slot, HB_ST_FREED_REREGISTER);
		ts->slot = 0;
	}
	if (__sync_fetch_and_add(&us->in_use, 1) >= quota) {
		__sync_fetch_and_add(&us->in_use, -1);
		__sync_fetch_and_add(&us->refused, 1);
		stat_inc(HB_ST_REFUSED_QUOTA);
		return 0;
	}

	base = nonce % n;
#pragma unroll
	for (int i = 0; i < HB_WINDOW; i++) {
		struct hb_slot *s = slot_at(1 + (base + i) % n);
		if (s && s->nonce == nonce)
			goto refuse_dup;
	}
#pragma unroll
	for (int i = 0; i < HB_WINDOW; i++) {
		__u32 j = 1 + (base + i) % n;
		struct hb_slot *s = slot_at(j);
		if (s && s->owner == 0 &&
		    __sync_val_compare_and_swap(&s->owner, 0, (__u64)task) == 0) {
			idx = j;
			fill_slot(s, task, nonce, kuid, h);
			break;
		}
	}
	if (!idx) {
		__sync_fetch_and_add(&us->in_use, -1);
		__sync_fetch_and_add(&us->refused, 1);
		stat_inc(HB_ST_REFUSED_FULL);
		return 0;
	}
	ts->slot = idx;
	__sync_fetch_and_add(&us->registrations, 1);
	stat_inc(HB_ST_REGISTERED);
	return 0;

refuse_dup:
	__sync_fetch_and_add(&us->in_use, -1);
	__sync_fetch_and_add(&us->refused, 1);
	stat_inc(HB_ST_REFUSED_DUP);
	return 0;
}

/* Called once at exit by processes that registered; counters only. */
SEC("uprobe")
int BPF_UPROBE(hb_report, __u64 bypassed, __u64 fallbacks)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct hb_uid_stats *us = uid_stats_get(BPF_CORE_READ(task, cred, uid.val));
	if (us) {
		__sync_fetch_and_add(&us->reported_bypassed, bypassed);
		__sync_fetch_and_add(&us->reported_fallbacks, fallbacks);
	}
	stat_inc(HB_ST_REPORTS);
	return 0;
}

/* A CLONE_VM child that keeps the parent's TLS (vfork, posix_spawn, raw clone
 * without a new TLS) would read the parent's slot: free that slot, forbid the
 * child to register (until exec), and forbid the parent too unless it is
 * suspended until the child execs or exits (CLONE_VFORK). Threads made by
 * pthread_create have their own TLS and are not affected. */
SEC("tp_btf/task_newtask")
int BPF_PROG(hb_newtask, struct task_struct *task, u64 clone_flags)
{
	struct task_struct *cur;
	struct hb_task *ts;

	if (!(clone_flags & CLONE_VM))
		return 0;
	cur = bpf_get_current_task_btf();
	if (task->thread.fsbase != cur->thread.fsbase || !cur->mm)
		return 0;
	ts = bpf_task_storage_get(&task_slot, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts)
		ts->flags |= HB_T_BORROWED;
	ts = bpf_task_storage_get(&task_slot, cur, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (ts) {
		if (ts->slot) {
			free_slot(ts->slot, HB_ST_FREED_CLONE_VM);
			ts->slot = 0;
		}
		if (!(clone_flags & CLONE_VFORK))
			ts->flags |= HB_T_TAINTED;
	}
	return 0;
}

/* New image, new TLS: the old slot is useless and the flags no longer apply. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(hb_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	struct hb_task *ts = bpf_task_storage_get(&task_slot, p, 0, 0);
	if (!ts)
		return 0;
	if (ts->slot) {
		free_slot(ts->slot, HB_ST_FREED_EXEC);
		ts->slot = 0;
	}
	ts->flags = 0;
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(hb_exit, struct task_struct *task, bool group_dead)
{
	struct hb_task *ts = bpf_task_storage_get(&task_slot, task, 0, 0);
	struct hb_header *h;

	if (ts && ts->slot) {
		free_slot(ts->slot, HB_ST_FREED_EXIT);
		ts->slot = 0;
	}
	/* Children are reparented after this tracepoint; if they move to another
	 * process their getppid() changes. Invalidate every cached ppid. */
	if (task->children.next != &task->children) {
		h = header();
		if (h) {
			__sync_fetch_and_add(&h->ppid_epoch, 1);
			stat_inc(HB_ST_PPID_EPOCH);
		}
	}
	return 0;
}

static long clear_one(__u32 i, void *ctx)
{
	struct hb_slot *s = slot_at(i + 1);
	if (s) {
		__sync_fetch_and_add(&s->seq, 1);
		s->nonce = 0;
		s->flags = 0;
		__sync_fetch_and_add(&s->seq, 1);
	}
	return 0;
}

/* Run by `harrier bypass stop` with BPF_PROG_TEST_RUN: the map is frozen, so
 * only a BPF program can mark the slots invalid. */
SEC("raw_tp")
int hb_disable(void *ctx)
{
	struct hb_header *h = header();
	if (!h)
		return 1;
	__sync_lock_test_and_set(&h->disabled, 1);
	bpf_loop(nslots, clear_one, NULL, 0);
	return 0;
}
