/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Directories below which no kernel filter path (kfilter.h's kf_paths) can
 * match: an open of a file there that is kept or not by its path alone is
 * kept back when its file's directory is in the path cache, before any walk
 * step, path copy or trie lookup (emit_path.h). The verdict lives in the
 * directory's cache entry (tree/dircache.h) beside the filter generation it
 * was made for (kf_gen), so it is made once per directory and filter. User
 * space sets kf_gen to 0 (no verdicts) before it rewrites any filter map and
 * to a new generation once all of them are written (kfilter.rs).
 *
 * kf_dirs holds every kf_paths entry (of any syscall and clause, an exact
 * name as a prefix), and every prefix of one that ends in '/', each with
 * its length and whether some entry is a prefix of it (kfilter.rs,
 * `dir_trie`). A directory D is clear when "D/" has no match, or its
 * longest match is shorter than "D/" and covered by no entry: no entry is
 * then a prefix of D/ (it would cover the match) and none extends D/ (D/
 * would be in the trie). A D/ longer than any entry is looked up by its
 * first HR_KF_PATH bytes, which decide the same.
 */
#ifndef HARRIER_KFDIRS_H
#define HARRIER_KFDIRS_H

struct hr_kf_dir_key {
	__u32 prefixlen;
	__u8 path[HR_KF_PATH + 4];	/* room for a mask's bound */
};

struct hr_kf_dir_node {
	__u16 len;
	__u8 covered;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__type(key, struct hr_kf_dir_key);
	__type(value, struct hr_kf_dir_node);
} kf_dirs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hr_kf_dir_key);
} kf_dir_scratch SEC(".maps");

/* The filter's generation; 0: none written yet (no verdict holds). */
__u32 kf_gen = 0;

/* Whether no filter path can match below the directory at dpath (len bytes). */
static __always_inline bool hr_kf_dir_clear(const char *dpath, __u32 len)
{
	__u32 zero = 0, n = len < HR_KF_PATH ? len : HR_KF_PATH;
	struct hr_kf_dir_key *k = bpf_map_lookup_elem(&kf_dir_scratch, &zero);
	struct hr_kf_dir_node *e;

	if (!k || !n)
		return false;
	bpf_probe_read_kernel(k->path, n & 127, dpath);
	if (len < HR_KF_PATH) {
		/* The mask must stay: clang drops it after the compare, and 6.1's
		 * verifier may check a reloaded copy of len, which has no bound. */
		__u32 at = len;

		barrier_var(at);
		k->path[at & 127] = '/';
		n = len + 1;
	}
	k->prefixlen = 8 * n;
	e = bpf_map_lookup_elem(&kf_dirs, k);
	return !e || (!e->covered && e->len < n);
}

/*
 * On a hit of directory entry v (len path bytes): whether no filter path
 * can match below it, by the verdict stored with the filter's generation,
 * made first if the filter moved since. The generation is read before the
 * trie: a verdict made from entries older than it cannot be stored with it.
 */
static __always_inline bool hr_kf_below_clear(struct hr_dcval *v, __u32 len)
{
	__u32 g = *(volatile __u32 *)&kf_gen;

	if (!g)
		return false;
	asm volatile("" ::: "memory");
	if (v->kf_gen != g) {
		v->kf_clear = hr_kf_dir_clear(v->path, len);
		v->kf_gen = g;
	}
	return v->kf_clear;
}

#endif
