/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * User memory read without a helper call: the task's page tables walked
 * with plain loads to the page behind an address, and that page read through
 * the kernel's direct map. bpf_probe_read_user_str costs ~100 ns here (its
 * call chain, hardened usercopy, STAC/CLAC, every return paying the SRSO and
 * retpoline mitigations); the walk is a few dependent loads.
 *
 * x86-64, where the kernel has bpf_rdonly_cast, with user space's word for
 * the paging depth, where RAM ends and how wide an address is (uread.rs).
 * The direct map's base is random (KASLR): it is found once, from the task's
 * own top page table, which lies in the direct map: the 1 GiB-aligned base
 * (KASLR's step) under which that table's address walks to itself. The first
 * copies are checked against the helper's; a difference turns the walk off.
 * Anything unusual goes to the helper: no mapping, a page that is not plain
 * cached RAM below RAM's end or has a protection key, a string with no NUL
 * before its page's end or within HR_UREAD_WORDS words, an address outside
 * user space.
 *
 * A page unmapped by another thread during the copy: the leaf entry is read
 * again after it, and the kernel frees a page only after clearing its entry.
 * Page tables are freed after an RCU grace period, which a BPF program holds
 * off.
 */
#ifndef HARRIER_UREAD_H
#define HARRIER_UREAD_H

/* Set by user space: 0 (off), or the page tables' depth (4 or 5). */
const volatile __u32 uread_levels = 0;
/* One past the highest RAM address: bounds the search for the base. */
const volatile __u64 uread_ram_end = 0;
/* The physical address bits of a page-table entry. */
const volatile __u64 uread_pfn_mask = 0;
/* Tests: the helper's check reads this many bytes further on (a walk that
 * disagrees, to see it turn itself off). */
const volatile __u64 uread_check_skew = 0;

#define HR_UREAD_UNKNOWN 0	/* the base not searched for yet */
#define HR_UREAD_ON 1
#define HR_UREAD_OFF 2		/* no base found, or a copy the helper disagreed with */
__u64 uread_base = 0;
__u32 uread_state = HR_UREAD_UNKNOWN;
/* How many walked copies are checked against the helper's (user space may
 * ask for more), and how many were: plain updates, a few more or fewer do
 * not matter. */
const volatile __u64 uread_check_limit = 64;
__u64 uread_checks = 0;

#define HR_UREAD_WORDS 16

#define HR_PTE_PRESENT 0x1ULL
#define HR_PTE_USER 0x4ULL
#define HR_PTE_PWT 0x8ULL
#define HR_PTE_PCD 0x10ULL
#define HR_PTE_PSE 0x80ULL		/* a large page (PUD, PMD); PAT in a 4K entry */
#define HR_PTE_SPECIAL 0x200ULL		/* a PFN map (devices): not plain RAM */
#define HR_PTE_PAT_LARGE 0x1000ULL
#define HR_PTE_PKEY (0xfULL << 59)

/* The task's top page table (mm->pgd); 0 for a kernel thread. */
static __always_inline __u64 hr_pgd_of(struct task_struct *t)
{
	__u64 mm = hr_kword((__u64)t + bpf_core_field_offset(struct task_struct, mm));

	return mm ? hr_kword(mm + bpf_core_field_offset(struct mm_struct, pgd)) : 0;
}

/* Where a walk ended: the last entry, its address and the page's size. */
struct hr_pt_leaf {
	__u64 at;
	__u64 entry;
	__u64 size;
};

/*
 * The physical address of va under the top table at `top` (a direct-map
 * address), reading lower tables through the direct map at base; 0 if va
 * is not mapped.
 */
static __always_inline __u64 hr_pt_walk(__u64 base, __u64 top, __u64 va, struct hr_pt_leaf *leaf)
{
	__u64 table = top, at, e, size;
	int first = uread_levels == 5 ? 0 : 1;

#pragma unroll
	for (int l = 0; l < 5; l++) {
		int shift = 48 - 9 * l;

		if (l < first)
			continue;
		at = table + ((va >> shift) & 511) * 8;
		e = hr_kword(at);
		if (!(e & HR_PTE_PRESENT))
			return 0;
		if (l == 4 || ((l == 2 || l == 3) && (e & HR_PTE_PSE))) {
			size = 1ULL << shift;
			leaf->at = at;
			leaf->entry = e;
			leaf->size = size;
			return (e & uread_pfn_mask & ~(size - 1)) + (va & (size - 1));
		}
		table = base + (e & uread_pfn_mask);
	}
	return 0;
}

struct hr_uread_search {
	__u64 top;
	__u64 lo;
};

static long hr_uread_try(__u32 i, struct hr_uread_search *s)
{
	__u64 base = s->lo + ((__u64)i << 30);
	struct hr_pt_leaf leaf;

	if (base > s->top)
		return 1;
	if (hr_pt_walk(base, s->top, s->top, &leaf) != s->top - base)
		return 0;
	uread_base = base;
	return 1;
}

/* Finds the direct map's base, lowest candidate first: a wrong one then
 * reads below the map's end. A global function: verified once. */
__attribute__((noinline)) int hr_uread_find(void)
{
	struct hr_uread_search s = {};

	s.top = hr_pgd_of(bpf_get_current_task_btf());
	if (!s.top)
		return 0;
	s.lo = (s.top - uread_ram_end) & ~((1ULL << 30) - 1);
	bpf_loop((uread_ram_end >> 30) + 2, hr_uread_try, &s, 0);
	uread_state = uread_base ? HR_UREAD_ON : HR_UREAD_OFF;
	return 0;
}

/*
 * The direct-map address of user address uptr of task t, if it is plain
 * RAM; *room: the bytes from there to its page's end, *leaf: the entry to
 * read again once copied. 0: use the helper.
 */
static __always_inline __u64 hr_uread_page(struct task_struct *t, __u64 uptr, __u64 *room,
					   struct hr_pt_leaf *leaf)
{
	__u64 limit = (uread_levels == 5 ? 1ULL << 56 : 1ULL << 47) - 4096, top, pa;

	if (uread_state != HR_UREAD_ON) {
		if (!uread_levels || uread_state == HR_UREAD_OFF || !hr_has_cast())
			return 0;
		hr_uread_find();
		if (uread_state != HR_UREAD_ON)
			return 0;
	}
	if (uptr < 4096 || uptr >= limit || !(top = hr_pgd_of(t)))
		return 0;
	pa = hr_pt_walk(uread_base, top, uptr, leaf);
	/* Past RAM (persistent memory, a device's) the direct map may hold
	 * something else, or nothing. */
	if (!pa || pa >= uread_ram_end || !(leaf->entry & HR_PTE_USER) ||
	    (leaf->entry & (HR_PTE_PWT | HR_PTE_PCD | HR_PTE_PKEY)))
		return 0;
	/* Another caching type (PAT: bit 7 of a 4K entry, 12 of a large one)
	 * or a PFN map: not plain RAM. */
	if (leaf->entry & (leaf->size == 4096 ? HR_PTE_PSE | HR_PTE_SPECIAL : HR_PTE_PAT_LARGE))
		return 0;
	*room = 4096 - (uptr & 4095);
	return uread_base + pa;
}

/* The index of the first zero byte of a word (z: its zero bytes' top bits, not 0). */
static __always_inline __u32 hr_first_zero(__u64 z)
{
	__u64 low = z & -z;
	__u32 i = 0;

	if (low >> 32)
		i += 4, low >>= 32;
	if (low >> 16)
		i += 2, low >>= 16;
	if (low >> 8)
		i += 1;
	return i;
}

/* Whether the helper reads what the walk did (str: up to a NUL); a
 * difference turns the walk off. While checks remain. */
static __noinline bool hr_uread_agrees(const __u64 *got, long len, __u64 uptr, bool str)
{
	__u64 want[HR_UREAD_WORDS] = {};
	const void *p = (const void *)(uptr + uread_check_skew);
	__u32 size = len < sizeof(want) ? len : sizeof(want);
	long n = str ? bpf_probe_read_user_str(want, sizeof(want), p) - 1
		     : (bpf_probe_read_user(want, size, p) ? -1 : len);

	if (n != len)
		goto off;
	for (int i = 0; i < HR_UREAD_WORDS; i++) {
		__u64 keep = len - i * 8 >= 8 ? ~0ULL : (1ULL << ((len - i * 8) * 8)) - 1;

		if (i * 8 >= len)
			break;
		if ((got[i] ^ want[i]) & keep)
			goto off;
	}
	return true;
off:
	uread_state = HR_UREAD_OFF;
	return false;
}

static __always_inline bool hr_uread_checked(const __u64 *got, long len, __u64 uptr, bool str)
{
	if (uread_checks >= uread_check_limit)
		return true;
	uread_checks++;
	return hr_uread_agrees(got, len, uptr, str);
}

/*
 * The NUL-terminated string at user address uptr of task t into dst (up to
 * HR_UREAD_WORDS words; the bytes past the NUL zeroed): its length without
 * the NUL, or -1: use the helper.
 */
static __always_inline long hr_uread_str(__u64 *dst, __u64 uptr, struct task_struct *t)
{
	const __u64 ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	struct hr_pt_leaf leaf;
	__u64 room = 0, src = hr_uread_page(t, uptr, &room, &leaf), w, z;
	long len = -1;

	if (!src)
		return -1;
#pragma unroll
	for (int i = 0; i < HR_UREAD_WORDS; i++) {
		if (i * 8 + 8 <= room) {
			w = hr_kword(src + i * 8);
			z = (w - ones) & ~w & highs;
		} else {
			/* The page's last bytes, read as the word that ends with it:
			 * past it lies another page, whose direct-map address may
			 * fault and read as 0, a NUL that is not there. */
			__u64 v = room - i * 8;

			if (room < 8)
				break;
			w = hr_kword(src + room - 8) >> ((8 - v) * 8);
			z = (w - ones) & ~w & highs & ((1ULL << (v * 8)) - 1);
			if (!z)
				break;
		}
		if (z) {
			__u32 k = hr_first_zero(z);

			len = i * 8 + k;
			dst[i] = k ? w & ((1ULL << (k * 8)) - 1) : 0;
			break;
		}
		dst[i] = w;
	}
	/* No NUL within reach, or an empty string, or a page the direct map
	 * lacks (its loads read 0): the helper tells them apart. */
	if (len <= 0 || hr_kword(leaf.at) != leaf.entry)
		return -1;
	return hr_uread_checked(dst, len, uptr, true) ? len : -1;
}

/* len bytes (at most HR_UREAD_WORDS words) at user address uptr of task t
 * into dst, whole words (bytes past len zeroed); false: use the helper. */
static __always_inline bool hr_uread_bytes(__u64 *dst, __u64 uptr, __u64 len, struct task_struct *t)
{
	struct hr_pt_leaf leaf;
	__u64 room = 0, src = hr_uread_page(t, uptr, &room, &leaf), w;

	if (!src || !len || ((len + 7) & ~7ULL) > room || len > HR_UREAD_WORDS * 8)
		return false;
#pragma unroll
	for (int i = 0; i < HR_UREAD_WORDS; i++) {
		if (i * 8 >= len)
			break;
		w = hr_kword(src + i * 8);
		dst[i] = len - i * 8 >= 8 ? w : w & ((1ULL << ((len - i * 8) * 8)) - 1);
	}
	return hr_kword(leaf.at) == leaf.entry && hr_uread_checked(dst, len, uptr, false);
}

#endif
