//! The C side: one exit handler per typed syscall (plus an entry handler for the
//! TOCTOU-sensitive ones), written in terms of the emitters in bpf/include/emit.h.

use crate::table::{EventDef, Kind, Len, Param, Tables, Wire};
use std::fmt::Write;

const REGS: [&str; 6] = ["di", "si", "dx", "r10", "r8", "r9"];

/// Offset of the first parameter: 16-byte header + 8-byte return value.
pub const PARAMS_BASE: usize = 24;

fn arg(i: u8) -> String {
    format!("HR_ARG(&em, {})", REGS[i as usize])
}

fn len_expr(len: Len) -> String {
    match len {
        Len::Arg(n) => arg(n),
        Len::Ret => "hr_ret_len(&em)".into(),
        Len::All => "HR_LEN_ALL".into(),
        Len::UserPtr(n) => format!("hr_user_int({})", arg(n)),
    }
}

/// The statement that writes one fixed-size parameter at `off`.
fn fixed_stmt(p: &Param, off: usize) -> String {
    let put = match p.kind.wire() {
        Wire::I32 | Wire::U32 => "hr_put_u32",
        _ => "hr_put_u64",
    };
    let value = match &p.kind {
        Kind::Fd(i) | Kind::S32(i) | Kind::U32(i) | Kind::U64(i) | Kind::S64(i) if p.at_enter => {
            format!("hr_stash_arg(&em, st, {i}, {})", arg(*i))
        }
        Kind::Fd(i) | Kind::S32(i) | Kind::U32(i) | Kind::U64(i) | Kind::S64(i) => arg(*i),
        Kind::Tgid => "hr_tgid(&em)".into(),
        Kind::Task(f) => format!("hr_task_{f}(&em)"),
        Kind::U32User(i, o) => format!("hr_user_u32({} + {o})", arg(*i)),
        Kind::U64User(i, o) if p.at_enter => format!("hr_stash_u64(&em, st, {o}, {} + {o})", arg(*i)),
        Kind::U64User(i, o) => format!("hr_user_u64({} + {o})", arg(*i)),
        k => unreachable!("{k:?} is not fixed-size"),
    };
    format!("\t{put}(&em, {off}, {value}); /* {} */\n", p.name)
}

/// The statement that writes variable parameter `index` (wire order) of
/// syscall `nr`, or leaves it absent when user space asked not to collect it.
/// `resolved`: the event also has the kernel's path of its new fd, so the
/// kernel filter has clauses for it (the path as passed is tested for "..").
fn var_stmt(p: &Param, nr: u32, index: usize, resolved: bool) -> String {
    let call = match &p.kind {
        Kind::Path(i) if p.at_enter => format!("hr_put_path_stashed(&em, st, {}, {resolved})", arg(*i)),
        Kind::Path(i) => format!("hr_put_path(&em, {})", arg(*i)),
        Kind::Buf(i, len) => format!("hr_put_buf(&em, {}, {})", arg(*i), len_expr(*len)),
        Kind::Iov(i, c, len) => format!("hr_put_iov(&em, {}, {}, {})", arg(*i), arg(*c), len_expr(*len)),
        Kind::Sockaddr(i, len) if p.at_enter => {
            format!("hr_put_sockaddr_stashed(&em, st, {}, {})", arg(*i), len_expr(*len))
        }
        // A length the kernel writes back means nothing when the call failed.
        Kind::Sockaddr(i, len @ Len::UserPtr(_)) => {
            format!("hr_put_sockaddr(&em, {}, em.ret < 0 ? 0 : {})", arg(*i), len_expr(*len))
        }
        Kind::Sockaddr(i, len) => format!("hr_put_sockaddr(&em, {}, {})", arg(*i), len_expr(*len)),
        Kind::MsgAddr(i, kernel_filled) => {
            format!("hr_put_msgaddr(&em, {}, {})", arg(*i), if *kernel_filled { "em.ret < 0" } else { "0" })
        }
        Kind::MsgData(i, len) => format!("hr_put_msgdata(&em, {}, {})", arg(*i), len_expr(*len)),
        Kind::Argv(i) => format!("hr_put_argv(&em, {})", arg(*i)),
        Kind::FdPathRet => format!("hr_put_fdpath_ret(&em, {nr})"),
        Kind::SockPeer(i) => format!("hr_put_sockpeer(&em, {})", arg(*i)),
        Kind::SockType(i) => format!("hr_put_socktype(&em, {})", arg(*i)),
        Kind::SockAddrOf(i, local) => {
            let fd = i.map_or("em.ret".to_string(), arg);
            let ok = if i.is_some() { "em.ret >= 0 || em.ret == -HR_EINPROGRESS" } else { "em.ret >= 0" };
            format!("hr_put_sockaddr_of(&em, {fd}, {ok}, {})", *local as u8)
        }
        Kind::Exe => "hr_put_exe(&em)".into(),
        Kind::Cwd => "hr_put_cwd(&em)".into(),
        Kind::Args => "hr_put_args(&em)".into(),
        Kind::Env => "hr_put_env(&em)".into(),
        k => unreachable!("{k:?} is fixed-size"),
    };
    format!(
        "\tif (hr_collect(&em, {nr}, {index}))\n\t\t{call}; /* {} */\n\telse\n\t\thr_put_absent(&em);\n",
        p.name
    )
}

/// `guests`: syscalls whose exit this syscall's tracepoint may report
/// (execveat's success exits as execve): their entry copy marks them.
///
/// The body is written once, as `hr_do_<name>`, and entered two ways: from
/// its own syscalls:sys_exit_<name> tracepoint (`hr_exit_<name>`, per-syscall
/// attach) and as a tail call from the tp_btf sys_exit dispatcher
/// (`hr_tail_<name>`, dispatcher attach). `tail` is a constant after inlining,
/// so each entry point keeps only its own branches.
fn exit_handler(ev: &EventDef, guests: &[u32], out: &mut String) {
    let sc = &ev.syscall;
    let mut off = PARAMS_BASE;
    let mut body = String::new();
    // An open whose verdict needs no path field gets it before any is written.
    let open_clear = ev.has_enter() && ev.params.iter().any(|p| matches!(p.kind, Kind::FdPathRet));
    // So does a connect, whose verdict needs its socket (kfilter.h's clauses' l4, peer_named).
    let connect_clear = sc.name == "connect";
    let mut vars_begun = false;
    for (index, p) in ev.params.iter().enumerate() {
        match p.kind.wire().fixed_size() {
            Some(sz) => {
                // The early verdict reads the flags from the record.
                assert!(!(open_clear && vars_begun), "{}: a fixed field after a variable one", sc.name);
                body += &fixed_stmt(p, off);
                off += sz;
            }
            None => {
                if open_clear && !vars_begun {
                    body += &format!(
                        "\tif (hr_kf_open_clear(&em, {nr}, st))\n\t\treturn hr_discard(&em, {nr}, false);\n",
                        nr = sc.nr
                    );
                }
                if connect_clear && !vars_begun {
                    body += &format!(
                        "\tif (hr_kf_connect_clear(&em, {nr}, HR_ARG(&em, di)))\n\t\treturn hr_discard(&em, {nr}, false);\n",
                        nr = sc.nr
                    );
                }
                vars_begun = true;
                // The kernel-side filter matches paths on what the kernel resolved.
                if matches!(p.kind, Kind::FdPathRet) && !body.contains("kf_path =") {
                    body += "\tkf_path = em.off;\n";
                }
                body += &var_stmt(p, sc.nr, index, open_clear)
            }
        }
    }
    let kf_decl = if body.contains("kf_path =") { "\t__u32 kf_path = 0;\n" } else { "" };
    let kf_path = if kf_decl.is_empty() { "0" } else { "kf_path" };
    // Only handlers that read arguments pay for finding the saved registers;
    // the dispatcher already has them from its tracepoint.
    let regs = if body.contains("HR_ARG") { "\tem.regs = tail ? regs : hr_task_regs(&em);\n" } else { "" };
    let stash = if ev.has_enter() {
        format!("\tstruct hr_stash *st = hr_stash_take(&em, {});\n\n", sc.nr)
    } else {
        String::new()
    };
    // Whose exit is this? On another syscall's exit, act only on our own
    // entry copy; on ours, hand a guest's exit to the guest (a tail call to
    // its slot, or nothing: per-syscall, the guest sits on our tracepoint).
    let mut guard = String::new();
    // Without entry copies a guest cannot be told apart: its exit is ours
    // (a successful execveat reports as execve, as Falco's does).
    if ev.exit_also.is_some() {
        guard += &format!(
            "\tif (nr != {nr} && (no_entry[{nr}] || !hr_stash_is({nr})))\n\t\treturn 0;\n",
            nr = sc.nr
        );
    }
    for g in guests {
        guard += &format!(
            "\tif (!no_entry[{g}] && hr_stash_is({g})) {{\n\t\tif (tail)\n\t\t\thr_tail_to(ctx, {g});\n\t\treturn 0;\n\t}}\n"
        );
    }
    // Events with only fixed-size parameters are written in place in the ring.
    let fixed = ev.params.iter().all(|p| p.kind.wire().fixed_size().is_some());
    let (begin, submit) =
        if fixed { ("hr_begin_fixed", "hr_submit_fixed") } else { ("hr_begin", "hr_submit") };
    let name = &sc.name;
    let _ = write!(
        out,
        "static __always_inline int hr_do_{name}(void *ctx, struct pt_regs *regs, long nr, long ret, const bool tail)\n{{\n\
         \tstruct hr_em em;\n\
         {kf_decl}\n{guard}\tif ({begin}(&em, {nr}, ret, {off}))\n\t\treturn 0;\n\
         {regs}{stash}{body}\tif (hr_kf_drop(&em, {nr}, {kf_path}, {fixed_size}))\n\t\treturn hr_discard(&em, {nr}, {fixed});\n\
         \treturn {submit}(&em, {nr});\n}}\n\n",
        nr = sc.nr,
        fixed_size = if fixed { off } else { 0 },
    );
    // A syscall that never returns has its handler on the entry tracepoint,
    // in both attach modes.
    if ev.noreturn {
        let _ = write!(
            out,
            "SEC(\"tracepoint\")\nint hr_exit_{name}(struct hr_enter_ctx *ctx)\n{{\n\
             \thr_do_{name}(ctx, 0, ctx->nr, 0, false);\n\thr_guard_finish(ctx, &guard_tails_tp);\n\treturn 0;\n}}\n\n"
        );
        return;
    }
    let _ = write!(
        out,
        "SEC(\"tracepoint\")\nint hr_exit_{name}(struct hr_exit_ctx *ctx)\n{{\n\
         \thr_do_{name}(ctx, 0, ctx->nr, ctx->ret, false);\n\thr_guard_finish(ctx, &guard_tails_tp);\n\treturn 0;\n}}\n\n\
         SEC(\"tp_btf/sys_exit\")\nint BPF_PROG(hr_tail_{name}, struct pt_regs *regs, long ret)\n{{\n\
         \thr_do_{name}(ctx, regs, regs->orig_ax, ret, true);\n\thr_guard_finish(ctx, &guard_tails_btf);\n\treturn 0;\n}}\n\n"
    );
}

/// The entry side of a TOCTOU-sensitive syscall: copy what the pointers point at now.
fn enter_handler(ev: &EventDef, out: &mut String) {
    let sc = &ev.syscall;
    let mut body = String::new();
    let mut extra_size = 0u16;
    for p in ev.params.iter().filter(|p| p.at_enter) {
        match &p.kind {
            Kind::Path(i) => body += &format!("\thr_stash_path(st, task, (const void *)ctx->args[{i}]);\n"),
            Kind::Sockaddr(i, Len::Arg(n)) => {
                body +=
                    &format!("\thr_stash_extra(st, task, (const void *)ctx->args[{i}], ctx->args[{n}]);\n")
            }
            Kind::U64User(_, o) => extra_size = extra_size.max(o + 8),
            // Only the arguments the syscall has: reading past its tracepoint
            // record makes the attach fail.
            Kind::Fd(i) | Kind::S32(i) | Kind::U32(i) | Kind::U64(i) | Kind::S64(i) => {
                body += &format!("\tst->args[{i}] = ctx->args[{i}];\n")
            }
            k => unreachable!("{k:?} cannot be read at entry"),
        }
    }
    if extra_size > 0 {
        let i = ev.params.iter().find_map(|p| match p.kind {
            Kind::U64User(i, _) if p.at_enter => Some(i),
            _ => None,
        });
        body +=
            &format!("\thr_stash_extra(st, task, (const void *)ctx->args[{}], {extra_size});\n", i.unwrap());
    }
    let _ = write!(
        out,
        "SEC(\"tracepoint\")\nint hr_enter_{name}(struct hr_enter_ctx *ctx)\n{{\n\
         \tstruct task_struct *task;\n\tstruct hr_stash *st = hr_stash_begin({nr}, &task);\n\n\
         \tif (!st)\n\t\treturn 0;\n{body}\treturn 0;\n}}\n\n",
        name = sc.name,
        nr = sc.nr,
    );
}

/// Everything the BPF object needs from the tables, as one C file to #include.
pub fn generate(t: &Tables) -> String {
    let mut out =
        String::from("/* Generated by crates/harrier-eventgen from schema/events.tbl: do not edit. */\n\n");
    let _ = writeln!(out, "#define HR_SCHEMA_VERSION {}\n", t.schema_version);
    for ev in &t.events {
        if ev.has_enter() {
            enter_handler(ev, &mut out);
        }
        let guests: Vec<u32> = t
            .events
            .iter()
            .filter(|g| g.exit_also.as_ref().is_some_and(|o| o.nr == ev.syscall.nr))
            .map(|g| g.syscall.nr)
            .collect();
        exit_handler(ev, &guests, &mut out);
    }
    out
}
