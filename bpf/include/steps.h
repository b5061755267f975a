/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Step clocks for `harrier-bench handler-steps`: where one syscall's entry
 * and exit handlers spend their time. Off (step_clock 0) in every real run:
 * the verifier then drops every mark. On, the handlers of syscall step_nr
 * read the clock at the end of each step and add the time since the last
 * mark to step_ns[step]; each figure then holds one clock read too, which
 * HR_STEP_CLOCK measures (two reads back to back) so user space can take
 * it off. Expects struct hr_cpu's step_t and step_on (capture.bpf.c).
 */
#ifndef HARRIER_STEPS_H
#define HARRIER_STEPS_H

/* Exit: the time since the previous mark, named by what ends there. */
#define HR_STEP_BEGIN	0	/* early filter, CPU state, task, clock, ring room, header */
#define HR_STEP_STASH	1	/* the entry copy looked up (task storage) */
#define HR_STEP_ARGS	2	/* arguments and the copied path into the record, up to the walk */
#define HR_STEP_WALK	3	/* the kernel's path of the new fd (dentry walk, path cache) */
#define HR_STEP_FIELDS	6	/* the fields after the walk (all of them if none) */
#define HR_STEP_FILTER	4	/* kernel filter and enforcement */
#define HR_STEP_SUBMIT	5	/* length, flags, publish */
/* Entry. */
#define HR_STEP_ENTER_STORE	8	/* this thread's task storage, made on first use */
#define HR_STEP_ENTER_COPY	9	/* the pointer arguments copied from user memory */
#define HR_STEP_CLOCK	15	/* two clock reads back to back: one mark's own cost */
#define HR_STEPS	16

const volatile bool step_clock = 0;
const volatile __u32 step_nr = 0;

struct hr_step_sum {
	__u64 ns;
	__u64 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HR_STEPS);
	__type(key, __u32);
	__type(value, struct hr_step_sum);
} step_ns SEC(".maps");

static __always_inline void hr_step_add(__u32 step, __u64 ns)
{
	struct hr_step_sum *s = bpf_map_lookup_elem(&step_ns, &step);

	if (s)
		s->ns += ns, s->n++;
}

/* The handler of syscall nr starts its steps, once it has its CPU state
 * (the few loads before are in no step: a clock read held across them
 * cost 6.1's verifier the bounds of a spilled register). */
static __always_inline void hr_step_start(struct hr_cpu *c, __u32 nr)
{
	if (!step_clock)
		return;
	c->step_on = nr == step_nr;
	c->step_t = bpf_ktime_get_ns();
}

static __always_inline void hr_step(struct hr_cpu *c, __u32 step)
{
	if (!step_clock || !c->step_on)
		return;
	hr_step_add(step, bpf_ktime_get_ns() - c->step_t);
	c->step_t = bpf_ktime_get_ns();
}

/* The handler's last mark, then one mark's own cost measured (outside
 * every step); later marks on this CPU wait for their handler's start. */
static __always_inline void hr_step_end(struct hr_cpu *c, __u32 step)
{
	__u64 a;

	if (!step_clock || !c->step_on)
		return;
	hr_step(c, step);
	a = bpf_ktime_get_ns();
	hr_step_add(HR_STEP_CLOCK, bpf_ktime_get_ns() - a);
	c->step_on = 0;
}

#endif
