/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Per-CPU producer plumbing shared by capture.bpf.c (through emit.h) and
 * fswatch.bpf.c: the per-CPU state map (counters and scratch, one entry) and
 * the per-CPU array rings (struct hr_aring, harrier.h) with their claim and
 * publish. Self-contained: the program passes its ring map and the ring
 * geometry user space set before load (size - 1, and the last offset a
 * record may start at).
 */
#ifndef HARRIER_PERCPU_H
#define HARRIER_PERCPU_H

/* The per-CPU state: one entry of `value_type` per CPU, reached with HR_CPU_STATE(). */
#define HR_CPU_STATE_MAP(value_type)					\
	struct {							\
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);		\
		__uint(max_entries, 1);					\
		__type(key, __u32);					\
		__type(value, value_type);				\
	} cpu_state SEC(".maps")

#define HR_CPU_STATE() bpf_map_lookup_elem(&cpu_state, &(__u32){ 0 })

/* Per-CPU rings, entry i for CPU i; user space sets the value size (ring
 * bytes) and the entry count before load. mmapable: the reader maps them. */
#define HR_ARINGS_MAP							\
	struct {							\
		__uint(type, BPF_MAP_TYPE_ARRAY);			\
		__uint(map_flags, BPF_F_MMAPABLE);			\
		__uint(key_size, 4);					\
		__uint(value_size, HR_ARING_DATA + 65536);		\
		__uint(max_entries, 1);					\
	} arings SEC(".maps")

/*
 * Room for `need` bytes in ring `idx` of `rings`: the record's address, its
 * ring and start (for hr_aring_commit), or NULL with the reason counted in
 * drops[HR_DROP_*]. A record never starts past aring_last, so it needs no
 * wrap handling; the single producer (this CPU, programs never nest) needs
 * no lock.
 */
static __always_inline __u8 *hr_aring_reserve(void *rings, __u32 idx, __u64 mask, __u64 last, __u64 need,
					      __u64 *drops, struct hr_aring **ring, __u64 *start_out)
{
	struct hr_aring *r = bpf_map_lookup_elem(rings, &idx);
	__u64 head, off, start;

	if (!r) {
		drops[HR_DROP_NO_RING]++;
		return 0;
	}
	head = r->head;
	off = head & mask;
	start = head;
	if (off > last) {
		start += mask + 1 - off;
		off = 0;
	}
	if (start + need - *(volatile __u64 *)&r->tail > mask + 1) {
		drops[HR_DROP_RING_FULL]++;
		return 0;
	}
	*ring = r;
	*start_out = start;
	return r->data + off;
}

/* Makes a record of `len` bytes at `start` visible: x86 keeps stores in
 * order, so the compiler barrier is all that orders it before the new head. */
static __always_inline void hr_aring_commit(struct hr_aring *r, __u64 start, __u64 len)
{
	asm volatile("" ::: "memory");
	*(volatile __u64 *)&r->head = start + ((len + 7) & ~7ULL);
}

/*
 * For a reader that sleeps until woken (fswatch): whether the commit that
 * moved ring r's head to `head` should wake it. Due once the fill (head -
 * tail) is `level` or more, and then once per tail value: pad1[0] keeps tail
 * + 1 from the last time it was due, so a reader that has not drained since
 * is not woken again, and one that has is woken by the next commit above the
 * level. One load and a compare per event below the level. Capture's rings
 * never call it (their pad1 stays unused there).
 */
static __always_inline bool hr_aring_wake_due(struct hr_aring *r, __u64 head, __u64 level)
{
	__u64 tail = *(volatile __u64 *)&r->tail;

	if (head - tail < level || r->pad1[0] == tail + 1)
		return false;
	r->pad1[0] = tail + 1;
	return true;
}

#endif
