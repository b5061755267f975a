/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The directory path cache: per directory (tree.h's key), its absolute path
 * up to HR_DC_MAX bytes as the task's root sees it, so that a walk up the
 * dentry tree stops at a directory it has met before: the cost no longer
 * grows with depth. Capture's walks (dpath.h) and fswatch's walk with names
 * (fswatch/cache.h) use it. An entry holds while the generation, mount
 * namespace and root it was stored with (tree.h's hr_dvalid) still hold,
 * which inval.h's hooks move on every change that can move or free a
 * directory; while a rename is in flight (busy) it is neither read nor
 * written. Per CPU: an entry is only read and written by its CPU (another
 * CPU's eviction zeroes it, which the generation check after the copy sees).
 * User space sets the size (1: off).
 */
#ifndef HARRIER_TREE_DIRCACHE_H
#define HARRIER_TREE_DIRCACHE_H

#define HR_DC_MAX 1024	/* the longest directory path kept */

struct hr_dcval {
	struct hr_dvalid v;
	__u32 len;
	__u32 teach_in;	/* fswatch: hits until this entry's next event teaches the reader (dirrefs.h) */
	__u32 kf_gen;	/* capture: the kernel filter generation kf_clear was made for (kfdirs.h) */
	__u32 kf_clear;	/* no kernel filter path can match below this directory */
	char path[HR_DC_MAX];
};

/* Capture's memo, per CPU, of the last directory whose entry said no kernel
 * filter path can match below it (kfdirs.h): opens cluster in a few
 * directories, and comparing the key and what the entry must match costs
 * less than the lookup (~60 ns here). Exact as the entry: it holds under the
 * same key, validity (hr_dvalid) and filter generation. */
struct hr_kf_last {
	struct hr_dkey k;
	struct hr_dvalid v;
	__u32 kf_gen;		/* 0: empty */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct hr_dkey);
	__type(value, struct hr_dcval);
} dirpaths SEC(".maps");

/* The generation, then busy (inval.h writes them the other way round): a
 * walk that sees a later generation also sees busy, and stores nothing. */
static __always_inline __u64 hr_dc_gen(__s64 *busy)
{
	__u64 gen = *(volatile __u64 *)&hr_tree_gen;

	asm volatile("" ::: "memory");
	*busy = *(volatile __s64 *)&hr_tree_busy;
	return gen;
}

/* Whether entry v, already copied out, was still this generation's after
 * the copy (an eviction by another CPU zeroes this CPU's copy). */
static __always_inline bool hr_dc_kept(struct hr_dcval *v, __u64 gen)
{
	asm volatile("" ::: "memory");
	return *(volatile __u64 *)&v->v.gen == gen;
}

#endif
