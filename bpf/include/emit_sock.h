/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a socket really is, from the kernel's objects (not the caller's
 * buffer): the peer a connect reached, the address a bind took. Part of
 * emit.h (included from it: it uses the event writer there).
 */
#ifndef HARRIER_EMIT_SOCK_H
#define HARRIER_EMIT_SOCK_H

#define HR_AF_UNIX 1
#define HR_AF_INET 2
#define HR_AF_INET6 10

#define HR_S_IFSOCK 0140000
#define HR_O_NONBLOCK 04000

/* The struct sock of file f, or 0 if f is no socket (a dup's fd may be any
 * file, whose private_data is no struct socket). */
static __always_inline __u64 hr_sock_of_file(__u64 f)
{
	__u64 inode = f ? (__u64)hr_kread(f, struct file, f_inode) : 0, sock;

	if (!inode || (hr_kread(inode, struct inode, i_mode) & HR_S_IFMT) != HR_S_IFSOCK)
		return 0;
	sock = hr_kread(f, struct file, private_data);
	return sock ? (__u64)hr_kread(sock, struct socket, sk) : 0;
}

/* The struct sock behind fd, or 0; the file in em->sock_file. Looked up once
 * per event: a connect's peer, address and type all ask. */
static __always_inline __u64 hr_sock_of(struct hr_em *em, __s64 fd)
{
	if (em->sock_fd != fd) {
		em->sock_file = hr_fd_file(em, fd);
		em->sock = hr_sock_of_file(em->sock_file);
		em->sock_fd = fd;
	}
	return em->sock;
}

/*
 * An address the kernel holds for the socket behind fd, written as a struct
 * sockaddr: the peer (connect, accept) or, with `local`, the socket's own
 * (bind, and the port connect picked). Only when `ok` (the call succeeded or
 * is in progress); a racing thread may change the caller's buffer, not this.
 */
static __always_inline void hr_put_sockaddr_of(struct hr_em *em, __s64 fd, bool ok, bool local)
{
	__u8 *slot = hr_var_begin(em);
	__u64 sk;
	__u16 family;
	__u32 n = 0;

	if (!slot)
		return;
	if (!ok)
		goto out;
	if (!(sk = hr_sock_of(em, fd)))
		goto out;
	family = hr_kread(sk, struct sock, __sk_common.skc_family);
	__builtin_memset(slot + 2, 0, 28);
	*(__u16 *)(slot + 2) = family;
	if (family == HR_AF_INET || family == HR_AF_INET6) {
		/* skc_num (local port) is in host order, skc_dport in network order. */
		*(__u16 *)(slot + 4) = local ? bpf_htons(hr_kread(sk, struct sock, __sk_common.skc_num))
					     : hr_kread(sk, struct sock, __sk_common.skc_dport);
		if (family == HR_AF_INET) {
			*(__u32 *)(slot + 6) = local ? hr_kread(sk, struct sock, __sk_common.skc_rcv_saddr)
						     : hr_kread(sk, struct sock, __sk_common.skc_daddr);
			n = 16;
		} else {
			struct sock *s = (struct sock *)sk;

			if (local)
				bpf_core_read(slot + 10, 16, &s->__sk_common.skc_v6_rcv_saddr);
			else
				bpf_core_read(slot + 10, 16, &s->__sk_common.skc_v6_daddr);
			n = 28;
		}
	} else if (family == HR_AF_UNIX) {
		__u64 peer = local ? sk : (__u64)hr_kread(sk, struct unix_sock, peer);
		__u64 addr = peer ? (__u64)hr_kread(peer, struct unix_sock, addr) : 0;
		__u64 len = addr ? hr_kread(addr, struct unix_address, len) : 0;

		/* An unbound socket has no name: the family alone says unix. */
		hr_clamp(len, HR_SOCKADDR_MAX);
		if (len)
			bpf_probe_read_kernel(slot + 2, len, &((struct unix_address *)addr)->name);
		n = len ? len : 2;
	}
out:
	hr_var_end(em, slot, n);
}

/* What a connect really connected to (or what a dup's socket is connected to). */
static __always_inline void hr_put_sockpeer(struct hr_em *em, __u64 fd)
{
	hr_put_sockaddr_of(em, fd, em->ret >= 0 || em->ret == -HR_EINPROGRESS, 0);
}

/* What the socket behind fd is (events.tbl's socktype): enough for user space
 * to make the entry socket() would have made, when the kernel filter kept that
 * socket() back. The fd's flags come from the fd table, as they are now. */
static __always_inline void hr_put_socktype(struct hr_em *em, __s64 fd)
{
	__u8 *slot = hr_var_begin(em);
	struct fdtable *fdt;
	__u64 sk, f, word;
	__u16 *v;

	/* Whatever the call returned: a failed connect's socket is there too,
	 * and its rules may read it (user space ignores a failed dup). */
	if (!slot)
		return;
	if (!(sk = hr_sock_of(em, fd)))
		goto none;
	f = em->sock_file;
	v = (__u16 *)(slot + 2);
	v[0] = hr_kread(sk, struct sock, __sk_common.skc_family);
	v[1] = hr_kread(sk, struct sock, sk_type);
	v[2] = hr_kread(sk, struct sock, sk_protocol);
	/* f is fd's, so fd is below max_fds: its close-on-exec word is there. */
	fdt = em->task->files->fdt;
	/* The bitmap's word read as an rb_node's first field, an unsigned long
	 * in every kernel: a plain load where the kernel has the cast (as
	 * hr_fd_file_of reads a slot), not a helper call. */
	word = hr_kread((__u64)fdt->close_on_exec + (fd >> 6) * 8, struct rb_node, __rb_parent_color);
	v[3] = ((word >> (fd & 63)) & 1) | ((hr_kread(f, struct file, f_flags) & HR_O_NONBLOCK) ? 2 : 0);
	hr_var_end(em, slot, 8);
	return;
none:
	hr_var_end(em, slot, 0);
}

/* Whether sk's peer is an address of a name some rule compares fd.sip with. */
static __always_inline bool hr_kf_peer_named(__u64 sk)
{
	struct in6_addr a = {};
	__u32 zero = 0, *n = bpf_map_lookup_elem(&kf_peers_n, &zero);
	__u16 family;

	if (!n || !*n)
		return false;
	family = hr_kread(sk, struct sock, __sk_common.skc_family);
	if (family == HR_AF_INET) {
		a.in6_u.u6_addr16[5] = 0xffff;
		a.in6_u.u6_addr32[3] = hr_kread(sk, struct sock, __sk_common.skc_daddr);
	} else if (family == HR_AF_INET6) {
		bpf_core_read(&a, sizeof(a), &((struct sock *)sk)->__sk_common.skc_v6_daddr);
	} else {
		return false;
	}
	return bpf_map_lookup_elem(&kf_peers, &a);
}

/*
 * A connect no rule can use, judged before anything is written: its fd is
 * one user space was never told of (a socket() kept back, untold.h), so
 * the state needs nothing of it either, and no clause holds of it (its
 * socket's protocol, its peer among the rules' names). Kept back, the fd
 * stays untold and its close stays in the kernel too.
 */
static __always_inline bool hr_kf_connect_clear(struct hr_em *em, __u32 nr, __s64 fd)
{
	struct hr_kf *kf;
	__u16 proto;
	__u64 sk;

	if (!kf_enabled || !(kf = bpf_map_lookup_elem(&kfilter, &nr)) || !kf->clauses)
		return false;
	if (!hr_untold_is(em->task, fd) || !(sk = hr_sock_of(em, fd)))
		return false;
	proto = hr_kread(sk, struct sock, sk_protocol);
	for (__u32 i = 0; i < HR_KF_CLAUSES; i++) {
		struct hr_kf_clause *cl = &kf->c[i];

		if (!cl->used || (cl->need_success && em->ret < 0) || (cl->l4 && cl->l4 != proto))
			continue;
		if (cl->peer_named && !hr_kf_peer_named(sk))
			continue;
		return false;
	}
	return true;
}

#endif
