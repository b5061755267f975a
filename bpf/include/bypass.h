/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layout shared by bpf/bypass.bpf.c, the C library bypass/harrier-bypass.c and
 * the Rust loader crates/harrier-bypass (which mirrors it by hand: keep in sync).
 *
 * One BPF_F_MMAPABLE array of 64-byte entries, pinned 0666 and frozen:
 *   entry 0            struct hb_header
 *   entries 1..nslots  struct hb_slot, one per registered thread
 * Only BPF programs write it. Readers use the seqlock in each slot.
 */
#ifndef HARRIER_BYPASS_H
#define HARRIER_BYPASS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define HB_MAGIC        0x50594248u /* "HBYP" little endian */
#define HB_VERSION      1u
#define HB_ENTRY_SIZE   64
/* A registering thread's slot is one of HB_WINDOW consecutive entries starting
 * at 1 + nonce % nslots; both BPF and the library derive it from the nonce. */
#define HB_WINDOW       8

#define HB_PIN_DIR      "/sys/fs/bpf/harrier-bypass"
#define HB_SLOTS_PIN    HB_PIN_DIR "/slots"
#define HB_REGISTER_FN  "harrier_bypass_register"
#define HB_REPORT_FN    "harrier_bypass_report"

/* hb_slot.flags */
#define HB_F_IDS   1u /* uid/euid/gid/egid hold the caller's user-namespace view */
#define HB_F_PPID  2u /* ppid is valid while ppid_epoch == header.ppid_epoch */

struct hb_header {
	__u32 magic;
	__u32 version;
	__u32 nslots;
	__u32 disabled;    /* set by `stop` (via the disable program) before unpinning */
	__u32 ppid_epoch;  /* bumped whenever a task with children exits */
	__u32 quota;       /* slots per uid */
	__u32 window;
	__u32 pad0;
	__u64 pad1[4];
};

struct hb_slot {
	__u32 seq;         /* seqlock: odd while BPF writes the slot */
	__u32 flags;       /* HB_F_* */
	__u64 nonce;       /* owner token passed by the thread; 0 = free */
	__u64 owner;       /* claim word (BPF only); 0 = free */
	__s32 pid;         /* tgid, tid, parent tgid in the owner's pid namespace */
	__s32 tid;
	__s32 ppid;
	__u32 ppid_epoch;
	__u32 uid;         /* real/effective ids in the owner's user namespace */
	__u32 euid;
	__u32 gid;
	__u32 egid;
	__u32 charged_uid; /* kernel uid charged for the quota */
	__u32 pad;
};

union hb_entry {
	struct hb_header h;
	struct hb_slot s;
};

/* Per-uid counters (hash map "uid_stats", key: kernel uid). */
struct hb_uid_stats {
	__s64 in_use;
	__u64 registrations;
	__u64 refused;          /* quota, full window, duplicate nonce, shared TLS */
	__u64 reported_bypassed; /* summed from harrier_bypass_report() at process exit */
	__u64 reported_fallbacks;
};

/* Global counters (array "stats", one u64 per index). */
enum hb_stat {
	HB_ST_REGISTERED,
	HB_ST_REFUSED_DISABLED,
	HB_ST_REFUSED_QUOTA,
	HB_ST_REFUSED_FULL,
	HB_ST_REFUSED_DUP,
	HB_ST_REFUSED_SHARED_TLS,
	HB_ST_FREED_EXIT,
	HB_ST_FREED_EXEC,
	HB_ST_FREED_CLONE_VM,
	HB_ST_FREED_REREGISTER,
	HB_ST_PPID_EPOCH,
	HB_ST_REPORTS,
	HB_ST_MAX,
};

/* Task-local storage: which slot the task owns, and why it may not own one. */
#define HB_T_BORROWED 1u /* runs on another task's TLS (CLONE_VM child sharing TLS) */
#define HB_T_TAINTED  2u /* lent its TLS to a concurrently running CLONE_VM child */
struct hb_task {
	__u32 slot;  /* 0 = none */
	__u32 flags;
};

#endif
